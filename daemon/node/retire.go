package node

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// Retire answers a node that recovers a cluster from its own data
// (etcdlet recover) and asks this one to promise not to start its member
// of that cluster again (the agent peer endpoint's POST; caller is the
// asking node's address, which the guard admitted as listed). It
// promises only for the cluster its own data belongs to, only to the
// caller, and only while that cluster does not answer with quorum here;
// the promise is recorded before the answer says so. A promise to
// another node stands unless the request names that node gone for good.
func (n *Node) Retire(caller netip.Addr, req consent.RetireRequest) consent.RetireAnswer {
	n.retireMu.Lock()
	defer n.retireMu.Unlock()
	s := n.Last()
	a := consent.RetireAnswer{Node: s.Self.IP.String()}
	refuse := func(format string, args ...any) consent.RetireAnswer {
		a.Detail = fmt.Sprintf(format, args...)
		return a
	}
	by, err := netip.ParseAddr(req.By)
	switch {
	case err != nil || by != caller:
		return refuse("the request is for %q, but it comes from %s: a node asks for itself only", req.By, caller)
	case by == s.Self.IP:
		return refuse("it names this node as the one that recovers")
	}
	cluster := parseID(req.Cluster)
	pinned := s.Pinned
	if id, err := n.DataDir.Identity(); err == nil && id.ClusterID != 0 {
		pinned = id.ClusterID // the data itself, read now
	}
	switch {
	case cluster == 0:
		return refuse("cluster %q is not a cluster ID", req.Cluster)
	case pinned != cluster:
		return refuse("its data and state belong to cluster %s, not %s", membership.IDString(pinned), membership.IDString(cluster))
	case s.View.Reached && s.View.ClusterID == cluster:
		return refuse("cluster %s answers with quorum here: it needs no recovery", membership.IDString(cluster))
	}
	r, err := n.Store.LoadRetirement()
	if err != nil {
		return refuse("cannot read its earlier promise: %v", err)
	}
	if r != nil && r.ClusterID == req.Cluster && r.By != req.By && !slices.Contains(req.Gone, r.By) {
		return refuse("it promised %s at %s not to start its member of cluster %s again: %s recovers it; should %s be gone for good, name it gone",
			r.By, r.At.Format(time.RFC3339), r.ClusterID, r.By, r.By)
	}
	if r == nil || r.ClusterID != req.Cluster || r.By != req.By {
		if err := n.Store.SaveRetirement(&state.Retirement{ClusterID: req.Cluster, By: req.By, At: n.Now().UTC()}); err != nil {
			return refuse("cannot record the promise: %v", err)
		}
		n.Log.Warn("promised not to start this node's member of the cluster again: another node recovers it from its data; this node joins the recovered cluster once it answers there",
			"cluster", req.Cluster, "by", req.By)
	}
	a.Retired = true
	return a
}

// retirement is this node's promise not to start its member of a
// cluster again, for Decide: none when there is no promise, or it is for
// another cluster than the one this node is pinned to (a record left by
// a crash after the node forgot that cluster).
func (n *Node) retirement(pinned uint64) localmember.Retirement {
	r, err := n.Store.LoadRetirement()
	if err != nil {
		// A promise that cannot be read may stand: the member stays
		// stopped until it can be.
		n.logOnce("retirement", err.Error(), slog.LevelError, "cannot read this node's promise not to start its member; not starting it", "error", err)
		return localmember.Retirement{Cluster: pinned, Unreadable: err.Error()}
	}
	if r == nil || parseID(r.ClusterID) != pinned || pinned == 0 {
		return localmember.Retirement{}
	}
	by, _ := netip.ParseAddr(r.By)
	return localmember.Retirement{Cluster: pinned, By: by}
}

// leaveForSuccessor carries out localmember.LeaveForSuccessor: the data
// of the retired member goes aside (kept), then the node forgets the
// cluster it was pinned to and drops the promise. It keeps WasMember: it
// never bootstraps, and it joins the recovered cluster as a learner like
// a new node. A crash in between leaves the node pinned without data,
// and the next pass decides the same again.
func (n *Node) leaveForSuccessor(s Snapshot) (next time.Duration, ok bool) {
	if s.Data.HasData() || s.Data.WAL {
		next, ok := n.moveAside(n.localMemberID(&s), s.Decision.Reason, "")
		if left, err := n.DataDir.Inspect(); !ok || err != nil || left.HasData() || left.WAL {
			return next, ok // still in use, or the move failed: a later pass
		}
	}
	from := n.state.ClusterID
	n.state = state.State{LastAppliedList: n.state.LastAppliedList, SelfAddress: n.state.SelfAddress, WasMember: true,
		MemberSince: n.state.MemberSince, Tombstones: n.state.Tombstones, Founded: n.state.Founded}
	if !n.save() {
		return n.Settings.ReconcileInterval, false
	}
	n.retireMu.Lock()
	err := n.Store.SaveRetirement(nil)
	n.retireMu.Unlock()
	if err != nil {
		n.Log.Error("cannot drop the promise not to start the old member; it binds nothing now", "error", err)
	}
	n.Log.Info("left the cluster another node recovered; joining the recovered cluster as a new member", "from", from, "recoveredBy", s.Decision.RecoveredBy)
	if n.Metrics != nil {
		n.Metrics.RecoverySteps.WithLabelValues(metrics.RecoveryLeft).Inc()
	}
	n.exits, n.restartAfter, n.settling = 0, time.Time{}, 0
	return 100 * time.Millisecond, true
}
