// Package localmember decides what happens to this node's own etcd member:
// keep it, restart it on its data, bootstrap or found a new cluster, join
// as the learner the writer added, move stale data aside, or wait. Decide
// is a pure function with table tests; the agent carries the decision out.
package localmember

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// Kind is what to do with the local member.
type Kind string

// Decisions.
const (
	Keep         Kind = "keep"          // running and still a member
	Idle         Kind = "idle"          // not listed, nothing to run
	Restart      Kind = "restart"       // start on the existing data dir
	Bootstrap    Kind = "bootstrap"     // form a new cluster with the listed nodes (consent)
	Found        Kind = "found"         // found a one-member cluster of this node (an operator's act)
	Join         Kind = "join"          // start as the member the writer added
	Wait         Kind = "wait"          // nothing safe to do yet
	StopRemoved  Kind = "stop-removed"  // running but removed: stop, move data aside
	MoveAside    Kind = "move-aside"    // data belongs to a removed member
	DeclareStale Kind = "declare-stale" // our identity is a started member but our data is gone
	Refuse       Kind = "refuse"        // unsafe to act; an operator must look
	// StopRetired: running, but this node promised not to run its member
	// of this cluster again (Retirement): stop it, keep the data.
	StopRetired Kind = "stop-retired"
	// LeaveForSuccessor: the cluster recovered from another node's data
	// answers there: move the retired member's data aside, forget the old
	// cluster, join the recovered one.
	LeaveForSuccessor Kind = "leave-for-successor"
	// ForceAlone: the survivor of a two-node cluster whose peer pacemaker
	// fenced makes its member the only member, from its own data
	// (daemon/twonode).
	ForceAlone Kind = "force-alone"
)

// Retirement is this node's promise not to start its member of Cluster
// again, made to By, which recovers that cluster from its own data
// (etcdlet recover); the zero value when there is none.
type Retirement struct {
	Cluster uint64
	By      netip.Addr
	// Unreadable says why the promise could not be read: it may stand.
	Unreadable string
}

// Refusal names a safety rule under which the agent refuses to act until
// the situation changes or an operator acts: the reason label of
// etcdlet_refusals_total. Decide names those that hold the local member
// back; the node controller finds the last two (RefuseForeignAnswer,
// RefuseOrphaningList) in its view of the cluster and the list. Waiting
// to be added, or out a backoff, is no refusal.
type Refusal string

// Refusals.
const (
	// RefuseNoConsent: a bootstrap waits, for a listed node is silent or
	// does not confirm that it is fresh (normal for seconds while the
	// nodes of a new cluster start).
	RefuseNoConsent Refusal = "bootstrap-no-consent"
	// RefuseWasMember: no bootstrap by a node that was a member before, or
	// that founded a cluster before, without the operator's approval.
	RefuseWasMember Refusal = "bootstrap-was-member"
	// RefuseNotApproved: no cluster answers, and with cluster.bootstrap
	// explicit a new one forms only on an operator's act (normal while a
	// new cluster is installed, until that act).
	RefuseNotApproved Refusal = "bootstrap-not-approved"
	// RefuseNeverBootstrap: no cluster answers, and this node never founds
	// one (cluster.bootstrap never; always with members.source
	// etcd-resource): it waits for the cluster.
	RefuseNeverBootstrap Refusal = "bootstrap-never"
	// RefuseBesideCluster: no bootstrap while an established cluster
	// answers without quorum.
	RefuseBesideCluster Refusal = "bootstrap-beside-cluster"
	// RefuseAmbiguous: the listed endpoints answer for more than one
	// cluster and this node belongs to none yet: it joins neither.
	RefuseAmbiguous Refusal = "ambiguous-clusters"
	// RefuseForeignData: the data dir belongs to another cluster than the
	// one the listed peers form.
	RefuseForeignData Refusal = "foreign-data"
	// RefuseDataMismatch: the data dir belongs to another cluster than the
	// one this node joined (its state).
	RefuseDataMismatch Refusal = "data-cluster-mismatch"
	// RefuseEtcdVersion: the etcd version the local member would run is
	// below the cluster version, or more than one minor above it
	// (etcdversion.CheckMember).
	RefuseEtcdVersion Refusal = "etcd-version"
	// RefuseNotMounted: etcd.dataDirMustBeMount, and the data dir is not
	// (or cannot be told to be) a mount point.
	RefuseNotMounted Refusal = "data-dir-not-mounted"
	// RefuseMovesAside: the data dir was moved aside etcd.moveAsideLimit
	// times within etcd.moveAsideWindow.
	RefuseMovesAside Refusal = "moves-aside-limit"
	// RefusePeerURLTaken: another member's name holds this node's peer URL.
	RefusePeerURLTaken Refusal = "peer-url-taken"
	// RefuseDiskSpace: the data dir's filesystem has too little free space
	// for the copy of the keyspace a joining member receives.
	RefuseDiskSpace Refusal = "disk-space"
	// RefuseAddressTaken: the member at this node's address answers as
	// itself while this node holds no data: another node serves it.
	RefuseAddressTaken Refusal = "address-taken"
	// RefuseClusterName: the cluster's members are named for another
	// cluster.name than this node's.
	RefuseClusterName Refusal = "cluster-name-mismatch"
	// RefuseForeignAnswer: a listed address answers for another cluster
	// than this node's; nothing is done to or for it (membership, not the
	// local decision, finds these).
	RefuseForeignAnswer Refusal = "foreign-cluster-answer"
	// RefuseOrphaningList: a member list that shares no address with the
	// cluster's voters is refused; the last applied list stays in force.
	RefuseOrphaningList Refusal = "orphaning-list"
)

