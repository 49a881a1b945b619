// Package restore is the operator's recovery path after the loss of
// quorum: a new cluster from a snapshot on one node, and the other nodes
// cleared so that they join it. Nothing is deleted: every data dir that is
// replaced is moved aside (daemon/datadir).
package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/instancelock"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// Settings are what a restore and a rejoin read of the configuration.
type Settings struct {
	DataDir  string
	StateDir string
	// Token is the initial-cluster-token a new cluster starts from.
	Token string
	// Address is node.address; when invalid, this node's address is found
	// among the listed ones.
	Address netip.Addr
	Scheme  identity.Scheme
	List    config.ListRules
}

// SettingsFrom narrows a validated configuration to a restore's settings.
func SettingsFrom(cfg *config.Config) Settings {
	s := Settings{DataDir: cfg.Etcd.DataDir, StateDir: cfg.Agent.StateDir, Token: cfg.BootstrapToken(),
		Scheme: identity.SchemeFrom(cfg), List: cfg.ListRules()}
	if cfg.Node.Address != "" {
		s.Address = netip.MustParseAddr(cfg.Node.Address) // validated
	}
	return s
}

// Plan is what a restore will do.
type Plan struct {
	Self    identity.Member
	Full    snapshot.Snapshot
	Deltas  []snapshot.Snapshot
	DataDir string
	// Bump is added to the snapshots' revision, which is then marked
	// compacted (snapshot.RestoreOptions.RevisionBump).
	Bump int64
	// Kind is what the agent reports the restore as (state.Restored):
	// state.RestoredFromSnapshots, or state.RecoveredFromData.
	Kind string
}

// DefaultBump is the revision bump of a restore unless the operator
// chooses another: etcd's own advice for a restore that clients watched
// (its disaster-recovery guide bumps by 1,000,000,000), far more than
// the revisions any cluster writes between its last snapshot and a loss,
// and far below the int64 revisions run out at.
const DefaultBump = 1_000_000_000

// Revision is the revision of the snapshots the restore applies, before
// the bump.
func (p Plan) Revision() int64 {
	if len(p.Deltas) > 0 {
		return p.Deltas[len(p.Deltas)-1].LastRevision
	}
	return p.Full.LastRevision
}

// Safety checks common to a restore and a rejoin: etcdlet's agent must be
// stopped (its member holds the data dir), and no cluster may answer with
// quorum on the listed addresses — restoring then would fork a healthy
// cluster into two.
func checkStopped(ctx context.Context, s Settings, sv ops.Surveyor, force bool) error {
	if err := checkNotInUse(s); err != nil {
		return err
	}
	if force {
		return nil
	}
	if _, err := sv.Survey(ctx); err == nil {
		return errors.New("a cluster answers with quorum on the listed addresses: restoring now would split it in two; stop every member first (or, if that cluster is not this one, pass --force)")
	}
	return nil
}

// checkNotInUse refuses while this node's agent runs (it holds its state
// dir, whose state and data dir a restore rewrites under it, even while
// its member is down) or a running etcd holds the data dir.
func checkNotInUse(s Settings) error {
	if held, err := instancelock.Held(s.StateDir); err != nil {
		return err
	} else if held {
		return fmt.Errorf("etcdlet's agent runs with agent.stateDir %s: stop it first (systemctl stop etcdlet, or etcdlet@<name> for another cluster on this host)", s.StateDir)
	}
	inUse, err := datadir.InUse(s.DataDir)
	if err != nil {
		return err
	}
	if inUse {
		return fmt.Errorf("the data dir %s is in use by a running etcd: stop etcdlet (systemctl stop etcdlet) and the member first", s.DataDir)
	}
	return nil
}

// Self is this node's member identity: node.address, else the listed
// address assigned to a local interface.
func Self(s Settings, detect func([]netip.Addr) (netip.Addr, error)) (identity.Member, []netip.Addr, error) {
	list, errs := s.List.DesiredMembers()
	if len(errs) > 0 {
		return identity.Member{}, nil, fmt.Errorf("member list: %w", errs)
	}
	ip := s.Address
	if !ip.IsValid() {
		var err error
		if ip, err = detect(list); err != nil {
			return identity.Member{}, nil, fmt.Errorf("detect this node's address among the listed ones: %w", err)
		}
	}
	return s.Scheme.For(ip), list, nil
}

