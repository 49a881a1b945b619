package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
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

// etcdlet status says when the file on disk is not the configuration the
// agent runs, and why: refused (with the agent's reason), or not reloaded
// yet; nothing when it is, or when no agent ran with this state dir.
func TestConfigDriftSaysWhetherTheFileIsInForce(t *testing.T) {
	const running, edited = "digest-of-the-running-file", "digest-of-the-edited-file"
	refusal := "reload refused: etcd.clientPort changed; these need a restart of etcdlet (the running configuration stays in force)"
	tests := []struct {
		name   string
		record *ReloadOutcome // nil: none
		onDisk string
		want   string // "" or a part of the drift
	}{
		{"no agent ran", nil, edited, ""},
		{"the file in force", &ReloadOutcome{InForce: running, Tried: running}, running, ""},
		{"the file was refused", &ReloadOutcome{InForce: running, Tried: edited, Error: refusal}, edited,
			"the agent refused it: " + refusal},
		{"an older file was refused, this one not tried", &ReloadOutcome{InForce: running, Tried: "digest-of-another", Error: refusal}, edited,
			"the agent reloads a change within moments"},
		{"changed since the agent loaded it", &ReloadOutcome{InForce: running, Tried: running}, edited,
			"differs from the configuration the agent last loaded"},
		{"changed back to the file in force after a refusal", &ReloadOutcome{InForce: running, Tried: edited, Error: refusal}, running, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Agent: config.Agent{StateDir: t.TempDir()}, Digest: tt.onDisk}
			if tt.record != nil {
				tt.record.At = time.Now().UTC()
				if err := (state.Store{Dir: cfg.Agent.StateDir}).WriteJSON(ReloadFile, *tt.record); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ConfigDrift(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Errorf("ConfigDrift = %q, want %q", got, tt.want)
			}
		})
	}
}
