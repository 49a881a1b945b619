package node

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// actLocal carries out the decision about the local member. It returns
// how soon the next pass should run, and ok: the decision was carried out,
// or deferred as it should be (a wait, a refusal, a data dir still in
// use), without an error and without a crash-loop backoff holding the
// member back.
func (n *Node) actLocal(ctx context.Context, s Snapshot) (next time.Duration, ok bool) {
	interval := n.Settings.ReconcileInterval
	d := s.Decision
	switch d.Kind {
	case localmember.Keep:
		if h := s.HeldChange; h != nil {
			n.logOnce("held", h.Reason, slog.LevelInfo, "holding a change that restarts the local member until a member-restart task carries it out under the cluster-wide task lock",
				"change", h.Reason)
			return interval, true
		}
		// Level-triggered: a static pod's manifest is rendered again and
		// rewritten if it was lost or etcdlet's rendering changed.
		spec, _ := SpecFor(n.Settings.Member, s.Self, d, n.state)
		return interval, n.apply(ctx, spec, false)
	case localmember.Restart, localmember.Bootstrap, localmember.Join, localmember.Found:
		// After an exit or a failed start (a port taken, a certificate
		// unreadable), wait out the backoff, whatever is started next. A
		// member stopping because it was removed is no crash: moving its
		// data aside resets the backoff.
		if wait := n.restartAfter.Sub(n.Now()); wait > 0 {
			n.logOnce("backoff", n.restartAfter.String(), slog.LevelInfo, "delaying the start of the local member after failures",
				"decision", string(d.Kind), "retryIn", wait.Round(time.Millisecond).String())
			return wait, false
		}
		spec, _ := SpecFor(n.Settings.Member, s.Self, d, n.state)
		// Record the intent before acting: a crash right after the start
		// must leave the state that says what was started.
		switch d.Kind {
		case localmember.Join:
			n.state.MemberID = membership.IDString(d.JoinID)
			n.state.ClusterID = membership.IDString(s.View.ClusterID)
		case localmember.Bootstrap:
			n.state.Bootstrap = &state.Bootstrap{List: addrStrings(s.List), InitialCluster: spec.InitialCluster,
				Token: spec.Token, Started: n.Now().UTC()}
			if err := n.Store.SavePromise(&state.Promise{List: addrStrings(s.List), At: n.Now().UTC()}); err != nil {
				n.Log.Error("cannot record the bootstrap promise; not bootstrapping", "error", err)
				return n.settle(), false
			}
		case localmember.Found:
			if !n.markFounding(ctx, s, spec.Token) {
				return n.settle(), true
			}
		}
		n.state.InitialCluster, n.state.InitialClusterState, n.state.InitialClusterToken = spec.InitialCluster, spec.InitialClusterState, spec.Token
		saved := n.save()
		n.publish(s)
		started := n.apply(ctx, spec, true)
		if started && d.Kind == localmember.Found {
			// From here the member may have run: this founding is never
			// repeated, whatever happens to the data.
			n.state.Founded.Started = true
			saved = n.save()
		}
		n.settling = 0
		return n.settle(), saved && started
	case localmember.StopRemoved:
		if err := n.Runtime.Stop(ctx); err != nil {
			n.Log.Error("stop removed member", "error", err)
			return interval, false
		}
		id := n.localMemberID(&s)
		return n.moveAside(id, d.Reason, droppedBy(s, id))
	case localmember.MoveAside:
		id := n.localMemberID(&s)
		return n.moveAside(id, d.Reason, droppedBy(s, id))
	case localmember.StopRetired:
		if err := n.Runtime.Stop(ctx); err != nil {
			n.Log.Error("stop the member this node promised not to run", "error", err)
			return interval, false
		}
		n.logOnce("local", "retired", slog.LevelWarn, "stopped the local member: this node promised not to run it again", "reason", d.Reason)
		return n.settle(), true
	case localmember.LeaveForSuccessor:
		return n.leaveForSuccessor(s)
	case localmember.ForceAlone:
		return n.forceAlone(ctx, s)
	case localmember.Wait:
		if s.View.Reached {
			// Waiting to be added: the writer may add this node any moment
			// (and wakes it when it does); the learner should start soon.
			return n.settle(), true
		}
		return time.Second, true
	}
	return interval, true
}

