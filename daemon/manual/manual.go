// Package manual carries out what an operator asks for by hand (etcdlet
// member remove, evict-learner, move-leader; etcdlet lock status and
// break): under the agents' rule book, through their one Writer and
// under their writer lock, so that a change made by hand never races an
// agent's and is judged by the same rules. The commands only parse flags
// and print.
package manual

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

// Cluster is what an operator command needs of the node it runs on: the
// agent's look at the cluster, its connections and its writer lock.
// daemon.Inspector is one.
type Cluster interface {
	Look(context.Context) node.Snapshot
	Pool() *etcdclient.Pool
	WriterLocker(holder string) *etcdclient.SessionLocker
	// ClientEndpoints are the client URLs to start from without asking
	// the cluster.
	ClientEndpoints() []string
	// PinnedClusterID is the cluster this node belongs to, in hex, or ""
	// before its first join.
	PinnedClusterID() string
}

// Settings are the agent's name and timings that a command keeps to.
type Settings struct {
	ClusterName string
	CallTimeout time.Duration
	LockTTL     time.Duration
	// LockSection bounds the work under the writer lock, as an agent's.
	LockSection time.Duration
}

// SettingsFrom narrows the agent's configuration to what the commands read.
func SettingsFrom(cfg *config.Config) Settings {
	return Settings{ClusterName: cfg.Cluster.Name, CallTimeout: cfg.Agent.CallTimeout,
		LockTTL: cfg.Agent.LockTTL, LockSection: cfg.Agent.LockSection()}
}

// Operator carries out one operator's commands on Cluster, reporting
// each step to Out.
type Operator struct {
	Cluster  Cluster
	Settings Settings
	Out      io.Writer
}

// Remove removes the member that target names (see Resolve), refusing
// what would cost quorum, and a listed member unless force: its agent
// would add it back. A leader hands leadership over first.
func (o Operator) Remove(ctx context.Context, target string, force bool) error {
	return o.change(ctx, "etcdlet member remove", target, func(s node.Snapshot, m membership.Member) error {
		return checkRemove(s, m, force)
	}, o.remove)
}

// EvictLearner removes a learner; a voter is refused.
func (o Operator) EvictLearner(ctx context.Context, target string) error {
	return o.change(ctx, "etcdlet member evict-learner", target, func(_ node.Snapshot, m membership.Member) error {
		return checkEvict(m)
	}, o.remove)
}

// MoveLeader hands leadership to the member target names.
func (o Operator) MoveLeader(ctx context.Context, target string) error {
	return o.change(ctx, "etcdlet member move-leader", target, checkMoveLeader, o.moveLeaderTo)
}

// locked is the state of one change under the writer lock.
type locked struct {
	lock etcdclient.Lock
	view membership.View
}

// change resolves the target, checks the rules, takes the writer lock,
// looks again, checks again, and acts.
func (o Operator) change(ctx context.Context, holder, target string, check func(node.Snapshot, membership.Member) error,
	act func(context.Context, locked, membership.Member) error) error {
	snap, m, err := o.lookAt(ctx, target, check)
	if err != nil {
		return err
	}
	return o.withWriterLock(ctx, holder, snap.View, m.ID, func(ctx context.Context, lock etcdclient.Lock) error {
		// The view the rules judged may predate an agent's change.
		fresh, again, err := o.lookAt(ctx, membership.IDString(m.ID), check)
		if err != nil {
			return fmt.Errorf("under the writer lock: %w", err)
		}
		return act(ctx, locked{lock: lock, view: fresh.View}, again)
	})
}

// lookAt observes the cluster, finds the target and checks the rules.
func (o Operator) lookAt(ctx context.Context, target string, check func(node.Snapshot, membership.Member) error) (node.Snapshot, membership.Member, error) {
	snap := o.Cluster.Look(ctx)
	if !snap.View.Reached {
		return snap, membership.Member{}, fmt.Errorf("the cluster has no quorum (or no member answered): no membership change can commit: %s", strings.Join(snap.View.Problems, "; "))
	}
	m, err := Resolve(snap.View.Members, target)
	if err != nil {
		return snap, m, err
	}
	if err := check(snap, m); err != nil {
		return snap, m, fmt.Errorf("refused: %s: %w", m, err)
	}
	return snap, m, nil
}