// Problem is why the data dir may not be used, and which refusal that is.
type Problem struct {
	Refusal Refusal
	Reason  string
}

// Inputs is everything Decide looks at.
type Inputs struct {
	// Cluster is cluster.name, the member name prefix.
	Cluster string
	Self    identity.Member
	Desired []identity.Member
	InList  bool
	Running bool
	Data    datadir.Contents
	// LocalID is the local member's ID as last known (runtime, state, or
	// the data dir's own write-ahead log).
	LocalID uint64
	// Pinned is the cluster this node belongs to (its state, or its data
	// dir's write-ahead log); 0 when it belongs to none yet. The view is
	// of that cluster whenever it is set.
	Pinned    uint64
	WasMember bool
	View      membership.View
	// Mode is how a new cluster may form (config.Config.BootstrapMode):
	// config.BootstrapExplicit, BootstrapConsent or BootstrapNever.
	Mode string
	// Consent is the verdict on a bootstrap (consent mode) or a founding
	// (explicit mode); the agent asks the listed nodes only when one could
	// happen.
	Consent consent.Verdict
	// Approved: the operator approved a bootstrap of this list here, and
	// no founding of this node used that approval up.
	Approved bool
	// Founder: cluster.founder names this node (explicit mode).
	Founder bool
	// Founded: this node founded a cluster before, and its member may
	// have run (state.Founding.Started).
	Founded bool
	// DataProblem, when its Reason is set, says why the data dir may not
	// be used (it must be a mount point and is not; it belongs to another
	// cluster than the one this node joined).
	DataProblem Problem
	// JoinSpace, when its Reason is set, says that the data dir's
	// filesystem has too little free space for the copy of the keyspace
	// that a joining member receives: the node does not join (it refuses,
	// so that no writer adds a learner for it, or its learner is removed)
	// until there is.
	JoinSpace Problem
	// VersionChange, when its Reason is set, says why the running member
	// may not be restarted on the etcd version the configuration names:
	// it keeps running what it runs.
	VersionChange Problem
	// Flapping, when set, says why the node does not rejoin: it moved its
	// data aside too often (etcd.moveAsideLimit) without the operator
	// acknowledging it.
	Flapping string
	// Retired is the promise not to start the member of the pinned
	// cluster, when this node made one.
	Retired Retirement
	// ForceAlone, when set, is why this node, the survivor of a two-node
	// cluster without quorum, runs its member alone (twonode.Decide).
	ForceAlone string
}

// Decision says what to do and why.
type Decision struct {
	Kind   Kind
	Reason string
	// InitialCluster and ClusterState for Restart, Bootstrap and Join.
	InitialCluster string
	ClusterState   string
	// StaleID is the member to remove for DeclareStale.
	StaleID uint64
	// JoinID is the member the writer added for this node, for Join.
	JoinID uint64
	// Token is the new cluster's own initial-cluster-token, for Found; the
	// node controller sets it (it knows the time), Decide does not.
	Token string
	// Refusal names the safety rule behind a Refuse, or behind a Wait that
	// is one; empty otherwise.
	Refusal Refusal
	// RecoveredBy is the node whose recovered cluster this node leaves
	// for (LeaveForSuccessor).
	RecoveredBy netip.Addr
}

