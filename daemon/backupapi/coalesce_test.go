package backupapi

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// gated takes snapshots only when the test lets it, and counts them.
type gated struct {
	newest *snapshot.Snapshot
	taken  atomic.Int32
	gate   chan struct{}
	out    json.RawMessage
}

func (g *gated) TakeSnapshot(context.Context, string, bool) (json.RawMessage, error) {
	g.taken.Add(1)
	<-g.gate
	return g.out, nil
}

func (g *gated) Latest(context.Context) (*snapshot.Snapshot, []snapshot.Snapshot, error) {
	return g.newest, nil, nil
}

func (g *gated) Healthy(context.Context) bool { return true }

func TestCoalesceReturnsARecentFullSnapshot(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	stored := &snapshot.Snapshot{Kind: snapshot.KindFull, SnapName: "Full-00000000-00000042-1795779570.gz", LastRevision: 42}
	for _, tc := range []struct {
		name     string
		age      time.Duration
		kind     string
		final    bool
		minFull  time.Duration
		wantTake bool
	}{
		{"within the interval", 30 * time.Second, kindFull, false, time.Minute, false},
		{"older than the interval", 61 * time.Second, kindFull, false, time.Minute, true},
		{"final: never the stored one", time.Second, kindFull, true, time.Minute, true},
		{"delta", time.Second, kindDelta, false, time.Minute, true},
		{"coalescing off", time.Second, kindFull, false, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := *stored
			s.CreatedOn = now.Add(-tc.age)
			g := &gated{newest: &s, gate: make(chan struct{}), out: json.RawMessage(`"new"`)}
			close(g.gate)
			out, err := Coalesce(g, tc.minFull, func() time.Time { return now }).TakeSnapshot(t.Context(), tc.kind, tc.final)
			if err != nil {
				t.Fatal(err)
			}
			if took := g.taken.Load() == 1; took != tc.wantTake {
				t.Fatalf("took a snapshot: %t, want %t", took, tc.wantTake)
			}
			if !tc.wantTake {
				var got snapshot.Snapshot
				if err := json.Unmarshal(out, &got); err != nil || got.SnapName != stored.SnapName {
					t.Errorf("answered %s (%v), want the stored %s", out, err, stored.SnapName)
				}
			}
		})
	}
}

// Fifty requests at once take one snapshot and all get it; a caller that
// gives up does not cancel it for the others.
func TestCoalesceSharesOneSnapshotInFlight(t *testing.T) {
	g := &gated{gate: make(chan struct{}), out: json.RawMessage(`{"snapName":"Incr-1"}`)}
	c := Coalesce(g, time.Minute, time.Now)

	impatient, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := c.TakeSnapshot(impatient, kindDelta, false); first <- err }()
	eventually.True(t, 10*time.Second, "the first request starts a snapshot", func() bool { return g.taken.Load() > 0 })
	var wg sync.WaitGroup
	outs := make([]json.RawMessage, 50)
	errs := make([]error, 50)
	for i := range outs {
		wg.Go(func() { outs[i], errs[i] = c.TakeSnapshot(t.Context(), kindDelta, false) })
	}
	co := c.(*coalescing)
	eventually.True(t, 10*time.Second, "the requests join the snapshot in flight", func() bool {
		co.mu.Lock()
		defer co.mu.Unlock()
		f := co.flights[kindDelta+"/false"]
		return f != nil && f.shared == len(outs)
	})
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the impatient caller got %v, want its own cancellation", err)
	}
	close(g.gate)
	wg.Wait()
	if n := g.taken.Load(); n != 1 {
		t.Errorf("%d snapshots taken for 51 requests, want 1", n)
	}
	for i := range outs {
		if errs[i] != nil || string(outs[i]) != string(g.out) {
			t.Errorf("request %d: %s, %v; want the shared snapshot", i, outs[i], errs[i])
		}
	}

	// Once it is done, the next request takes a new one.
	if _, err := c.TakeSnapshot(t.Context(), kindDelta, false); err != nil || g.taken.Load() != 2 {
		t.Errorf("a request after the flight: %v, %d snapshots taken, want 2", err, g.taken.Load())
	}
}
