// Command bench is `make bench`: it measures, on loopback and over repeated
// runs, how long etcdlet takes from a members-file change to the new member
// voting and to a removed member gone, next to a floor measured in the same
// run (the same etcd calls issued directly with the etcd client against
// plain embedded etcd processes, no agent), and the idle CPU and RSS of
// agents next to plain etcd processes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

func main() {
	if os.Getenv(memberEnv) != "" {
		runMember() // re-executed as a floor member
		return
	}
	runs := flag.Int("runs", 5, "join/leave cycles to measure")
	idle := flag.Duration("idle", time.Minute, "how long to measure idle CPU and RSS")
	flag.Parse()

	dir, err := os.MkdirTemp("", "etcdlet-bench-")
	check(err)
	defer os.RemoveAll(dir)
	binary, err := harness.BuildBinary(dir)
	check(err)

	fmt.Printf("etcdlet benchmark: %d join/leave cycles, idle over %s, on loopback\n\n", *runs, *idle)
	agent := measureAgents(binary, filepath.Join(dir, "agents"), *runs, *idle)
	floor := measureFloor(filepath.Join(dir, "floor"), *runs, *idle)
	report(agent, floor)

	sp := measureRenderWrite(filepath.Join(dir, "render"), 2000)
	measureReady(binary, filepath.Join(dir, "ready"), *runs, &sp)
	reportStaticPod(sp)
}

// figures is what one side measured.
type figures struct {
	join, leave []time.Duration
	cpu         []float64 // percent of one core, per process
	rss         []int64   // bytes, per process
}

func report(agent, floor figures) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tetcdlet (median, min–max)\tfloor (median, min–max)\tratio\t")
	row := func(name string, a, f []time.Duration) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fx\t\n", name, durations(a), durations(f), float64(median(a))/float64(median(f)))
	}
	row("members-file change → new member voting", agent.join, floor.join)
	row("members-file change → removed member gone", agent.leave, floor.leave)
	fmt.Fprintf(tw, "idle CPU per process (%% of one core)\t%s\t%s\t%.1fx\t\n", floats(agent.cpu), floats(floor.cpu), mean(agent.cpu)/mean(floor.cpu))
	fmt.Fprintf(tw, "idle RSS per process\t%s\t%s\t%.1fx\t\n", sizes(agent.rss), sizes(floor.rss), float64(meanInt(agent.rss))/float64(meanInt(floor.rss)))
	tw.Flush()
	fmt.Println("\nfloor: MemberAddAsLearner, start the pre-started 4th etcd process, MemberPromote every 10ms until it succeeds;")
	fmt.Println("       MemberRemove; all with the etcd client, no agent. Both sides poll the member list every 5ms.")
}

func durations(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%s (%s–%s)", round(median(s)), round(s[0]), round(s[len(s)-1]))
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func floats(fs []float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%.2f", f)
	}
	return fmt.Sprintf("mean %.2f (%s)", mean(fs), strings.Join(parts, ", "))
}

func sizes(bs []int64) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%.0f", float64(b)/(1<<20))
	}
	return fmt.Sprintf("mean %.0f MiB (%s)", float64(meanInt(bs))/(1<<20), strings.Join(parts, ", "))
}

func mean(fs []float64) float64 {
	sum := 0.0
	for _, f := range fs {
		sum += f
	}
	return sum / float64(len(fs))
}

func meanInt(bs []int64) int64 {
	var sum int64
	for _, b := range bs {
		sum += b
	}
	return sum / int64(len(bs))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// tb lets the harness run outside `go test`: failures end the program.
type tb struct{ cleanups []func() }

func (*tb) Helper()                         {}
func (*tb) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (t *tb) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	t.cleanup()
	os.Exit(1)
}
func (t *tb) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (*tb) Failed() bool       { return false }

func (t *tb) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}
