package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcdlet/etcdlet/config"
)

func reportMembership(m membershipReport) {
	fmt.Printf("membership and the embedded runtime (etcd in the agent's process), a keyspace of %d MiB\n", m.keyspace)
	tw := table()
	fmt.Fprintln(tw, "measure\tetcdlet\tfloor\tratio\t")
	fmt.Fprintf(tw, "members-file write → the joining member seen a voter\t%s\t%s\t%s\t\n",
		durations(m.agents.join), durations(m.floor.join), ratio(float64(median(m.agents.join)), float64(median(m.floor.join))))
	fmt.Fprintf(tw, "members-file write → the leader seen gone\t%s\t%s\t%s\t\n",
		durations(m.agents.leave), durations(m.floor.leave), ratio(float64(median(m.agents.leave)), float64(median(m.floor.leave))))
	beyond := beyondHoldDown(m.agents.leave)
	fmt.Fprintf(tw, "  the same, beyond agent.removalHoldDown (%s)\t%s\t%s\t%s\t\n", config.DefaultRemovalHoldDown,
		durations(beyond), durations(m.floor.leave), ratio(float64(median(beyond)), float64(median(m.floor.leave))))
	fmt.Fprintf(tw, "longest write gap while the leader leaves\t%s\t%s\t%s\t\n",
		durations(m.agents.gap), durations(m.floor.gap), ratio(float64(median(m.agents.gap)), float64(median(m.floor.gap))))
	fmt.Fprintf(tw, "members-file write → a member replaced (the new one a voter, the old gone)\t%s\t%s\t%s\t\n",
		durations(m.agents.replace), durations(m.floor.replace), ratio(float64(median(m.agents.replace)), float64(median(m.floor.replace))))
	replaceBeyond := beyondHoldDown(m.agents.replace)
	fmt.Fprintf(tw, "  the same, beyond agent.removalHoldDown (%s)\t%s\t%s\t%s\t\n", config.DefaultRemovalHoldDown,
		durations(replaceBeyond), durations(m.floor.replace), ratio(float64(median(replaceBeyond)), float64(median(m.floor.replace))))
	fmt.Fprintf(tw, "CPU time of the joining node during the join, s (agent with etcd | plain etcd)\t%s\t%s\t%s\t\n",
		seconds(m.agents.joinCPU), seconds(m.floor.joinCPU), ratio(medianFloat(m.agents.joinCPU), medianFloat(m.floor.joinCPU)))
	fmt.Fprintf(tw, "idle CPU per node, %% of one core (agent with etcd | plain etcd)\t%s\t%s\t%s\t\n",
		percents(m.agentsIdle.cpu), percents(m.floorIdle.cpu), ratio(mean(m.agentsIdle.cpu), mean(m.floorIdle.cpu)))
	fmt.Fprintf(tw, "idle RSS per node (agent with etcd | plain etcd)\t%s\t%s\t%s\t\n",
		sizes(m.agentsIdle.rss), sizes(m.floorIdle.rss), ratio(meanInt(m.agentsIdle.rss), meanInt(m.floorIdle.rss)))
	tw.Flush()
	fmt.Println(`  times: median (min–max) over the cycles. A cycle lists the node that is out (at first the 4th) and
  it joins; then it unlists the leader, which hands leadership over and leaves, while a writer puts a key
  every 20ms; then one write lists the node that left instead of a member that does not lead (a replacement),
  and that member is the one out in the next cycle. Before each change both sides write the page cache
  back (sync: the last cycle's copies are not written during the next), as root drop the clean pages no
  process maps (drop_caches 1: no join reclaims memory that earlier cycles filled), and wait 6s (etcd
  adds a member only once every voter has been connected for 5s). Both clocks start at the same
  members-file write (a temporary file renamed over the list) and stop when a MemberList, asked every 5ms
  from the benchmark, shows the joining member a voter, or no longer shows the leader (a replacement: both).
  With -keyspace, both sides' clusters hold that many MiB (8 KiB values) before the first cycle, so every
  join copies them; both sides promote the learner as soon as etcd allows, before it applied the copy
  and serves. The joining node's CPU time is read from /proc (the nanoseconds its threads ran) at the
  write and at the promotion: the agent's own work during the join, beside the same etcd's.
  etcdlet: four agents with etcdlet's defaults; an unlisted agent idles, a listed one's member joins as a
  learner and is promoted; an unlisted member is removed (a leader hands over first) and its data moved aside,
  once the list has held for agent.removalHoldDown (a list that flaps removes nobody): the rows "beyond" are
  the leave and the replacement less that hold-down, the agents' own cost.
  floor: plain etcd processes with the same embedded configuration, and an fsnotify watch of the members
  file that on the write's event calls MemberAddAsLearner, hands a pre-started etcd process its spec and
  calls MemberPromote every 10ms until etcd allows it; then asks each leaving member's Status, calls
  MoveLeader when it leads, and MemberRemove. No agent.
  idle: CPU and RSS of each of the three members' nodes over one window after a 5s quiet period.`)
	fmt.Println()
}

