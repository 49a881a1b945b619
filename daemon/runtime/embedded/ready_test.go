package embedded_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
)

// The runtime tells the agent when its member becomes ready, so that a
// learner is promoted as soon as it can be instead of on the next poll.
func TestAReadyMemberWakesTheAgent(t *testing.T) {
	r := embedded.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if err := r.Apply(context.Background(), etcdtest.SingleSpec(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Changed():
	case <-time.After(30 * time.Second):
		t.Fatal("no signal within 30s of the start of a one-member cluster")
	}
	if s := r.Status(); !s.Running || s.MemberID == 0 {
		t.Fatalf("after the ready signal: %+v, want a running member", s)
	}
}

// A member that never became ready (a bootstrap or a restart whose peers
// never answer) stops when asked: etcd's Close alone waits for client
// servers that start only once the member is ready, and held the agent's
// shutdown until the stop timeout ended the process.
func TestAMemberThatNeverBecameReadyStops(t *testing.T) {
	r := embedded.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	spec := etcdtest.SingleSpec(t)
	// A second member that never starts: no quorum, never ready. Its peer
	// URL is this member's own metrics port, where no peer answers.
	spec.InitialCluster += ",m1=" + spec.ListenMetricsURL
	if err := r.Apply(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the member that never became ready did not stop within 30s")
	}
	if s := r.Status(); s.Running {
		t.Fatalf("after the stop: %+v, want no member running", s)
	}
}
