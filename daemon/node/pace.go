package node

import (
	"time"

	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// settleAfter is how many passes in a row must find the node settled
// before the loop slows to the idle interval: one calm look may follow a
// promotion or an election by a moment.
const settleAfter = 3

// pace is the wait before the next pass, given the wait this pass asks
// for and whether everything it tried succeeded. Once settleAfter passes
// in a row found the node settled, the loop waits Settings.IdleInterval:
// what would change that state either wakes the loop at once anyway (a
// list change, the local member stopping, another agent's wake, a reload,
// a /readyz answer that is no longer fresh) or is only reported (another
// host failing), and a pass every few seconds is most of what an idle
// agent costs. The first pass that finds anything else returns to the
// reconcile interval.
func (n *Node) pace(snap Snapshot, next time.Duration, ok bool) time.Duration {
	if !ok || next < n.Settings.ReconcileInterval || !settled(snap) {
		n.calmPasses = 0
		return next
	}
	n.calmPasses++
	if n.calmPasses < settleAfter {
		return next
	}
	if n.calmPasses == settleAfter && n.OnSettled != nil {
		n.OnSettled()
	}
	return max(next, n.Settings.IdleInterval)
}

// settled is true when nothing is left to do or to watch: the list is in
// force, the local member runs as a listed member and holds no change,
// the cluster answers with quorum, its members are exactly the list, each
// a healthy voter (in raft, no alarm), nothing is planned and no other
// cluster answers.
func settled(s Snapshot) bool {
	v := s.View
	if !s.ListOK || s.Orphaning != "" || !v.Reached || s.Decision.Kind != localmember.Keep || s.HeldChange != nil || !s.Plan.Converged() ||
		len(v.Alarms) > 0 || len(v.Foreign) > 0 || len(v.Stale) > 0 || len(v.Expired) > 0 {
		return false
	}
	m := membership.Match(s.Desired, v.Members)
	if len(m.Missing) > 0 || len(m.Extra) > 0 || len(m.Conflicts) > 0 {
		return false
	}
	for _, p := range m.Matched {
		if p.Member.IsLearner || !p.Member.Healthy() {
			return false
		}
	}
	return true
}