// markFounding records the founding before the member starts, shows it in
// this node's answer, then asks the other listed nodes once more, and
// reports whether the founding may go ahead. Two operator acts at the same
// moment (approvals on two nodes, or an approval and cluster.founder) are
// each checked against the others' answers before they act, but both
// checks can come before either act; marking first, then checking, makes
// at least one of two founders see the other's mark, and stand down. A
// founding that stands down was never started, so its record goes.
func (n *Node) markFounding(ctx context.Context, s Snapshot, token string) bool {
	via := state.ViaFounder
	if s.Consent.Approved {
		via = state.ViaApproval
	}
	before := n.state.Clone()
	withdraw := func() {
		n.state.Founded, n.state.ClusterID, n.state.MemberID = before.Founded, before.ClusterID, before.MemberID
		n.save()
		n.publish(s)
	}
	n.state.Founded = &state.Founding{At: n.Now().UTC(), Via: via, Token: token, List: addrStrings(s.List)}
	// A founding node starts a new cluster: it is pinned to no earlier one
	// (disaster recovery: a former member approved to found again).
	n.state.ClusterID, n.state.MemberID = "", ""
	if !n.save() {
		withdraw()
		return false
	}
	n.publish(s)
	if v := n.askFounding(ctx, &s, s.Consent.Approved); !v.Granted {
		n.Log.Warn("founding withdrawn: a listed node stands against it since this node decided", "reason", v.Reason())
		withdraw()
		return false
	}
	if via == state.ViaFounder {
		n.Log.Info("founding a new cluster", "via", via, "token", token, "list", addrStrings(s.List),
			"next", "remove cluster.founder from every host's configuration: it has done its work, and left in it could found again on a host rebuilt when no listed host holds the cluster any more")
	} else {
		n.Log.Info("founding a new cluster", "via", via, "token", token, "list", addrStrings(s.List))
	}
	return true
}

// apply hands the member's spec to the runtime, and reports whether the
// runtime took it. starting says the member is (re)started now, which is
// worth a log line; Keep passes are silent.
func (n *Node) apply(ctx context.Context, spec runtime.Spec, starting bool) bool {
	if starting {
		n.Log.Info("starting local member", "member", spec.Name, "peerURL", spec.AdvertisePeerURL,
			"initialClusterState", spec.InitialClusterState, "initialCluster", spec.InitialCluster)
	}
	if err := n.Runtime.Apply(ctx, spec); err != nil {
		n.backOff()
		n.Log.Error("run local member", "member", spec.Name, "error", err, "retryIn", n.restartAfter.Sub(n.Now()).Round(time.Second).String())
		return false
	}
	n.applied = true
	if id := n.Runtime.Status().MemberID; id != 0 {
		n.state.MemberID = membership.IDString(id)
	}
	return true
}

// backOff counts a failed start or an exit of the local member and sets
// the earliest next start: 1s, doubling up to a minute.
func (n *Node) backOff() {
	n.exits++
	n.restartAfter = n.Now().Add(min(time.Second<<min(n.exits-1, 6), time.Minute))
}

// moveAside moves the data dir aside (never deleting it) and forgets the
// local member ID and start parameters, keeping WasMember: a node that was
// a member never bootstraps a new cluster. It waits while an etcd process
// still holds the data (a static pod the kubelet is still stopping). ok
// is false when the move failed. droppedBy is the digest of the list that
// removed the member, when one did.
func (n *Node) moveAside(memberID uint64, reason, droppedBy string) (next time.Duration, ok bool) {
	inUse, err := n.DataDir.InUse()
	if err != nil {
		n.Log.Error("move data dir aside", "dataDir", n.Settings.DataDir, "error", err)
		return n.Settings.ReconcileInterval, false
	}
	if inUse {
		n.logOnce("local", "in-use", slog.LevelInfo, "waiting for etcd to release the data dir before moving it aside", "dataDir", n.Settings.DataDir)
		return n.settle(), true
	}
	to, err := n.DataDir.MoveAside(n.Now())
	if err != nil {
		n.Log.Error("move data dir aside", "dataDir", n.Settings.DataDir, "error", err)
		return n.Settings.ReconcileInterval, false
	}
	if to != "" {
		if n.Metrics != nil {
			n.Metrics.DataDirsMoved.Inc()
		}
		n.Log.Warn("moved data dir aside; it is kept, not deleted", "from", n.Settings.DataDir, "to", to, "reason", reason)
		if n.OnMoveAside != nil {
			n.OnMoveAside(to, reason)
		}
		n.state.Tombstones = append(n.state.Tombstones, state.Tombstone{Time: n.Now().UTC(), MemberID: membership.IDString(memberID),
			From: n.Settings.DataDir, To: to, Reason: reason, DroppedByList: droppedBy})
	}
	n.state.MemberID, n.state.InitialCluster, n.state.InitialClusterState, n.state.InitialClusterToken = "", "", "", ""
	n.state.Bootstrap = nil
	// A fresh start: the member's exits so far (its stop on removal among
	// them) are no crash loop and must not delay the rejoin.
	n.exits, n.restartAfter, n.settling = 0, time.Time{}, 0
	n.seenExits = n.Runtime.Status().Exits
	return 100 * time.Millisecond, true
}