// Decide encodes the local safety rules: never bootstrap while an
// established cluster exists, after having been a member or having founded
// a cluster, or without what the mode asks (the operator's act on this
// node in explicit mode, every listed node's consent in consent mode,
// never in never mode); join only as the member the writer added for this
// node's peer URL; never act on a view of another cluster than this
// node's; never start on data of a member the cluster no longer has (move
// it aside instead); never drop data of another cluster silently.
func Decide(in Inputs) Decision {
	v := in.View
	if r := in.Retired; r.Cluster != 0 && r.Cluster == in.Pinned {
		return decideRetired(in)
	}
	if in.ForceAlone != "" && !v.Reached && in.InList && in.Pinned != 0 && in.DataProblem.Reason == "" && (in.Running || in.Data.WAL) {
		return Decision{Kind: ForceAlone, Reason: in.ForceAlone}
	}
	if in.Running {
		// Removed only as the node's own cluster says: a member that is
		// not pinned yet, or a view of another cluster, is kept running.
		if v.Reached && in.Pinned != 0 && v.ClusterID == in.Pinned && in.LocalID != 0 && !hasMember(v, in.LocalID) {
			return Decision{Kind: StopRemoved, Reason: fmt.Sprintf("member %s is no longer in the cluster (removed)", membership.IDString(in.LocalID))}
		}
		if in.VersionChange.Reason != "" {
			// A refusal acts on nothing: the member runs on as it is.
			return Decision{Kind: Refuse, Refusal: in.VersionChange.Refusal, Reason: in.VersionChange.Reason}
		}
		return Decision{Kind: Keep}
	}
	if in.DataProblem.Reason != "" {
		return Decision{Kind: Refuse, Reason: in.DataProblem.Reason, Refusal: in.DataProblem.Refusal}
	}
	if in.Data.HasData() {
		return decideWithData(in)
	}
	if name, ok := otherClusterName(in); ok {
		// Joining would run a member under a name the cluster's agents do
		// not expect: it would be their conflict, and this agent's writer
		// would act on a list of names the cluster does not have.
		return Decision{Kind: Refuse, Refusal: RefuseClusterName, Reason: fmt.Sprintf("the cluster's members are named %q and alike, not %q-…: this node's cluster.name %q is not the cluster's; not joining",
			name, in.Cluster, in.Cluster)}
	}
	if named, ok := v.WithPeerURL(in.Self.PeerURL); ok && !v.Reached && !v.Ambiguous() && !named.Started() &&
		(named.Name == "" || named.Name == in.Self.Name) && in.Flapping == "" {
		// A bootstrap this node was part of, or a cluster that lost its
		// quorum, waits for this node's member: joining it is what
		// completes it, and never forms a cluster of its own. A node the
		// list no longer names joins too, for the cluster cannot reach the
		// quorum that removing it needs otherwise; it is removed after.
		return Decision{Kind: Join, Reason: fmt.Sprintf("member %s of cluster %s is this node's and has not started, and the cluster has no quorum without it; joining",
			membership.IDString(named.ID), membership.IDString(v.ClusterID)),
			InitialCluster: joinCluster(in), ClusterState: runtime.StateExisting, JoinID: named.ID}
	}
	if !in.InList {
		return Decision{Kind: Idle, Reason: "this node's address is not in the member list"}
	}
	if in.Flapping != "" {
		return Decision{Kind: Refuse, Reason: in.Flapping, Refusal: RefuseMovesAside}
	}
	switch {
	case v.Ambiguous():
		return Decision{Kind: Wait, Reason: "the listed endpoints answer for more than one cluster; joining neither: " + foreignList(v.Foreign), Refusal: RefuseAmbiguous}
	case v.Reached:
		return decideJoin(in)
	case v.Established:
		return Decision{Kind: Wait, Reason: "an established cluster answers but has no quorum; never bootstrapping beside it", Refusal: RefuseBesideCluster}
	case in.Mode == config.BootstrapNever:
		return Decision{Kind: Wait, Reason: "no listed peer's etcd answers, and this node never founds a cluster (cluster.bootstrap never; always with members.source etcd-resource, whose API server needs the cluster): waiting for the cluster to answer and add this node", Refusal: RefuseNeverBootstrap}
	case in.WasMember && !in.Approved:
		return Decision{Kind: Refuse, Reason: "no listed peer answers, and this node was a member before: it never bootstraps a new cluster on its own; restore a member's quorum or its data, or, once every member's data is known to be lost, approve a new cluster with 'etcdlet bootstrap --approve'", Refusal: RefuseWasMember}
	case in.Founded && !in.Approved:
		return Decision{Kind: Refuse, Reason: "no listed peer answers, and this node founded a cluster before: it never founds another on the same act (cluster.founder, or an approval it used); restore that cluster's quorum or its data, or, once its data is known to be lost, approve a new founding with 'etcdlet bootstrap --approve'", Refusal: RefuseWasMember}
	case in.Mode == config.BootstrapConsent && !in.Approved:
		return decideConsent(in)
	}
	// An approval founds a cluster in either mode: a cluster of one, with
	// an identity of its own (Decision.Token), so that a member of a
	// cluster before it (disaster recovery: one that was only down) is
	// another cluster's, and never takes this one's place or leadership.
	return decideFounding(in)
}

