package pacemakercluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/kube"
)

// Two agents, a and b, on the same API server, each with its own clock,
// driven round by round with SyncOnce.

// agent is one agent's writer and its poll's offer for a round.
type agent struct {
	w  *Writer
	in Input
}

// round runs one round of each listed agent (no writer: the agent is down)
// and returns their results.
func round(t *testing.T, agents ...agent) []string {
	t.Helper()
	var out []string
	for _, a := range agents {
		if a.w == nil {
			out = append(out, "down")
			continue
		}
		got, err := a.w.SyncOnce(t.Context(), a.in)
		if err != nil {
			t.Fatalf("%s: SyncOnce: %v", a.w.o.NodeName, err)
		}
		out = append(out, got)
	}
	return out
}

func writes(result string) bool {
	return result == kube.ResultWritten || result == kube.ResultUnchanged
}

func testHandover(t *testing.T, f *fixture) {
	ca, cb := newClock(t0), newClock(t0.Add(2*time.Second))
	a, b := f.writer(t, "a", ca, nil), f.writer(t, "b", cb, nil)
	// a's node is DC: a writes, b stands by, round after round.
	for i := range 4 {
		got := round(t, agent{a, f.input(t, "a", true)}, agent{b, f.input(t, "a", false)})
		if !writes(got[0]) || got[1] != kube.ResultStandby {
			t.Fatalf("round %d: a %s, b %s; want a writing and b on standby", i, got[0], got[1])
		}
		ca.Advance(30 * time.Second)
		cb.Advance(30 * time.Second)
	}
	if _, _, writer := f.stored(t); writer != "a" {
		t.Fatalf("last writer = %s, want a", writer)
	}
	// a's node leaves the cluster: its agent stops, and pacemaker makes
	// b's node DC. b writes at once, not after StaleAfter.
	sync1(t, b, f.input(t, "b", true), kube.ResultWritten)
	if _, _, writer := f.stored(t); writer != "b" {
		t.Fatalf("last writer = %s, want b", writer)
	}
	if st := b.o.Tracker.State(); st.Detail != "writing: b is pacemaker's DC node" {
		t.Errorf("b's tracker detail = %q", st.Detail)
	}
}

func testStaleTakeover(t *testing.T, f *fixture) {
	ca, cb := newClock(t0), newClock(t0.Add(2*time.Second))
	a, b := f.writer(t, "a", ca, nil), f.writer(t, "b", cb, nil)
	ev := b.o.Recorder.(*events)
	inA, inB := f.input(t, "a", true), f.input(t, "a", false)

	// a writes once, then its agent falls silent (dead, or cut off from the
	// API server) while pacemaker still runs on its node: a stays DC.
	if got := round(t, agent{a, inA}, agent{b, inB}); got[0] != kube.ResultWritten || got[1] != kube.ResultStandby {
		t.Fatalf("first round: %v", got)
	}
	steps := []struct {
		name    string
		advance time.Duration // of both clocks
		a       bool          // a's agent runs
		wantA   string
		wantB   string
	}{
		{"a silent 30s", 30 * time.Second, false, "down", kube.ResultStandby},
		{"a silent 60s", 30 * time.Second, false, "down", kube.ResultStandby},
		{"a silent 89s: not yet stale", 29 * time.Second, false, "down", kube.ResultStandby},
		{"a silent 90s: b takes over", time.Second, false, "down", kube.ResultWritten},
		{"b keeps writing: refresh", 30 * time.Second, false, "down", kube.ResultWritten},
		{"b keeps writing: nothing changed", 5 * time.Second, false, "down", kube.ResultUnchanged},
		{"b keeps writing: refresh again", 25 * time.Second, false, "down", kube.ResultWritten},
		{"a resumes and writes", 30 * time.Second, true, kube.ResultWritten, kube.ResultStandby},
		{"a alone writes", 30 * time.Second, true, kube.ResultWritten, kube.ResultStandby},
		{"a alone writes, unchanged", 5 * time.Second, true, kube.ResultUnchanged, kube.ResultStandby},
		{"a alone writes again", 25 * time.Second, true, kube.ResultWritten, kube.ResultStandby},
		{"b stays on standby for StaleAfter and beyond", 90 * time.Second, true, kube.ResultWritten, kube.ResultStandby},
	}
	for _, s := range steps {
		ca.Advance(s.advance)
		cb.Advance(s.advance)
		first := agent{}
		if s.a {
			first = agent{a, inA}
		}
		got := round(t, first, agent{b, inB})
		if got[0] != s.wantA || got[1] != s.wantB {
			t.Fatalf("%s: a %s, b %s; want a %s, b %s", s.name, got[0], got[1], s.wantA, s.wantB)
		}
	}
	if _, _, writer := f.stored(t); writer != "a" {
		t.Errorf("last writer = %s, want a", writer)
	}
	if n := ev.count(kube.ReasonPacemakerStatusWriterTakeover); n != 1 {
		t.Errorf("%d %s events, want exactly one", n, kube.ReasonPacemakerStatusWriterTakeover)
	}
}

// testConcurrentWriters makes both agents believe they are the writer (both
// see their node as DC, as in a split brain) and starts their rounds at
// the same instant, several times: every round ends without error (lost
// races are re-run from the GET after a random pause that breaks the
// lockstep) and the stored lastUpdated is the latest either wrote. One
// round per agent per trial: once one agent's round succeeds it stops
// writing, and the other's next attempt wins.
func testConcurrentWriters(t *testing.T, f *fixture) {
	ca, cb := newClock(t0), newClock(t0.Add(7*time.Second))
	a, b := f.writer(t, "a", ca, nil), f.writer(t, "b", cb, nil)
	inA, inB := f.input(t, "a", true), f.input(t, "b", true)
	for trial := range 5 {
		start := make(chan struct{})
		errs := make(chan error, 2)
		for _, p := range []agent{{a, inA}, {b, inB}} {
			go func() {
				<-start
				_, err := p.w.SyncOnce(t.Context(), p.in)
				if err != nil {
					err = fmt.Errorf("trial %d, %s: %w", trial, p.w.o.NodeName, err)
				}
				errs <- err
			}()
		}
		close(start)
		for range 2 {
			select {
			case err := <-errs:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("concurrent rounds did not finish")
			}
		}
		// Both refresh in the next trial: every trial is a real race.
		ca.Advance(30 * time.Second)
		cb.Advance(30 * time.Second)
	}
	latest := a.round.last.lastUpdated
	if bl := b.round.last.lastUpdated; bl.After(latest.Time) {
		latest = bl
	}
	if got := f.lastUpdated(t); !got.Equal(latest.Time) {
		t.Errorf("stored lastUpdated = %s, want the latest written, %s", got, latest)
	}
	// More GETs than rounds means lost races were retried.
	t.Logf("5 rounds each; calls: a %+v, b %+v", a.Calls(), b.Calls())
}
