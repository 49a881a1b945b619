package pacemakercluster

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

func TestNewChecksOptions(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"valid", func(*Options) {}, ""},
		{"no client", func(o *Options) { o.Client = nil }, "no client"},
		{"unknown version", func(o *Options) { o.Version = "v2" }, "unknown PacemakerCluster API version"},
		{"no node name", func(o *Options) { o.NodeName = "" }, "no node name"},
		{"node name too long for a field manager", func(o *Options) { o.NodeName = strings.Repeat("n", 121) }, "exceeds the API's 128"},
		{"staleAfter below twice the refresh", func(o *Options) { o.StaleAfter = 59 * time.Second }, "below twice refreshInterval"},
		{"defaults", func(o *Options) {
			o.RefreshInterval, o.StaleAfter, o.CallTimeout, o.Tracker, o.Log, o.Now = 0, 0, 0, nil, nil, nil
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := writerOpts(noAPI{t: t}, status.VersionV1, "a", newClock(t0))
			tt.mutate(&o)
			w, err := New(o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if w.o.RefreshInterval <= 0 || w.o.StaleAfter < 2*w.o.RefreshInterval || w.o.CallTimeout <= 0 ||
				w.o.Tracker == nil || w.o.Log == nil || w.o.Now == nil {
				t.Errorf("defaults not filled in: %+v", w.o)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := writerOpts(noAPI{t: t}, status.VersionV1, "a", newClock(t0))
	o.RefreshInterval, o.StaleAfter, o.CallTimeout = 0, 0, 0
	w := mustNew(t, o)
	if w.o.RefreshInterval != 30*time.Second || w.o.StaleAfter != 90*time.Second || w.o.CallTimeout != 10*time.Second {
		t.Errorf("defaults: refresh %s, staleAfter %s, callTimeout %s", w.o.RefreshInterval, w.o.StaleAfter, w.o.CallTimeout)
	}
}

// TestOfferNeverBlocks offers far more often than any round could run,
// with no Run loop at all: every offer wants a round, and a round is
// already pending after the first, so an Offer that waited for one would
// wait for ever. The deadline only tells for ever from slow: each Offer
// computes the status's content key, which takes milliseconds under the
// race detector on a busy machine (1000 offers once took over 10s).
func TestOfferNeverBlocks(t *testing.T) {
	w := mustNew(t, writerOpts(noAPI{t: t}, status.VersionV1, "a", newClock(t0)))
	in := Input{Built: built(t, status.VersionV1, cluster("a"), t0, nil), IsDC: true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			in.IsDC = i%2 == 0 // every offer matters and wants a round
			w.Offer(in)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Offer blocked")
	}
	if got, _, ok := w.latest(); !ok || got.IsDC {
		t.Errorf("latest offer = %+v (present %v), want the last one (IsDC false)", got, ok)
	}
}

// TestNothingWrittenWithoutStatus: an unknown pacemaker state, no offer
// yet, or an offer the poll stopped renewing write nothing and make no
// API call.
func TestNothingWrittenWithoutStatus(t *testing.T) {
	tests := []struct {
		name       string
		run        func(t *testing.T, w *Writer, c *clock)
		wantDetail string
	}{
		{"unknown state", func(t *testing.T, w *Writer, _ *clock) {
			sync1(t, w, Input{IsDC: true}, ResultIdle)
		}, "pacemaker state unknown"},
		{"no offer yet", func(t *testing.T, w *Writer, _ *clock) {
			if d := w.runRound(t.Context()); d != w.o.RefreshInterval {
				t.Errorf("next round in %s, want the refresh interval", d)
			}
		}, "no pacemaker status offered yet"},
		{"offer older than StaleAfter", func(t *testing.T, w *Writer, c *clock) {
			w.Offer(Input{Built: built(t, status.VersionV1, cluster("a"), t0, nil), IsDC: true})
			c.Advance(91 * time.Second)
			w.runRound(t.Context())
		}, "no pacemaker status offered for 1m31s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(t0)
			w := mustNew(t, writerOpts(noAPI{t: t}, status.VersionV1, "a", c))
			tt.run(t, w, c)
			st := w.o.Tracker.State()
			if !strings.Contains(st.Detail, tt.wantDetail) || !st.LastAttempt.IsZero() {
				t.Errorf("tracker = %+v, want detail containing %q and no attempt", st, tt.wantDetail)
			}
			if n := w.Calls().Total(); n != 0 {
				t.Errorf("%d API calls, want none", n)
			}
		})
	}
}

// TestFailureIsTracked: a failing API is recorded and SyncOnce returns the
// error wrapped with its context.
func TestFailureIsTracked(t *testing.T) {
	w := mustNew(t, writerOpts(failing{}, status.VersionV1, "a", newClock(t0)))
	got, err := w.SyncOnce(t.Context(), Input{Built: built(t, status.VersionV1, cluster("a"), t0, nil), IsDC: true})
	if got != kube.ResultError || err == nil || !strings.Contains(err.Error(), "get PacemakerCluster v1/cluster") {
		t.Fatalf("SyncOnce = %s, %v; want error with context", got, err)
	}
	if st := w.o.Tracker.State(); st.Failures != 1 || st.LastError == "" {
		t.Errorf("tracker = %+v, want one failure", st)
	}
	if c := w.Calls(); c.Get != 1 || c.Total() != 1 {
		t.Errorf("calls = %+v, want one GET", c)
	}
}