// Prepare checks that a restore may run and chooses the snapshots: the
// newest full snapshot and its deltas, or the chain ending at upTo.
func Prepare(ctx context.Context, s Settings, store snapshot.Store, self identity.Member, sv ops.Surveyor, upTo string, bump int64, force bool) (Plan, error) {
	if bump < 0 {
		return Plan{}, fmt.Errorf("--bump-revision %d: must be 0 or more", bump)
	}
	if err := checkStopped(ctx, s, sv, force); err != nil {
		return Plan{}, err
	}
	full, deltas, err := snapshot.Chain(ctx, store, upTo)
	if err != nil {
		return Plan{}, fmt.Errorf("choose the snapshots in %s: %w", store, err)
	}
	return Plan{Self: self, Full: full, Deltas: deltas, DataDir: s.DataDir, Bump: bump, Kind: state.RestoredFromSnapshots}, nil
}

// stagingSuffix names the dir beside the data dir that a restore builds
// the restored data dir in.
const stagingSuffix = ".etcdlet-restore"

// Run restores the plan: the snapshots into a new data dir beside the old
// one, then the old data dir moved aside and the new one put in its place,
// then the agent's state pinned to the new cluster. Every step leaves
// something a repeated run can start from: a crash before the swap leaves
// the old data in place, one after it leaves the old data moved aside, and
// one in between the complete restored dir, marked so (ResumeRestored). It
// returns where the old data dir went and the restored revision, the bump
// included.
func Run(ctx context.Context, s Settings, store snapshot.Store, p Plan, log *slog.Logger, now time.Time) (moved string, revision int64, err error) {
	staging := filepath.Clean(p.DataDir) + stagingSuffix
	if _, err := os.Stat(filepath.Clean(p.DataDir) + restoredSuffix); err == nil {
		return "", 0, fmt.Errorf("%s holds a complete restored data dir that an interrupted restore left: it is put in place first (etcdlet restore and recover do so, and so does the agent at its start)", staging)
	}
	if err := os.RemoveAll(staging); err != nil { // only ever a restore's own half-built dir, not marked complete
		return "", 0, fmt.Errorf("remove the half-built %s of an earlier restore: %w", staging, err)
	}
	revision, err = snapshot.Restore(ctx, snapshot.RestoreOptions{Store: store, Full: p.Full, Deltas: p.Deltas, DataDir: staging,
		Name: p.Self.Name, PeerURL: p.Self.PeerURL, InitialClusterToken: s.Token + "-restored-" + now.UTC().Format("20060102T150405Z"),
		TempDir: filepath.Dir(staging), Log: log, DropPrefixes: []string{etcdclient.AgentKeyPrefix}, RevisionBump: p.Bump})
	if err != nil {
		return "", 0, err
	}
	moved, err = swapRestored(s, p, staging, revision, now)
	return moved, revision, err
}

// Rejoin clears a node that is not the restored one: its data dir is
// moved aside and its state forgets the old cluster, so that its agent
// waits to be added to the restored cluster like a new node.
func Rejoin(s Settings, now time.Time) (moved string, err error) {
	if err := checkNotInUse(s); err != nil {
		return "", err
	}
	if moved, err = datadir.MoveAside(s.DataDir, now); err != nil {
		return "", err
	}
	store := state.Store{Dir: s.StateDir}
	st, err := store.Load()
	if err != nil {
		return moved, err
	}
	// Keep the list and the address; forget the member and cluster, and
	// that this node was a member: a node that was a member never
	// bootstraps, and it must not pin the old cluster either. Keep a
	// founding: cluster.founder, and the approval it used, found once.
	st = state.State{LastAppliedList: st.LastAppliedList, SelfAddress: st.SelfAddress, Founded: st.Founded}
	if err := store.Save(st); err != nil {
		return moved, err
	}
	// A promise not to start the old member (etcdlet recover) is kept
	// with the data moved aside: nothing of that cluster is left to start.
	return moved, store.SaveRetirement(nil)
}