// Resolve finds the one member that target names: by name, by ID in
// hex, or by the IP of its peer URL. A target that names several is
// refused, never guessed.
func Resolve(members []membership.Member, target string) (membership.Member, error) {
	ip, ipErr := netip.ParseAddr(strings.Trim(target, "[]"))
	var found []membership.Member
	for _, m := range members {
		byIP := ipErr == nil && memberIP(m) == ip.Unmap()
		if m.Name == target || membership.IDString(m.ID) == strings.ToLower(target) || byIP {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		names := make([]string, len(members))
		for i, m := range members {
			names[i] = m.String()
		}
		return membership.Member{}, fmt.Errorf("no member is named, has the ID or the IP %q; members: %s", target, strings.Join(names, ", "))
	}
	return membership.Member{}, fmt.Errorf("%q names %d members (%v); give the member ID", target, len(found), found)
}

func memberIP(m membership.Member) netip.Addr {
	for _, u := range m.PeerURLs {
		if ip, ok := identity.IPFromURL(u); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// checkRemove is the rule set of member remove: the rule book's
// MayRemove, and a listed member only with force.
func checkRemove(s node.Snapshot, m membership.Member, force bool) error {
	if listed(s.Desired, m) && !force {
		return fmt.Errorf("its IP %s is in the member list in force, and its agent would add it back as a new learner; remove the IP from the list (the agents then remove the member themselves), or pass --force", memberIP(m))
	}
	return s.View.MayRemove(m.ID)
}

func listed(desired []identity.Member, m membership.Member) bool {
	ip := memberIP(m)
	return ip.IsValid() && slices.ContainsFunc(desired, func(d identity.Member) bool { return d.IP.Unmap() == ip })
}

// checkEvict is the rule of member evict-learner.
func checkEvict(m membership.Member) error {
	if !m.IsLearner {
		return errors.New("it is a voter; evict-learner removes learners only (etcdlet member remove checks a voter's removal against quorum)")
	}
	return nil
}

// checkMoveLeader is the rule set of member move-leader: the rule book's
// MayLead, and a leader to hand over from.
func checkMoveLeader(s node.Snapshot, m membership.Member) error {
	if err := s.View.MayLead(m.ID); err != nil {
		return err
	}
	if _, ok := s.View.Member(s.View.LeaderID); !ok {
		return errors.New("the cluster has no leader to hand over from")
	}
	return nil
}

// remove removes m, the leader after handing over.
func (o Operator) remove(ctx context.Context, l locked, m membership.Member) error {
	if m.ID == l.view.LeaderID {
		to, ok := l.view.Transferee(m.ID, nil, nil)
		if !ok {
			return fmt.Errorf("refused: %s is the leader and no healthy voter that is caught up can take over", m)
		}
		if err := o.moveLeaderTo(ctx, l, to); err != nil {
			return err
		}
	}
	if err := o.apply(ctx, l, membership.Action{Kind: membership.ActionRemove, Name: m.Name, MemberID: m.ID}); err != nil {
		return fmt.Errorf("remove member %s: %w", m, err)
	}
	fmt.Fprintf(o.Out, "removed member %s\n", m)
	return nil
}

// moveLeaderTo hands leadership to m; MoveLeader returns once it leads.
func (o Operator) moveLeaderTo(ctx context.Context, l locked, m membership.Member) error {
	if m.ID == l.view.LeaderID {
		fmt.Fprintf(o.Out, "%s leads already\n", m)
		return nil
	}
	if err := o.apply(ctx, l, membership.Action{Kind: membership.ActionMoveLeader, Name: m.Name, TransfereeID: m.ID}); err != nil {
		return fmt.Errorf("move leadership to %s: %w", m, err)
	}
	fmt.Fprintf(o.Out, "moved leadership to %s\n", m)
	return nil
}

// apply makes one change as the agents do: the one Writer, with the
// agents' retry policy, under the writer lock.
func (o Operator) apply(ctx context.Context, l locked, a membership.Action) error {
	w := membership.Writer{Cluster: o.Cluster.Pool(), Policy: node.DefaultPolicy(o.Settings.CallTimeout), Lock: l.lock}
	if res := w.Apply(ctx, l.view.Observation, a, nil); res.Outcome != etcdclient.Done {
		return res.Err
	}
	return nil
}

// withWriterLock runs fn under the agents' writer lock, taken through the
// voters, within an agent's locked section. The lock's session avoids the
// target's endpoint when another voter is there: a removed member answers
// no more calls, and the release after a successful removal would fail
// through it.
func (o Operator) withWriterLock(ctx context.Context, holder string, v membership.View, target uint64,
	fn func(context.Context, etcdclient.Lock) error) error {
	locker := o.Cluster.WriterLocker(holder)
	defer locker.Close()
	lock, err := o.takeLock(ctx, locker, membership.LockEndpoints(v.Members, target), v.ClusterID)
	if err != nil {
		return err
	}
	section, cancel := context.WithTimeout(ctx, o.Settings.LockSection)
	err = fn(section, lock)
	cancel()
	unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Settings.CallTimeout)
	defer cancel()
	if uerr := lock.Unlock(unlockCtx); uerr != nil && err == nil {
		err = uerr
	}
	return err
}

// takeLock takes the writer lock. An agent holds it for one change at a
// time, so a busy lock is tried again until agent.lockTTL has passed.
func (o Operator) takeLock(ctx context.Context, locker *etcdclient.SessionLocker, voters []string, clusterID uint64) (etcdclient.Lock, error) {
	deadline := time.Now().Add(o.Settings.LockTTL)
	for {
		lock, err := locker.TryLock(ctx, voters, clusterID)
		if !errors.Is(err, etcdclient.ErrLocked) {
			return lock, err
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("the writer lock stayed held for %s (etcdlet lock status shows by whom): try again", o.Settings.LockTTL)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
