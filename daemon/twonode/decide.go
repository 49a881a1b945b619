// Package twonode decides when the survivor of a two-node cluster that
// pacemaker fences may run its etcd member alone.
//
// Two voters without one have no quorum, and etcd cannot tell a dead peer
// from a cut cable: only the cluster manager can. Pacemaker can: once it
// fenced the peer (powered it off or rebooted it), the peer's member no
// longer runs, and the survivor may force a one-member cluster from its
// data (etcd's force-new-cluster) without splitting anything. Every entry
// a client saw acknowledged is in the survivor's log: with two voters an
// entry commits only once both hold it, and a leader change needs both
// votes, so the two logs never diverge below the commit index.
//
// The survivor must also know that its own data is current. A node that
// was itself fenced, or rebooted, may have missed a failover that the
// other node made meanwhile (a double failure, the wrong survivor starting
// first): its data then lacks every write since. So it forces only when
// it saw both members healthy in this boot of its host (state.Witness), and the
// fencing of the peer completed after that. A node that cannot tell waits
// and says why: the operator's way out is `etcdlet recover`.
package twonode

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// Facts are what Decide looks at.
type Facts struct {
	Self, Peer netip.Addr
	// Cluster is the cluster this node's data belongs to (hex), and Voter
	// whether its member is a voter of it (as last seen).
	Cluster string
	Voter   bool
	// BootID is the host's boot ID now.
	BootID string
	// Witness is the last sight of both members healthy; nil when none.
	Witness *state.Witness
	// Pacemaker is pacemaker's view from one crm_mon poll; nil when it is
	// unknown, and then Unknown says why.
	Pacemaker *model.Cluster
	Unknown   string
}

// Verdict says whether this node forces a one-member cluster, and why, or
// why not.
type Verdict struct {
	Force  bool
	Reason string
}

// Decide applies the rules. It is asked only while the cluster has no
// quorum. Every condition is read from one poll of pacemaker: this node
// online and quorate, the peer offline and not unclean, its last fencing
// successful and completed after the witness; and this node's own
// witness from this boot, for this cluster and this peer, its member a
// voter.
func Decide(f Facts) Verdict {
	wait := func(format string, args ...any) Verdict { return Verdict{Reason: fmt.Sprintf(format, args...)} }
	if f.Pacemaker == nil {
		return wait("pacemaker's state is unknown (%s)", f.Unknown)
	}
	self, ok := nodeAt(f.Pacemaker, f.Self)
	if !ok {
		return wait("pacemaker has no node at this node's address %s", f.Self)
	}
	peer, ok := nodeAt(f.Pacemaker, f.Peer)
	switch {
	case !ok:
		return wait("pacemaker has no node at the peer's address %s", f.Peer)
	case !self.Online.IsTrue():
		return wait("pacemaker does not see this node (%s) online", self.Name)
	case !f.Pacemaker.WithQuorum.IsTrue():
		return wait("pacemaker has no quorum on this node: it may be the node that is cut off")
	case !peer.Online.IsFalse():
		return wait("pacemaker does not see the peer %s offline: its member may run", peer.Name)
	case !peer.Unclean.IsFalse():
		return wait("the peer %s is unclean: pacemaker has not fenced it yet", peer.Name)
	}
	fence := peer.LastFence
	switch {
	case fence == nil:
		return wait("pacemaker records no fencing of the peer %s: without it the peer's member may still run", peer.Name)
	case fence.Status != "success" || !slices.Contains([]string{"reboot", "off"}, fence.Action):
		return wait("the last fencing of the peer %s is a %s %s, not a successful reboot or off", peer.Name, fence.Status, fence.Action)
	case fence.Completed.IsZero():
		return wait("the last fencing of the peer %s has no completion time", peer.Name)
	}
	w := f.Witness
	switch {
	case f.BootID == "":
		return wait("this host's boot ID cannot be read: whether it restarted since both members were last seen healthy is unknown")
	case !f.Voter:
		return wait("this node's member is not a voter of cluster %s", f.Cluster)
	case w == nil || w.ClusterID != f.Cluster || w.Peer != f.Peer.String():
		return wait("this node never saw both members of cluster %s healthy: it cannot tell that its data is current", f.Cluster)
	case w.BootID != f.BootID:
		return wait("this host restarted since it last saw both members healthy (%s): its data may be behind a recovery the peer made meanwhile",
			w.Healthy.UTC().Format(time.RFC3339))
	case !fence.Completed.After(w.Healthy):
		return wait("the last fencing of the peer %s (%s) is not after both members were last seen healthy (%s): the peer failed again since, and pacemaker has not fenced it for that",
			peer.Name, fence.Completed.UTC().Format(time.RFC3339), w.Healthy.UTC().Format(time.RFC3339))
	}
	return Verdict{Force: true, Reason: fmt.Sprintf("pacemaker fenced the peer %s (%s by %s, completed %s) after both members were last seen healthy (%s), and this node is online with quorum",
		peer.Name, fence.Action, fenceBy(fence), fence.Completed.UTC().Format(time.RFC3339), w.Healthy.UTC().Format(time.RFC3339))}
}

// nodeAt finds the pacemaker node with the address.
func nodeAt(c *model.Cluster, addr netip.Addr) (model.Node, bool) {
	for _, n := range c.Nodes {
		if slices.Contains(n.Addresses, addr) {
			return n, true
		}
	}
	return model.Node{}, false
}

func fenceBy(e *crmmon.FenceEvent) string {
	if e.Delegate != "" {
		return e.Delegate
	}
	return e.Origin
}
