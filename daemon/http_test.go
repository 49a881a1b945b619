package daemon

import (
	"context"
	"testing"
	"time"
)

// /readyz re-checks a stale "not ready" with a pass that began after the
// request: a pass that began before it (and finishes after) is not that
// pass; the next one is; without one the wait ends with its context.
func TestAwaitPassSinceWaitsForAPassBegunAfterTheRequest(t *testing.T) {
	var h healthState
	asked := time.Now()
	h.passed(asked.Add(-time.Second), asked.Add(-500*time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if h.awaitPassSince(ctx, asked) {
		t.Fatal("a pass that began before the request counted")
	}

	done := make(chan bool, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- h.awaitPassSince(ctx, asked)
	}()
	h.passed(asked.Add(-time.Millisecond), time.Now()) // began before: still waiting
	select {
	case <-done:
		t.Fatal("the wait ended on a pass that began before the request")
	case <-time.After(50 * time.Millisecond):
	}
	h.passed(asked.Add(time.Millisecond), time.Now())
	if !<-done {
		t.Fatal("the wait did not end on a pass begun after the request")
	}
}