// decideRetired: this node promised not to start its member of the pinned
// cluster again, for another node recovers that cluster from its own data.
// Started beside the recovered cluster, the member could make the old
// cluster's quorum with hosts the operator named gone (should they come
// back with their data): two clusters. So it is stopped, and the data is
// kept until the recovered cluster answers at the recovering node (a
// recovery that failed can be run again, there or, naming that node gone,
// elsewhere); then it goes aside and the node joins as a new member.
func decideRetired(in Inputs) Decision {
	r := in.Retired
	pinned := membership.IDString(in.Pinned)
	if r.Unreadable != "" {
		return Decision{Kind: StopRetired, Reason: "this node's promise not to start its member cannot be read (" + r.Unreadable + "); the member is not run until it can be"}
	}
	if in.Running {
		return Decision{Kind: StopRetired, Reason: fmt.Sprintf("this node promised %s not to run its member of cluster %s again (%s recovers that cluster from its data): stopping it, keeping the data until the recovered cluster answers", r.By, pinned, r.By)}
	}
	for _, f := range in.View.Foreign {
		if ip, ok := identity.IPFromURL(f.Endpoint); ok && ip.Unmap() == r.By.Unmap() && f.ClusterID != in.Pinned {
			return Decision{Kind: LeaveForSuccessor, RecoveredBy: r.By, Reason: fmt.Sprintf("cluster %s answers at %s, which recovered cluster %s from its data: this node's data of %s goes aside (kept) and it joins %s as a new member",
				membership.IDString(f.ClusterID), r.By, pinned, pinned, membership.IDString(f.ClusterID))}
		}
	}
	return Decision{Kind: Wait, Reason: fmt.Sprintf("this node promised %s not to start its member of cluster %s again: %s recovers that cluster from its data (etcdlet recover); waiting for the recovered cluster to answer there (start etcdlet on %s), then this node's data goes aside (kept) and it joins as a new member",
		r.By, pinned, r.By, r.By)}
}

// decideConsent: the listed nodes bootstrap together once every one of
// them consents (cluster.bootstrap consent).
func decideConsent(in Inputs) Decision {
	if !in.Consent.Granted {
		return Decision{Kind: Wait, Reason: "no listed peer's etcd answers, and a bootstrap needs every listed node's consent: " + in.Consent.Reason(), Refusal: RefuseNoConsent}
	}
	return Decision{Kind: Bootstrap, Reason: "no listed peer's etcd answers and " + in.Consent.Reason() + ": the listed nodes form a new cluster",
		InitialCluster: identity.InitialCluster(in.Desired), ClusterState: runtime.StateNew}
}

// decideFounding: a new cluster forms only on an operator's act on one
// node, which founds a one-member cluster of itself (cluster.bootstrap
// explicit). One member has quorum at once and needs nobody else to
// start at the same moment; the writer then adds the other listed nodes
// as learners, one at a time, the way every later node joins.
func decideFounding(in Inputs) Decision {
	switch {
	case !in.Approved && !in.Founder:
		return Decision{Kind: Wait, Reason: "no cluster yet: a new cluster forms only on an operator's act (cluster.bootstrap explicit); run 'etcdlet bootstrap --approve' on one node (or name it in cluster.founder), which founds it, and the other listed nodes join it", Refusal: RefuseNotApproved}
	case !in.Consent.Granted:
		return Decision{Kind: Wait, Reason: "no listed peer's etcd answers; founding a cluster here waits: " + in.Consent.Reason(), Refusal: RefuseNoConsent}
	}
	// The verdict's reason names the act: the operator's approval, or
	// cluster.founder naming this node on every listed host.
	return Decision{Kind: Found, Reason: "no listed peer's etcd answers and " + in.Consent.Reason() + ": founding a one-member cluster of this node, with an identity of its own; the other listed nodes join it as learners, one at a time",
		InitialCluster: identity.InitialCluster([]identity.Member{in.Self}), ClusterState: runtime.StateNew}
}

