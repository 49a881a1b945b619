package node

import (
	"context"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// write lets the writer make at most one membership change, and returns
// how soon the next pass should run, and ok: the change was made, there
// was none to make (or none allowed yet), or another agent held the
// writer lock; not when the step failed or the call did not go through.
func (n *Node) write(ctx context.Context, s Snapshot) (next time.Duration, ok bool) {
	var stale []uint64
	if s.Decision.Kind == localmember.DeclareStale {
		stale = []uint64{s.Decision.StaleID}
	}
	res, err := n.writer.Step(ctx, s.Desired, s.View, stale, n.localMemberID(&s), n.listState(s))
	n.recordPlan(res.Plan)
	n.watchLists(ctx, err == nil && res.Plan.WaitsFor(membership.WaitListsDisagree, ""))
	interval := n.Settings.ReconcileInterval
	switch {
	case err != nil:
		n.Log.Warn("membership step failed", "error", err)
		return n.settle(), false
	case res.Busy:
		if n.Metrics != nil {
			n.Metrics.WriterLockBusy.Inc()
		}
		return n.settle(), true
	case res.Acted != nil && res.Result.Outcome == etcdclient.Done:
		// The next step may be ready at once: a handover is followed by
		// the removal, an add by the promotion.
		n.settling = 0
		return 0, true
	case res.Acted != nil && res.Acted.Kind == membership.ActionPromote && etcdclient.LearnerNotReady(res.Result.Err):
		// The learner is still copying the keyspace (its own agent tries,
		// Observation.Local). etcd allows the promotion the moment the
		// leader knows the snapshot arrived, so the next try comes at a
		// steady short pace rather than backing off: however long a
		// large keyspace takes to copy, the learner is promoted within
		// moments of being in sync, not a reconcile interval later.
		return catchUpRetry, false
	case res.Acted != nil:
		return n.settle(), false
	case res.Plan.WaitsFor(membership.WaitLearnerNotStarted, ""):
		return n.settle(), true
	case res.Plan.WaitsFor(membership.WaitJoinPending, "") && n.applying(s, true):
		// This node's member was promoted before it applied the keyspace,
		// and the member it replaces leaves once it serves: its agent
		// looks at the short pace, as it did while the learner copied.
		return catchUpRetry, true
	case res.Plan.WaitsFor(membership.WaitJoinPending, "") && n.applying(s, false):
		// Another node's new voter applies the keyspace: soon after a
		// short copy, backing off for a long one (its own agent looks
		// at the short pace).
		return n.settle(), true
	case res.Plan.WaitsFor(membership.WaitLearnerCatchingUp, ""):
		// Another node's learner: soon after a short copy, backing off
		// for a long one (its own agent promotes it; this one may make
		// the next change once it is a voter).
		return n.settle(), true
	case res.Plan.WaitsFor(membership.WaitListsDisagree, ""):
		// A list change on its way to the hosts: the others post theirs
		// within their next pass, and the watch of the lists wakes this
		// agent when they do. Looking again soon anyway covers a watch
		// that failed; a disagreement that lasts backs off to the
		// reconcile interval.
		return n.settle(), true
	case res.Plan.WaitsFor(membership.WaitListSettling, ""):
		// The removal is due the moment the list has held long enough.
		return max(n.Settings.RemovalHoldDown-n.Now().Sub(n.listInForce), 10*time.Millisecond), true
	}
	return interval, true
}

// applying says that a voter's server runs without answering on its
// client port yet (promoted while it applied the keyspace, or
// restarting): this node's member, when own.
func (n *Node) applying(s Snapshot, own bool) bool {
	local := n.localMemberID(&s)
	for _, m := range s.View.Members {
		if m.Applying() && (!own || m.ID == local) {
			return true
		}
	}
	return false
}

// catchUpRetry is how soon the agent of a learner that is still catching
// up looks again, and how soon a promotion that etcd refused for that
// reason is tried again (a pass that observes, takes the writer lock and
// tries for a few seconds itself).
const catchUpRetry = 100 * time.Millisecond

// changed counts a membership call and wakes the agent of the node the
// change concerns, so that a node added as a learner starts its member at
// once instead of on its next pass.
func (n *Node) changed(a membership.Action, r etcdclient.Result) {
	if m := n.Metrics; m != nil {
		m.MembershipChanges.WithLabelValues(string(a.Kind), string(r.Outcome)).Inc()
		if a.Expired && r.Outcome == etcdclient.Done {
			m.LearnersExpired.Inc()
		}
	}
	if n.OnChange != nil {
		n.OnChange(a, r)
	}
	if r.Outcome != etcdclient.Done || a.PeerURL == "" {
		return
	}
	if ip, ok := identity.IPFromURL(a.PeerURL); ok && ip != n.self.IP {
		n.Peers.Wake(ip)
	}
}

// callFailed counts an attempt of a membership call that returned an
// error, by what etcdclient.Classify made of it.
func (n *Node) callFailed(op etcdclient.Op, outcome etcdclient.Outcome) {
	if m := n.Metrics; m != nil {
		m.EtcdCallErrors.WithLabelValues(string(op), string(outcome)).Inc()
	}
}
