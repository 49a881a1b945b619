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
// of its latest load of the configuration file (at start, or a reload),
// for etcdlet reload and etcdlet status to report.
const ReloadFile = "reload.json"

// ReloadOutcome is the outcome of a load of the configuration file.
type ReloadOutcome struct {
	// At is when the agent decided it (after the SIGHUP or the change).
	At time.Time `json:"at"`
	// Error says why the reload was rejected or refused; empty when the
	// new configuration is in force.
	Error string `json:"error,omitempty"`
	// InForce is the digest (config.FileDigest) of the file content in
	// force afterwards; Tried that of the content this outcome is about,
	// "" when the file could not be read.
	InForce string `json:"inForce,omitempty"`
	Tried   string `json:"tried,omitempty"`
}

// ReadReloadOutcome returns the agent's latest record, and false when it
// has none (it never ran with this state dir).
func ReadReloadOutcome(stateDir string) (ReloadOutcome, bool, error) {
	var o ReloadOutcome
	found, err := state.Store{Dir: stateDir}.ReadJSON(ReloadFile, &o)
	return o, found, err
}

// ConfigDrift says how the configuration file, as loaded now (cfg), differs
// from the one the agent runs with the same state dir, from the agent's
// record: "" when it is the one in force, or when no agent ran yet.
func ConfigDrift(cfg *config.Config) (string, error) {
	o, found, err := ReadReloadOutcome(cfg.Agent.StateDir)
	switch {
	case err != nil:
		return "", fmt.Errorf("read the agent's record of its configuration: %w", err)
	case !found || o.InForce == "" || o.InForce == cfg.Digest:
		return "", nil
	case o.Tried == cfg.Digest && o.Error != "":
		return "the file differs from the configuration the agent runs, and the agent refused it: " + o.Error, nil
	}
	return fmt.Sprintf("the file differs from the configuration the agent last loaded (%s); the agent reloads a change within moments, so if this stays it is not running or lost its watch: etcdlet reload applies the file and says the verdict",
		o.At.Format(time.RFC3339)), nil
}

// WaitReload waits until the agent whose state dir is stateDir has
// recorded the outcome of a reload signalled at sent, and returns it; or
// until ctx ends.
func WaitReload(ctx context.Context, stateDir string, sent time.Time) (ReloadOutcome, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		o, found, err := ReadReloadOutcome(stateDir)
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

// reloaded records the outcome of a reload of the file content whose
// digest is tried, where /readyz reads it and where etcdlet reload and
// etcdlet status do (ReloadFile).
func (a *Agent) reloaded(tried string, err error) {
	a.record(a.health.reloaded(tried, err))
}

func (a *Agent) record(o ReloadOutcome) {
	if err := (state.Store{Dir: a.cfg.Agent.StateDir}).WriteJSON(ReloadFile, o); err != nil {
		a.log.Warn("the outcome of the configuration load was not saved for etcdlet reload and status", "file", ReloadFile, "error", err)
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
		a.reloaded(cfg.Digest, err)
		return err
	}
	a.source.SetRules(cfg.ListRules())
	a.reloaded(cfg.Digest, nil)
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
	// The keepers of these lists (the watch of the Etcd resource, of the
	// cluster's list) start with the agent.
	for _, kept := range []string{config.SourceEtcdResource, config.SourceCluster} {
		if (old.Members.Source == kept) != (next.Members.Source == kept) {
			out = append(out, "members.source (to or from "+kept+")")
		}
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