func decideWithData(in Inputs) Decision {
	v := in.View
	restart := Decision{Kind: Restart, Reason: "restart on the existing data dir",
		InitialCluster: identity.InitialCluster(withSelf(in.Desired, in.Self)), ClusterState: runtime.StateExisting}
	if !in.Data.WAL {
		// etcd cannot restart a member from its backend alone; whatever it
		// was, it cannot serve as this node's member.
		return Decision{Kind: MoveAside, Reason: "the data dir holds a backend but no write-ahead log: it cannot be restarted; kept aside before the node joins"}
	}
	if id, n, ok := foreignMajority(v, len(in.Desired)); ok && in.Pinned != 0 && !v.Reached {
		// A majority of the listed addresses serve one other cluster: this
		// data's cluster cannot get its quorum back on this list, and the
		// other one is most likely its successor (a re-bootstrap after a
		// disaster). Its old, longer log must never run beside it.
		return Decision{Kind: Refuse, Reason: fmt.Sprintf("the local data belongs to cluster %s, but %d of the %d listed addresses answer for cluster %s (re-bootstrapped?); not starting and not moving anything: %s",
			membership.IDString(in.Pinned), n, len(in.Desired), membership.IDString(id), toJoin(id, in.Pinned)), Refusal: RefuseForeignData}
	}
	switch {
	case !v.Reached:
		// Restarting is how a cluster that lost quorum gets it back.
		return restart
	case in.Pinned == 0:
		// Whose data this is cannot be told; never move it aside on the
		// word of a cluster that may not be its own.
		return restart
	case v.ClusterID != in.Pinned:
		return Decision{Kind: Refuse, Reason: fmt.Sprintf("the local data belongs to cluster %s but the listed peers form cluster %s; not starting and not moving anything: %s",
			membership.IDString(in.Pinned), membership.IDString(v.ClusterID), toJoin(v.ClusterID, in.Pinned)), Refusal: RefuseForeignData}
	}
	if in.LocalID != 0 {
		if m, ok := v.Member(in.LocalID); ok {
			if at, moved := elsewhere(m, in.Self); moved {
				// The node's address changed (or node.address names
				// another): the data is the member's at the old address.
				// Restarted here, it would publish this node's name on a
				// member that keeps its old peer URL. It waits, whole,
				// until the agents remove that member (an address no
				// longer listed goes), then it is moved aside below.
				return Decision{Kind: Wait, Reason: fmt.Sprintf("the local data is member %s's, whose peer URL is at %s, not at this node's address %s (did the node's IP change?); not restarted here: once that member is removed (the agents remove an address no longer listed), the data is moved aside and this node joins as a new member",
					membership.IDString(m.ID), at, in.Self.IP)}
			}
			return restart
		}
		return Decision{Kind: MoveAside, Reason: fmt.Sprintf("member %s was removed from the cluster while this node was down; its data is stale", membership.IDString(in.LocalID))}
	}
	// The member ID is unknown. If the cluster has a member with this
	// peer URL, start and let the ID check of the next pass decide; if it
	// has none, the data cannot be current.
	if _, ok := v.WithPeerURL(in.Self.PeerURL); ok {
		return restart
	}
	return Decision{Kind: MoveAside, Reason: "the cluster has no member with this node's peer URL; the local data is stale"}
}