// droppedBy is the digest of the list under which the local member
// (localID) was removed, when the Board records that a writer removed it
// because its list no longer named this node. A removal of an earlier
// member of this node is no excuse for this one's: only a member not
// known at all is matched by the address alone.
func droppedBy(s Snapshot, localID uint64) string {
	id := membership.IDString(localID)
	for _, r := range s.View.Lists.Removals {
		if r.Address == s.Self.IP.String() && (r.MemberID == id || localID == 0) {
			return r.Digest
		}
	}
	return ""
}

// noteMembership records that the local member is part of a cluster with
// quorum: from then on this node never bootstraps a new cluster, and it
// is pinned to that cluster.
func (n *Node) noteMembership(s Snapshot) {
	localID := n.localMemberID(&s)
	if !s.View.Reached || localID == 0 || !s.Runtime.Running || (s.Pinned != 0 && s.View.ClusterID != s.Pinned) {
		return
	}
	if s.Pinned == 0 && s.View.Ambiguous() {
		// Endpoints answer for more than one cluster: which one is this
		// node's own cannot be told from here.
		return
	}
	m, ok := s.View.Member(localID)
	if !ok || !m.Started() {
		return
	}
	n.exits = 0
	clusterID := membership.IDString(s.View.ClusterID)
	if f := n.state.Founded; f != nil && !f.Started {
		// A founding whose start was not recorded (a failed start that
		// still wrote the data): it ran, it is never repeated.
		f.Started = true
	}
	if !n.state.WasMember || n.state.ClusterID != clusterID {
		n.state.WasMember, n.state.ClusterID, n.state.MemberSince = true, clusterID, n.Now().UTC()
		n.state.Bootstrap, n.state.Seen = nil, nil
		n.Log.Info("local member is part of the cluster", "memberID", membership.IDString(localID), "clusterID", clusterID, "learner", m.IsLearner)
	}
}

// SpecFor is the spec the local member runs with under a decision, and
// false when the decision runs no member. A member keeps (and restarts
// with) the initial-cluster values it was first started with, so its
// static-pod manifest stays byte-identical and the kubelet does not
// restart etcd; etcd ignores them once it has a WAL anyway.
func SpecFor(settings runtime.Settings, self identity.Member, d localmember.Decision, st state.State) (runtime.Spec, bool) {
	initial, clusterState, token := d.InitialCluster, d.ClusterState, d.Token
	switch d.Kind {
	case localmember.Keep, localmember.Restart:
		if st.InitialCluster != "" {
			initial, clusterState, token = st.InitialCluster, st.InitialClusterState, st.InitialClusterToken
		} else if d.Kind == localmember.Keep {
			// Started by an etcdlet that did not record them.
			initial, clusterState = identity.InitialCluster([]identity.Member{self}), runtime.StateExisting
		}
	case localmember.Bootstrap, localmember.Join, localmember.Found:
	default:
		return runtime.Spec{}, false
	}
	spec := runtime.BuildSpec(settings, self, initial, clusterState)
	if token != "" {
		spec.Token = token
	}
	return spec, true
}

// rememberList records the list applied in this pass, for status and for a
// restart that finds the list source broken.
func (n *Node) rememberList(s Snapshot) {
	if s.Orphaning != "" {
		return
	}
	if list := identity.AddrStrings(s.List); !slices.Equal(list, n.state.LastAppliedList) {
		n.state.LastAppliedList = list
	}
	if n.state.WasMember || !slices.Contains(s.List, s.Self.IP) {
		return
	}
	for _, ip := range s.List {
		if text := ip.String(); ip != s.Self.IP && !slices.Contains(n.state.Seen, text) && len(n.state.Seen) < state.MaxSeen {
			n.state.Seen = append(n.state.Seen, text)
		}
	}
}
