package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// ReloadFile is where, under agent.stateDir, the agent keeps the outcome
// of its latest configuration reload, for etcdlet reload to report.
const ReloadFile = "reload.json"

// ReloadOutcome is the outcome of a configuration reload.
type ReloadOutcome struct {
	// At is when the agent decided it (after the SIGHUP).
	At time.Time `json:"at"`
	// Error says why the reload was rejected or refused; empty when the
	// new configuration is in force.
	Error string `json:"error,omitempty"`
}

// WaitReload waits until the agent whose state dir is stateDir has
// recorded the outcome of a reload signalled at sent, and returns it; or
// until ctx ends.
func WaitReload(ctx context.Context, stateDir string, sent time.Time) (ReloadOutcome, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var o ReloadOutcome
		found, err := state.Store{Dir: stateDir}.ReadJSON(ReloadFile, &o)
		switch {
		case err != nil:
			return o, err
		case found && !o.At.Before(sent):
			return o, nil
		}
		select {
		case <-ctx.Done():
			return o, fmt.Errorf("no outcome recorded since the signal: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// reloaded records a reload's outcome where /readyz reads it and where
// etcdlet reload does (ReloadFile).
func (a *Agent) reloaded(err error) {
	a.health.reloaded(err)
	o := ReloadOutcome{At: time.Now().UTC()}
	if err != nil {
		o.Error = err.Error()
	}
	if werr := (state.Store{Dir: a.cfg.Agent.StateDir}).WriteJSON(ReloadFile, o); werr != nil {
		a.log.Warn("the outcome of the configuration reload was not saved for etcdlet reload", "file", ReloadFile, "error", werr)
	}
}

// reloadable are the configuration paths a SIGHUP applies at once; any
// other change needs a restart (listeners, data dir and the running
// member's flags cannot change under a running member).
var reloadable = []string{"members", "cluster.replicas"}

// applyReload applies a reloaded configuration whose changes are all
// reloadable, and refuses it (naming every other changed field) otherwise.
//
// Nothing is written into a loaded configuration: the goroutines that read
// one (the members-file watch, the keeper of the Etcd resource's list, the
// HTTP handlers, ...) do so without a lock. The reloaded list rules are
// handed over whole to the list source, their one owner, and those who
// apply them read them from there; a.cfg stays the one loaded at start,
// which is what every other field must still equal.
func (a *Agent) applyReload(cfg *config.Config) error {
	if fields := immutableChanges(a.cfg, cfg); len(fields) > 0 {
		err := fmt.Errorf("reload refused: %s changed; these need a restart of etcdlet (the running configuration stays in force)", strings.Join(fields, ", "))
		a.log.Error("configuration reload refused", "error", err)
		a.reloaded(err)
		return err
	}
	a.source.SetRules(cfg.ListRules())
	a.reloaded(nil)
	a.log.Info("configuration reloaded")
	return nil
}

// immutableChanges names, by their YAML paths (etcd.clientPort), the
// fields that differ and cannot change while the agent runs.
func immutableChanges(old, next *config.Config) []string {
	var out []string
	for _, path := range config.ChangedFields(old, next) {
		if !isReloadable(path) {
			out = append(out, path)
		}
	}
	if (old.Members.Source == config.SourceEtcdResource) != (next.Members.Source == config.SourceEtcdResource) {
		// The watch of the Etcd resource that keeps that list starts with
		// the agent.
		out = append(out, "members.source (to or from etcd-resource)")
	}
	return out
}

func isReloadable(path string) bool {
	for _, r := range reloadable {
		if path == r || strings.HasPrefix(path, r+".") {
			return true
		}
	}
	return false
}