func decideJoin(in Inputs) Decision {
	m, ok := in.View.WithPeerURL(in.Self.PeerURL)
	switch {
	case (!ok || !m.Started()) && in.JoinSpace.Reason != "":
		return Decision{Kind: Refuse, Refusal: in.JoinSpace.Refusal, Reason: in.JoinSpace.Reason}
	case !ok:
		return Decision{Kind: Wait, Reason: "not a member yet; waiting to be added as a learner"}
	case m.Name != "" && m.Name != in.Self.Name:
		return Decision{Kind: Wait, Reason: fmt.Sprintf("member %q holds this node's peer URL %s; resolve by hand", m.Name, in.Self.PeerURL), Refusal: RefusePeerURLTaken}
	case m.Started() && m.InRaft():
		// It answers in raft as itself: alive, so another node serves this
		// address (a cloned host, a configuration with another node's
		// address). Declaring it stale would evict a healthy member.
		return Decision{Kind: Refuse, Refusal: RefuseAddressTaken, Reason: fmt.Sprintf("member %s of cluster %s answers at this node's address %s as itself: another node serves this address; this node holds no data and stays out (is node.address right? is this host a clone of that one?)",
			membership.IDString(m.ID), membership.IDString(in.View.ClusterID), in.Self.IP)}
	case m.Started():
		return Decision{Kind: DeclareStale, StaleID: m.ID,
			Reason: fmt.Sprintf("the cluster has started member %s for this node but its data is gone; it must be removed and the node rejoin", membership.IDString(m.ID))}
	default:
		return Decision{Kind: Join, Reason: fmt.Sprintf("member %s was added for this node; joining", membership.IDString(m.ID)),
			InitialCluster: joinCluster(in), ClusterState: runtime.StateExisting, JoinID: m.ID}
	}
}

// joinCluster lists every current member for --initial-cluster, which etcd
// checks against the cluster when joining: names of members that have not
// published theirs are derived from their peer URL's IP (this node's own
// name for itself), or fall back to the member ID.
func joinCluster(in Inputs) string {
	var entries []identity.Member
	for _, m := range in.View.Members {
		name := m.Name
		if name == "" {
			name = membership.IDString(m.ID)
			if slices.Contains(m.PeerURLs, in.Self.PeerURL) {
				name = in.Self.Name
			} else if ip, ok := identity.IPFromURL(firstOr(m.PeerURLs)); ok {
				name = identity.MemberName(in.Cluster, ip)
			}
		}
		for _, u := range m.PeerURLs {
			entries = append(entries, identity.Member{Name: name, PeerURL: u})
		}
	}
	return identity.InitialCluster(entries)
}

// otherClusterName finds a started voter at a listed address named for
// another cluster.name, when none bears this node's: the cluster is not
// this node's configuration's.
func otherClusterName(in Inputs) (string, bool) {
	other := ""
	for _, m := range in.View.Members {
		if m.IsLearner || !m.Started() {
			continue
		}
		ip, ok := identity.IPFromURL(firstOr(m.PeerURLs))
		if !ok || !slices.ContainsFunc(in.Desired, func(d identity.Member) bool { return d.IP == ip }) {
			continue
		}
		if m.Name == identity.MemberName(in.Cluster, ip) {
			return "", false
		}
		other = m.Name
	}
	return other, other != ""
}

func withSelf(desired []identity.Member, self identity.Member) []identity.Member {
	for _, d := range desired {
		if d.PeerURL == self.PeerURL {
			return desired
		}
	}
	return append(slices.Clone(desired), self)
}

func hasMember(v membership.View, id uint64) bool {
	_, ok := v.Member(id)
	return ok
}

// elsewhere reports whether member m's peer URLs are all at another IP
// than self's, and which: a port or scheme that differs is no move.
func elsewhere(m membership.Member, self identity.Member) (netip.Addr, bool) {
	var other netip.Addr
	for _, u := range m.PeerURLs {
		ip, ok := identity.IPFromURL(u)
		if !ok {
			continue
		}
		if ip.Unmap() == self.IP.Unmap() {
			return netip.Addr{}, false
		}
		other = ip
	}
	return other, other.IsValid()
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// toJoin says how an operator makes this node join cluster id instead of
// the one its data and state belong to: moving the data aside is not
// enough, the agent must forget that cluster too.
func toJoin(id, pinned uint64) string {
	return fmt.Sprintf("to join %s, stop etcdlet and run 'etcdlet restore --rejoin' (it moves the data dir aside, kept, and forgets cluster %s), then start etcdlet",
		membership.IDString(id), membership.IDString(pinned))
}

// foreignMajority reports the other cluster that most listed endpoints
// answer for, how many do, and whether they are a majority of listed.
func foreignMajority(v membership.View, listed int) (uint64, int, bool) {
	count := map[uint64]int{}
	var best uint64
	for _, f := range v.Foreign {
		count[f.ClusterID]++
		if count[f.ClusterID] > count[best] {
			best = f.ClusterID
		}
	}
	return best, count[best], listed > 0 && count[best] >= listed/2+1
}

func foreignList(fs []membership.Foreign) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}