func reportStaticPod(f staticPodFigures) {
	fmt.Println("static-pod runtime (etcd in its own process, run by the kubelet)")
	tw := table()
	fmt.Fprintln(tw, "measure\tetcdlet\tfloor\tratio\t")
	fmt.Fprintf(tw, "idle CPU of etcd, %% of one core (managed | agents stopped)\t%s\t%s\t%s\t\n",
		percents(f.etcd.cpu), percents(f.etcdAlone.cpu), ratio(mean(f.etcd.cpu), mean(f.etcdAlone.cpu)))
	fmt.Fprintf(tw, "idle RSS of etcd (managed | agents stopped)\t%s\t%s\t%s\t\n",
		sizes(f.etcd.rss), sizes(f.etcdAlone.rss), ratio(meanInt(f.etcd.rss), meanInt(f.etcdAlone.rss)))
	fmt.Fprintf(tw, "idle CPU of the agent alone, %% of one core (settled pace | a pass every %s)\t%s\t%s\t%s\t\n",
		config.DefaultReconcileInterval, percents(f.agents.cpu), percents(f.agentsUnpaced.cpu), ratio(mean(f.agents.cpu), mean(f.agentsUnpaced.cpu)))
	fmt.Fprintf(tw, "idle RSS of the agent alone\t%s\t\t\t\n", sizes(f.agents.rss))
	fmt.Fprintf(tw, "render + write a changed manifest (atomic write of the same bytes)\t%s\t%s\t%s\t\n",
		round(f.renderWrite), round(f.writeFloor), ratio(float64(f.renderWrite), float64(f.writeFloor)))
	fmt.Fprintf(tw, "render an unchanged manifest, no write (read and compare the file)\t%s\t%s\t%s\t\n",
		round(f.renderSkip), round(f.skipFloor), ratio(float64(f.renderSkip), float64(f.skipFloor)))
	fmt.Fprintf(tw, "agent start → READY=1, manifest in place (etcdlet status)\t%s\t%s\t%s\t\n",
		durations(f.ready), durations(f.readyFloor), ratio(float64(median(f.ready)), float64(median(f.readyFloor))))
	tw.Flush()
	fmt.Println(`  idle: three agents and their etcd processes measured over one window; then the agents are stopped
  (etcd keeps running under the kubelet, as on a node while etcdlet restarts) and the same etcd processes
  are measured again. The agent alone has no floor: without etcdlet there is no agent; its CPU is compared
  with the same agents restarted with agent.idleInterval at the reconcile interval (no slowing down).
  READY=1: an agent restarted with its manifest in place and unchanged, until it notifies systemd; the
  floor is 'etcdlet status' on the same config (start, load it, one look at the cluster, exit).`)
}

func table() *tabwriter.Writer {
	return tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func durations(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%s (%s–%s)", round(median(s)), round(s[0]), round(s[len(s)-1]))
}

func round(d time.Duration) time.Duration {
	switch {
	case d < 100*time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	case d < 10*time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Millisecond)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// seconds renders CPU times: median (min–max).
func seconds(fs []float64) string {
	s := slices.Clone(fs)
	slices.Sort(s)
	return fmt.Sprintf("%.2f (%.2f–%.2f)", medianFloat(s), s[0], s[len(s)-1])
}

func medianFloat(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	return s[len(s)/2]
}

func percents(fs []float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%.2f", f)
	}
	return fmt.Sprintf("%.2f (%s)", mean(fs), strings.Join(parts, ", "))
}

func sizes(bs []int64) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%.0f", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.0f MiB (%s)", meanInt(bs)/(1<<20), strings.Join(parts, ", "))
}

func mean(fs []float64) float64 {
	sum := 0.0
	for _, f := range fs {
		sum += f
	}
	return sum / float64(len(fs))
}

func meanInt(bs []int64) float64 {
	var sum int64
	for _, b := range bs {
		sum += b
	}
	return float64(sum) / float64(len(bs))
}

// beyondHoldDown is each time less agent.removalHoldDown: what a removal
// costs beyond the wait that keeps a flapping list from removing anyone.
func beyondHoldDown(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d - config.DefaultRemovalHoldDown
	}
	return out
}
