package sim

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	schedules = flag.Int("sim.schedules", 10000, "schedules TestSchedules plays (300 under the race detector unless given)")
	seed      = flag.Uint64("sim.seed", 0, "replay this one seed with the full trace and the agents' logs (TestReplay)")
	duration  = flag.Duration("sim.duration", 0, "TestCampaign: play schedules for this long (make sim)")
)

// TestSchedules plays many seeded schedules and fails with the first
// failing seed's trace; replay it with -run TestReplay -sim.seed=N -v.
func TestSchedules(t *testing.T) {
	want := *schedules
	if raceDetector && !flagGiven("sim.schedules") {
		// make test's unit step looks for data races in a few hundred
		// schedules; its sim step plays the full count without -race.
		want = 300
	}
	start := time.Now()
	stats, failed, played := playParallel(1, func(n int) bool { return n < want })
	t.Logf("%d schedules in %s (%.0f/s); %s", played, time.Since(start).Round(time.Millisecond),
		float64(played)/time.Since(start).Seconds(), stats.summary())
	if failed != nil {
		t.Fatalf("seed %d: %v\nreplay: go test ./daemon/sim -run TestReplay -sim.seed=%d -v\n--- trace\n%s",
			failed.Seed, failed.Failures, failed.Seed, failed.Trace)
	}
	if played < want {
		t.Fatalf("played %d schedules, want %d", played, want)
	}
}

func flagGiven(name string) (given bool) {
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// TestReplay replays one seed with the agents' logs in the trace.
func TestReplay(t *testing.T) {
	if *seed == 0 {
		t.Skip("replays a seed given with -sim.seed")
	}
	opts := DefaultOptions
	opts.Logs = true
	res := Run(*seed, opts)
	t.Logf("--- trace of seed %d\n%s", *seed, res.Trace)
	if len(res.Failures) > 0 {
		t.Fatalf("seed %d: %v", *seed, res.Failures)
	}
}

// TestCampaign plays schedules for -sim.duration and reports the rate and
// what they covered (make sim). It starts past the seeds make test plays,
// at a point taken from the clock (or -sim.seed), so each campaign covers
// new schedules.
func TestCampaign(t *testing.T) {
	if *duration == 0 {
		t.Skip("a long campaign: make sim (or -sim.duration=1h)")
	}
	first := *seed
	if first == 0 {
		first = 1_000_000 + uint64(time.Now().Unix()%1_000_000)*1000
	}
	deadline := time.Now().Add(*duration)
	start := time.Now()
	stats, failed, played := playParallel(first, func(int) bool { return time.Now().Before(deadline) })
	fmt.Printf("seeds %d to %d: %d schedules in %s, %.0f schedules/s on %d cores\n%s\n", first, first+uint64(played)-1,
		played, time.Since(start).Round(time.Second), float64(played)/time.Since(start).Seconds(), runtime.GOMAXPROCS(0), stats.summary())
	if failed != nil {
		t.Fatalf("seed %d: %v\nreplay: go test ./daemon/sim -run TestReplay -sim.seed=%d -v", failed.Seed, failed.Failures, failed.Seed)
	}
}

// playParallel plays seeds first, first+1, ... on every core while more
// says so, and stops at the first failure.
func playParallel(first uint64, more func(n int) bool) (Stats, *Result, int) {
	var (
		next   atomic.Int64
		mu     sync.Mutex
		stats  = NewStats()
		failed *Result
		wg     sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				mu.Lock()
				stop := failed != nil || !more(n)
				mu.Unlock()
				if stop {
					return
				}
				res := Run(first+uint64(n), DefaultOptions)
				mu.Lock()
				stats.add(res.Stats)
				if len(res.Failures) > 0 && (failed == nil || res.Seed < failed.Seed) {
					failed = &res
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return stats, failed, int(next.Load()) - runtime.GOMAXPROCS(0)
}

func (s Stats) summary() string {
	keys := func(m map[string]int) string {
		var parts []string
		for k, v := range m {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
		slices.Sort(parts)
		return fmt.Sprint(parts)
	}
	return "events " + keys(s.Events) + ", membership changes applied " + keys(s.Actions)
}
