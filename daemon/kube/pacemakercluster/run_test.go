package pacemakercluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// flaky fails the first failGets GETs like an unreachable API server.
type flaky struct {
	kube.API
	failGets atomic.Int32
}

func (f *flaky) Get(ctx context.Context, key types.NamespacedName, obj runtime.Object) error {
	if f.failGets.Add(-1) >= 0 {
		return errUnreachable
	}
	return f.API.Get(ctx, key, obj)
}

// testRun drives the loop on the real clock with a one-second refresh: the
// first offer is written (after two failed GETs, retried on backoff), the
// status is refreshed without further offers, and Run returns when its
// context ends.
func testRun(t *testing.T, f *fixture) {
	cl := &flaky{API: f.api}
	cl.failGets.Store(2)
	o := writerOpts(cl, f.version, "a", nil)
	o.Now, o.RefreshInterval, o.StaleAfter = time.Now, time.Second, 10*time.Second
	w := mustNew(t, o)
	w.backoff = kube.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	w.Offer(Input{Built: built(t, f.version, cluster("a"), time.Now(), nil), IsDC: true})

	var first time.Time
	eventually.True(t, 10*time.Second, "the first write", func() bool {
		_, s, writer, _ := f.lookup(t)
		if s == nil || writer != "a" {
			return false
		}
		first = s.LastUpdated.Time
		return true
	})
	if c := w.Calls(); c.Get < 3 {
		t.Errorf("calls = %+v, want the two failed GETs retried", c)
	}
	// The object is visible before the writer's goroutine records the
	// success of the call that stored it.
	eventually.True(t, 5*time.Second, "the tracker to record the success after the failures", func() bool {
		st := w.o.Tracker.State()
		return st.Failures == 0 && !st.LastSuccess.IsZero()
	})
	eventually.True(t, 10*time.Second, "a refresh without a new offer", func() bool {
		return f.lastUpdated(t).After(first)
	})

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
