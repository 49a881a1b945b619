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
