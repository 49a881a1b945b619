package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/state"
)

// etcdlet reload waits for the outcome of its own signal: an outcome
// recorded before it is not that, one recorded after is, and without one
// the wait ends with its context.
func TestWaitReloadWaitsForTheOutcomeOfItsSignal(t *testing.T) {
	dir := t.TempDir()
	store := state.Store{Dir: dir}
	sent := time.Now()
	if err := store.WriteJSON(ReloadFile, ReloadOutcome{At: sent.Add(-time.Minute).UTC(), Error: "an older reload's"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if o, err := WaitReload(ctx, dir, sent); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with only an older outcome: %+v, %v; want the deadline", o, err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond) // the agent's answer comes later
		_ = store.WriteJSON(ReloadFile, ReloadOutcome{At: time.Now().UTC(), Error: "reload refused: agent.logLevel changed"})
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, err := WaitReload(ctx, dir, sent)
	if err != nil || o.Error != "reload refused: agent.logLevel changed" {
		t.Fatalf("got %+v, %v; want the outcome recorded after the signal", o, err)
	}
}
