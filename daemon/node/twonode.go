package node

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/daemon/twonode"
)

// twoNode reports whether the two-node failover applies: pacemaker is
// configured and the list names two nodes, this one among them.
func (n *Node) twoNode(s Snapshot) bool {
	return n.Pacemaker != nil && n.ForceAlone != nil && s.SelfErr == nil && len(s.Desired) == 2 && contains(s.Desired, s.Self)
}

// peerOf is the other listed node of a two-node list.
func peerOf(s Snapshot) identity.Member {
	i := slices.IndexFunc(s.Desired, func(m identity.Member) bool { return m.IP != s.Self.IP })
	if i < 0 {
		return identity.Member{}
	}
	return s.Desired[i]
}

// witnessPair records when this pass saw both members of the two-node
// cluster healthy voters, and nothing else in the cluster
// (state.Witness): the failover vouches for this node's data only from
// such a sight in this boot of the host. It is written on every such
// pass: a sight older than the last one would let a fencing from before
// it count.
func (n *Node) witnessPair(s Snapshot) {
	if !n.twoNode(s) || !s.View.Reached {
		return
	}
	peer := peerOf(s)
	healthy := 0
	for _, m := range s.View.Members {
		if !m.IsLearner && m.Healthy() && (slices.Contains(m.PeerURLs, s.Self.PeerURL) || slices.Contains(m.PeerURLs, peer.PeerURL)) {
			healthy++
		}
	}
	if healthy != 2 || len(s.View.Members) != 2 {
		return
	}
	w := &state.Witness{ClusterID: membership.IDString(s.View.ClusterID), Peer: peer.IP.String(), BootID: n.bootID(), Healthy: n.Now().UTC()}
	n.witness = w
	if err := n.Store.SaveWitness(w); err != nil {
		n.logOnce("witness", err.Error(), slog.LevelError, "cannot record that both members of the two-node cluster are healthy; a failover will not count on it", "error", err)
	}
}

// logTwoNode says, once per reason, why the two-node failover waits.
func (n *Node) logTwoNode(s Snapshot) {
	if s.TwoNode == nil || s.TwoNode.Force {
		n.logged["twonode"] = ""
		return
	}
	n.logOnce("twonode", s.TwoNode.Reason, slog.LevelWarn, "two-node failover waits: the cluster has no quorum, and this node does not run its member alone",
		"reason", s.TwoNode.Reason, "ifThePeerIsGoneForGood", "etcdlet recover (docs/pacemaker.md, two-node clusters)")
}

// twoNodeVerdict asks twonode.Decide whether this node, whose cluster has
// no quorum, runs its member alone.
func (n *Node) twoNodeVerdict(s Snapshot) twonode.Verdict {
	f := twonode.Facts{Self: s.Self.IP, Peer: peerOf(s).IP, Cluster: membership.IDString(s.Pinned), BootID: n.bootID(),
		Voter: n.lastSeenVoter(n.localMemberID(&s)), Witness: n.witness}
	if f.Witness == nil {
		w, err := n.Store.LoadWitness()
		if err != nil {
			return twonode.Verdict{Reason: "the record of the last time both members were healthy cannot be read: " + err.Error()}
		}
		n.witness, f.Witness = w, w
	}
	f.Pacemaker, f.Unknown = n.Pacemaker()
	return twonode.Decide(f)
}

// lastSeenVoter reports whether the local member was a voter in the last
// view with quorum this agent had; with none since it started, the
// witness (both members voters) vouches for it.
func (n *Node) lastSeenVoter(local uint64) bool {
	if len(n.lastMembers) == 0 {
		return true
	}
	i := slices.IndexFunc(n.lastMembers, func(m membership.Member) bool { return m.ID == local })
	return i >= 0 && !n.lastMembers[i].IsLearner
}

func (n *Node) bootID() string {
	if n.BootID == nil {
		return ""
	}
	return n.BootID()
}

// forceAlone carries out localmember.ForceAlone: the member stops, its
// data dir is forced to a one-member cluster of this member, keeping
// every entry of its log (Deps.ForceAlone: the old data dir goes aside,
// kept), and the next pass starts it alone. The peer's member, when it
// comes back, finds itself removed, and its node moves its data aside
// and joins again as a learner. A failure leaves the member stopped and
// its data dir as it was: the next pass decides again.
func (n *Node) forceAlone(ctx context.Context, s Snapshot) (next time.Duration, ok bool) {
	if err := n.Runtime.Stop(ctx); err != nil {
		n.Log.Error("stop the local member for the two-node failover", "error", err)
		return n.Settings.ReconcileInterval, false
	}
	if inUse, err := n.DataDir.InUse(); err != nil || inUse {
		n.logOnce("local", "force-in-use", slog.LevelInfo, "waiting for etcd to release the data dir before the two-node failover", "error", err)
		return n.settle(), err == nil
	}
	n.Log.Warn("two-node failover: this node's member runs alone from its own data", "reason", s.Decision.Reason)
	moved, kept, err := n.ForceAlone(ctx, s.Self.Name)
	if err != nil {
		n.Log.Error("two-node failover failed; the member stays stopped and its data dir as it was until a later pass", "error", err)
		return n.Settings.ReconcileInterval, false
	}
	if n.Metrics != nil {
		n.Metrics.DataDirsMoved.Inc()
		n.Metrics.TwoNodeFailovers.Inc()
	}
	n.Log.Warn("two-node failover done: the member is the only member of its cluster; the peer rejoins as a learner when it returns",
		"movedAside", moved, "keptAboveCommit", kept, "peer", peerOf(s).IP.String())
	if n.OnMoveAside != nil && moved != "" {
		n.OnMoveAside(moved, "two-node failover: "+s.Decision.Reason)
	}
	if n.OnForcedAlone != nil {
		n.OnForcedAlone(s.Decision.Reason)
	}
	n.state.InitialCluster = identity.InitialCluster([]identity.Member{s.Self})
	n.state.InitialClusterState = runtime.StateExisting
	n.witness = nil
	if err := n.Store.SaveWitness(nil); err != nil {
		n.Log.Error("cannot drop the two-node witness; it names a pair that no longer is", "error", err)
	}
	n.exits, n.restartAfter, n.settling = 0, time.Time{}, 0
	n.seenExits = n.Runtime.Status().Exits
	return 0, n.save()
}
