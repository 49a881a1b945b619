package localmember

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

var scheme = identity.Scheme{Cluster: "etcd-main", PeerScheme: "https", ClientScheme: "https", PeerPort: 2380, ClientPort: 2379}

func ident(ip string) identity.Member { return scheme.For(netip.MustParseAddr(ip)) }

func started(ip string, id uint64) membership.Member {
	d := ident(ip)
	return membership.Member{ID: id, Name: d.Name, PeerURLs: []string{d.PeerURL}, ClientURLs: []string{d.ClientURL},
		Health: membership.Health{Reachable: true, Leader: 1}}
}

func unstartedLearner(ip string, id uint64) membership.Member {
	return membership.Member{ID: id, PeerURLs: []string{ident(ip).PeerURL}, IsLearner: true}
}

func reached(members ...membership.Member) membership.View {
	return membership.View{Reached: true, Established: true, Observation: membership.Observation{ClusterID: 0xc1, LeaderID: 1, Members: members}}
}

func retiredTo(ip string) Retirement {
	return Retirement{Cluster: 0xc1, By: netip.MustParseAddr(ip)}
}

func TestDecide(t *testing.T) {
	self := ident("192.0.2.3")
	list := []identity.Member{ident("192.0.2.1"), ident("192.0.2.2"), self}
	nobody := membership.View{}
	noQuorum := membership.View{Established: true, Observation: membership.Observation{ClusterID: 0xc1}}
	cluster := reached(started("192.0.2.1", 1), started("192.0.2.2", 2), started("192.0.2.3", 3))

	wal := datadir.Contents{WAL: true, Backend: true}
	granted := consent.Verdict{Granted: true}
	silent := consent.Verdict{Silent: []string{"192.0.2.1 (connection refused)"}}
	foreign := func(v membership.View) membership.View {
		v.Foreign = []membership.Foreign{{Endpoint: ident("192.0.2.2").ClientURL, ClusterID: 0xf0, MemberID: 9}}
		return v
	}

	tests := []struct {
		name  string
		in    Inputs
		want  Kind
		state string // expected initial-cluster-state
		ic    string // expected initial cluster (substring)
		// icExact is the expected initial cluster, whole.
		icExact string
		why     string // reason substring
		// refusal is the safety rule named (etcdlet_refusals_total's
		// reason); empty for every decision that refuses nothing.
		refusal Refusal
	}{
		// cluster.bootstrap consent: the listed nodes bootstrap together.
		{name: "consent: bootstrap when no listed peer answers, never a member, and every listed node consents",
			in: Inputs{Mode: config.BootstrapConsent, InList: true, View: nobody, Consent: granted}, want: Bootstrap, state: "new",
			ic: "etcd-main-192.0.2.1=https://192.0.2.1:2380,etcd-main-192.0.2.2=https://192.0.2.2:2380,etcd-main-192.0.2.3=https://192.0.2.3:2380"},
		{name: "consent: a listed node that does not answer is no consent: wait",
			in: Inputs{Mode: config.BootstrapConsent, InList: true, View: nobody, Consent: silent}, want: Wait, why: "no answer from 192.0.2.1", refusal: RefuseNoConsent},
		{name: "consent: never bootstrap after having been a member",
			in: Inputs{Mode: config.BootstrapConsent, InList: true, WasMember: true, View: nobody, Consent: granted}, want: Refuse, why: "etcdlet bootstrap --approve", refusal: RefuseWasMember},
		{name: "consent: a former member with the operator's approval founds a new cluster, never bootstraps the list again",
			in:   Inputs{Mode: config.BootstrapConsent, InList: true, WasMember: true, Approved: true, View: nobody, Consent: consent.Verdict{Granted: true, Approved: true, Founding: true}},
			want: Found, why: "approved by the operator"},
		{name: "consent: an approval without the founding's verdict waits",
			in:   Inputs{Mode: config.BootstrapConsent, InList: true, Approved: true, View: nobody, Consent: consent.Verdict{Founding: true, Refusing: []string{"192.0.2.2 (promised)"}}},
			want: Wait, refusal: RefuseNoConsent},
		{name: "consent: a node that founded a cluster before does not bootstrap either",
			in: Inputs{Mode: config.BootstrapConsent, InList: true, Founded: true, View: nobody, Consent: granted}, want: Refuse, refusal: RefuseWasMember},

		// cluster.bootstrap explicit (the default, also when unset): a new
		// cluster forms only on an operator's act on one node.
		{name: "explicit: fresh nodes wait for the operator's act, and say what it is",
			in: Inputs{InList: true, View: nobody}, want: Wait, why: "no cluster yet: a new cluster forms only on an operator's act (cluster.bootstrap explicit); run 'etcdlet bootstrap --approve' on one node", refusal: RefuseNotApproved},
		{name: "explicit: every listed node fresh and agreeing forms nothing without the act",
			in: Inputs{Mode: config.BootstrapExplicit, InList: true, View: nobody, Consent: granted}, want: Wait, refusal: RefuseNotApproved},
		{name: "explicit: approved here, no listed node objects: found a one-member cluster of this node",
			in:   Inputs{Mode: config.BootstrapExplicit, InList: true, Approved: true, View: nobody, Consent: consent.Verdict{Granted: true, Approved: true, Founding: true}},
			want: Found, state: "new", icExact: "etcd-main-192.0.2.3=https://192.0.2.3:2380", why: "the other listed nodes join it as learners"},
		{name: "explicit: approved here, a silent node does not hold it back (the operator looked)",
			in:   Inputs{InList: true, Approved: true, View: nobody, Consent: consent.Verdict{Granted: true, Approved: true, Founding: true, Silent: []string{"192.0.2.1 (timeout)"}}},
			want: Found, why: "despite no answer from 192.0.2.1"},
		{name: "explicit: approved here, but a listed node holds data: wait",
			in:   Inputs{InList: true, Approved: true, View: nobody, Consent: consent.Verdict{Founding: true, Refusing: []string{"192.0.2.1 (has-data)"}}},
			want: Wait, why: "refused by 192.0.2.1 (has-data)", refusal: RefuseNoConsent},
		{name: "explicit: cluster.founder names this node and every other listed node confirms: found",
			in:   Inputs{InList: true, Founder: true, View: nobody, Consent: consent.Verdict{Granted: true, Founding: true}},
			want: Found, icExact: "etcd-main-192.0.2.3=https://192.0.2.3:2380", why: "cluster.founder names this node"},
		{name: "explicit: cluster.founder waits for a silent node: it may host a cluster that is down",
			in:   Inputs{InList: true, Founder: true, View: nobody, Consent: consent.Verdict{Founding: true, Silent: []string{"192.0.2.1 (timeout)"}}},
			want: Wait, why: "no answer from 192.0.2.1", refusal: RefuseNoConsent},
		{name: "explicit: a node that founded a cluster and lost its data never founds again on cluster.founder",
			in:   Inputs{InList: true, Founder: true, Founded: true, View: nobody, Consent: consent.Verdict{Granted: true, Founding: true}},
			want: Refuse, why: "founded a cluster before", refusal: RefuseWasMember},
		{name: "explicit: a node that founded a cluster and lost its data founds again only on a new approval",
			in:   Inputs{InList: true, Founded: true, Approved: true, View: nobody, Consent: consent.Verdict{Granted: true, Approved: true, Founding: true}},
			want: Found},
		{name: "explicit: a former member never founds on cluster.founder",
			in:   Inputs{InList: true, Founder: true, WasMember: true, View: nobody, Consent: consent.Verdict{Granted: true, Founding: true}},
			want: Refuse, refusal: RefuseWasMember},
		{name: "explicit: never found beside an established cluster without quorum, approved or not",
			in:   Inputs{InList: true, Approved: true, Founder: true, View: noQuorum, Consent: consent.Verdict{Granted: true, Approved: true}},
			want: Wait, refusal: RefuseBesideCluster},
		{name: "explicit: an approved node whose listed peers answer joins, it founds nothing",
			in:   Inputs{InList: true, Approved: true, Founder: true, View: reached(started("192.0.2.1", 1))},
			want: Wait, why: "waiting to be added"},
		{name: "explicit: the learner the writer added joins",
			in:   Inputs{InList: true, View: reached(started("192.0.2.1", 1), unstartedLearner("192.0.2.3", 3))},
			want: Join, state: "existing"},

		// cluster.bootstrap never (always with members.source etcd-resource).
		{name: "never: no cluster answers: wait for it, whatever the operator approved or the configuration names",
			in:   Inputs{Mode: config.BootstrapNever, InList: true, Approved: true, Founder: true, View: nobody, Consent: consent.Verdict{Granted: true, Approved: true}},
			want: Wait, why: "never founds a cluster", refusal: RefuseNeverBootstrap},
		{name: "never: the learner the writer added joins",
			in:   Inputs{Mode: config.BootstrapNever, InList: true, View: reached(started("192.0.2.1", 1), unstartedLearner("192.0.2.3", 3))},
			want: Join},
		{name: "a node named in a cluster without quorum joins it, and bootstraps nothing of its own",
			in: Inputs{InList: true, View: membership.View{Observation: membership.Observation{ClusterID: 0xc1,
				Members: []membership.Member{started("192.0.2.1", 1), {ID: 3, Name: self.Name, PeerURLs: []string{self.PeerURL}}}}},
				Consent: granted},
			want: Join, state: "existing", ic: "etcd-main-192.0.2.3=https://192.0.2.3:2380"},
		{name: "never bootstrap beside an established cluster without quorum",
			in: Inputs{InList: true, View: noQuorum, Consent: granted}, want: Wait, why: "no quorum", refusal: RefuseBesideCluster},
		{name: "not listed and no data: idle",
			in: Inputs{InList: false, View: cluster}, want: Idle},
		{name: "listed but not added yet: wait for the writer",
			in: Inputs{InList: true, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))}, want: Wait, why: "waiting to be added"},
		{name: "a node in no cluster yet that hears two clusters joins neither",
			in: Inputs{InList: true, View: foreign(reached(started("192.0.2.1", 1), unstartedLearner("192.0.2.3", 3)))}, want: Wait, why: "more than one cluster", refusal: RefuseAmbiguous},
		{name: "join as the learner the writer added, with every member in the initial cluster",
			in:   Inputs{InList: true, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2), unstartedLearner("192.0.2.3", 3))},
			want: Join, state: "existing",
			ic: "etcd-main-192.0.2.1=https://192.0.2.1:2380,etcd-main-192.0.2.2=https://192.0.2.2:2380,etcd-main-192.0.2.3=https://192.0.2.3:2380"},
		{name: "join names unpublished peers from their IP, or by ID",
			in: Inputs{InList: true, View: reached(started("192.0.2.1", 1),
				membership.Member{ID: 0xab, PeerURLs: []string{ident("192.0.2.2").PeerURL}},
				membership.Member{ID: 0xcd, PeerURLs: []string{"https://etcd-x.example:2380"}},
				unstartedLearner("192.0.2.3", 3))},
			want: Join, ic: "etcd-main-192.0.2.2=https://192.0.2.2:2380,cd=https://etcd-x.example:2380,etcd-main-192.0.2.3="},
		{name: "an unstarted voter from the bootstrap list joins too",
			in:   Inputs{InList: true, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2), membership.Member{ID: 3, Name: self.Name, PeerURLs: []string{self.PeerURL}})},
			want: Join},
		{name: "our identity is a started member that does not answer, and our data is gone: declare it stale",
			in: Inputs{InList: true, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2), func() membership.Member {
				m := started("192.0.2.3", 3)
				m.Health = membership.Health{Problem: "dial tcp 192.0.2.3:2379: connection refused"}
				return m
			}())}, want: DeclareStale, why: "data is gone"},
		{name: "our identity answers in raft as itself: another node serves our address",
			in: Inputs{InList: true, View: cluster}, want: Refuse, why: "another node serves this address", refusal: RefuseAddressTaken},
		{name: "another name holds our peer URL",
			in: Inputs{InList: true, View: reached(started("192.0.2.1", 1), func() membership.Member {
				m := started("192.0.2.3", 9)
				m.Name = "infra3"
				return m
			}())}, want: Wait, why: "resolve by hand", refusal: RefusePeerURLTaken},
		{name: "too many moves aside: the node does not rejoin",
			in: Inputs{InList: true, Flapping: "moved aside 3 times", View: reached(started("192.0.2.1", 1), unstartedLearner("192.0.2.3", 3))}, want: Refuse, why: "moved aside 3 times", refusal: RefuseMovesAside},
		{name: "too little disk space for the copy: the node refuses before it is added",
			in:   Inputs{InList: true, JoinSpace: Problem{Refusal: RefuseDiskSpace, Reason: "has 10.0 MiB free"}, View: reached(started("192.0.2.1", 1))},
			want: Refuse, why: "has 10.0 MiB free", refusal: RefuseDiskSpace},
		{name: "too little disk space for the copy: the node refuses the learner added for it",
			in:   Inputs{InList: true, JoinSpace: Problem{Refusal: RefuseDiskSpace, Reason: "has 10.0 MiB free"}, View: reached(started("192.0.2.1", 1), unstartedLearner("192.0.2.3", 3))},
			want: Refuse, why: "has 10.0 MiB free", refusal: RefuseDiskSpace},
		{name: "a data dir that must be a mount point and is not is never used",
			in:   Inputs{InList: true, DataProblem: Problem{Refusal: RefuseNotMounted, Reason: "not a mount point"}, Data: wal, LocalID: 3, Pinned: 0xc1, View: cluster},
			want: Refuse, why: "not a mount point", refusal: RefuseNotMounted},
		{name: "restart on data while no peer answers (how a cluster regains quorum)",
			in: Inputs{InList: true, Data: wal, LocalID: 3, View: nobody}, want: Restart, state: "existing"},
		{name: "restart on data while still a member",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: cluster}, want: Restart},
		{name: "restart on data even when no longer listed, until the writer removes it",
			in: Inputs{InList: false, Data: wal, LocalID: 3, Pinned: 0xc1, View: cluster}, want: Restart},
		{name: "data of a member still at another address (the node's IP changed) waits, whole, for its removal",
			in:   Inputs{InList: true, Data: wal, LocalID: 9, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2), started("192.0.2.9", 9))},
			want: Wait, why: "peer URL is at 192.0.2.9, not at this node's address 192.0.2.3"},
		{name: "the same for IPv6 addresses",
			in: func() Inputs {
				in := Inputs{InList: true, Data: wal, LocalID: 9, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))}
				m := started("192.0.2.9", 9)
				m.PeerURLs = []string{"https://[2001:db8::9]:2380"}
				in.View.Members = append(in.View.Members, m)
				return in
			}(),
			want: Wait, why: "peer URL is at 2001:db8::9"},
		{name: "a member at this address under another port or scheme restarts (no move)",
			in: func() Inputs {
				m := started("192.0.2.3", 3)
				m.PeerURLs = []string{"http://192.0.2.3:12380"}
				return Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2), m)}
			}(),
			want: Restart},
		{name: "data of a member removed while down is moved aside",
			in:   Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))},
			want: MoveAside, why: "removed from the cluster while this node was down"},
		{name: "data of a removed member whose IP was re-added as a new learner is moved aside",
			in:   Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2), unstartedLearner("192.0.2.3", 4))},
			want: MoveAside},
		{name: "data whose cluster cannot be told is restarted, never moved aside on another cluster's word",
			in: Inputs{InList: true, Data: wal, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))}, want: Restart},
		{name: "unknown member ID and no member with our peer URL: data is stale",
			in: Inputs{InList: true, Data: wal, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))}, want: MoveAside},
		{name: "unknown member ID but our peer URL is a member: try the data",
			in: Inputs{InList: true, Data: wal, Pinned: 0xc1, View: cluster}, want: Restart},
		{name: "a backend without a write-ahead log is moved aside before a join",
			in: Inputs{InList: true, Data: datadir.Contents{Backend: true}, View: reached(started("192.0.2.1", 1), unstartedLearner("192.0.2.3", 3))}, want: MoveAside, why: "no write-ahead log"},
		{name: "data of another cluster is never touched",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xbad, View: cluster}, want: Refuse, why: "belongs to cluster bad", refusal: RefuseForeignData},
		{name: "data of a cluster that lost quorum, while a majority of the listed addresses serve another (a re-bootstrap): never restarted beside it",
			in: Inputs{InList: true, Desired: list, Data: wal, LocalID: 3, Pinned: 0xc1, View: membership.View{Observation: membership.Observation{
				Foreign: []membership.Foreign{{Endpoint: ident("192.0.2.1").ClientURL, ClusterID: 0xf0, MemberID: 8}, {Endpoint: ident("192.0.2.2").ClientURL, ClusterID: 0xf0, MemberID: 9}}}}},
			want: Refuse, why: "2 of the 3 listed addresses answer for cluster f0", refusal: RefuseForeignData},
		{name: "data of a cluster that lost quorum, one listed address serving another cluster: restart, for the quorum is back only so",
			in: Inputs{InList: true, Desired: list, Data: wal, LocalID: 3, Pinned: 0xc1, View: foreign(membership.View{})}, want: Restart},
		{name: "running and still a member: keep",
			in: Inputs{InList: true, Running: true, LocalID: 3, Pinned: 0xc1, View: cluster}, want: Keep},
		{name: "running but removed: stop and move aside",
			in: Inputs{InList: false, Running: true, LocalID: 3, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))}, want: StopRemoved},
		{name: "running, and a view of another cluster lacks the member: keep",
			in: Inputs{InList: true, Running: true, LocalID: 3, Pinned: 0xbad, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))}, want: Keep},
		{name: "running, not pinned yet: keep (never stop on a view that may not be ours)",
			in: Inputs{InList: true, Running: true, LocalID: 3, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2))}, want: Keep},
		{name: "running and the cluster unreachable: keep (never act on a partial view)",
			in: Inputs{InList: true, Running: true, LocalID: 3, Pinned: 0xc1, View: nobody}, want: Keep},
		{name: "running, and a version change the rules refuse: refused, the member runs on as it is",
			in: Inputs{InList: true, Running: true, LocalID: 3, Pinned: 0xc1, View: cluster,
				VersionChange: Problem{Refusal: RefuseEtcdVersion, Reason: "keeping the local member on etcd 3.5, not restarting it on 3.7"}},
			want: Refuse, why: "keeping the local member on etcd 3.5", refusal: RefuseEtcdVersion},
		{name: "running but removed, and a version change refused: the removal comes first",
			in: Inputs{InList: false, Running: true, LocalID: 3, Pinned: 0xc1, View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2)),
				VersionChange: Problem{Refusal: RefuseEtcdVersion, Reason: "keeping"}}, want: StopRemoved},

		// A node that promised a recovering node (192.0.2.2) not to start
		// its member of cluster c1 again.
		{name: "retired: a running member stops, its data kept",
			in: Inputs{InList: true, Running: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: noQuorum, Retired: retiredTo("192.0.2.2")}, want: StopRetired, why: "promised 192.0.2.2 not to run its member of cluster c1 again"},
		{name: "retired: the old cluster back with quorum (the hosts named gone returned) does not start it",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: cluster, Retired: retiredTo("192.0.2.2")}, want: Wait, why: "waiting for the recovered cluster to answer there"},
		{name: "retired: waits, data in place, until the recovered cluster answers at the recovering node",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: noQuorum, Retired: retiredTo("192.0.2.2")}, want: Wait, why: "start etcdlet on 192.0.2.2"},
		{name: "retired: another cluster at another node is not the recovered one",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: foreign(noQuorum), Retired: retiredTo("192.0.2.1")}, want: Wait},
		{name: "retired: the recovered cluster answers at the recovering node: leave for it",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: foreign(noQuorum), Retired: retiredTo("192.0.2.2")}, want: LeaveForSuccessor, why: "cluster f0 answers at 192.0.2.2"},
		{name: "retired: data already aside, still pinned (a crash in between): leave for it",
			in: Inputs{InList: true, Pinned: 0xc1, WasMember: true, View: foreign(noQuorum), Retired: retiredTo("192.0.2.2")}, want: LeaveForSuccessor},
		{name: "retired: an unreadable promise may stand: the member does not run",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: cluster, Retired: Retirement{Cluster: 0xc1, Unreadable: "permission denied"}}, want: StopRetired, why: "cannot be read"},
		{name: "two-node survivor: a running member without quorum is forced alone",
			in: Inputs{InList: true, Running: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: noQuorum, ForceAlone: "pacemaker fenced the peer"}, want: ForceAlone, why: "pacemaker fenced the peer"},
		{name: "two-node survivor: a stopped member with its data is forced alone",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: noQuorum, ForceAlone: "pacemaker fenced the peer"}, want: ForceAlone},
		{name: "two-node survivor: never while the cluster has quorum",
			in: Inputs{InList: true, Running: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: cluster, ForceAlone: "pacemaker fenced the peer"}, want: Keep},
		{name: "two-node survivor: never without data of its own",
			in: Inputs{InList: true, Pinned: 0xc1, WasMember: true, View: noQuorum, ForceAlone: "pacemaker fenced the peer"}, want: Wait, refusal: RefuseBesideCluster},
		{name: "two-node survivor: never on data it may not use",
			in: Inputs{InList: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: noQuorum, ForceAlone: "pacemaker fenced the peer",
				DataProblem: Problem{Refusal: RefuseNotMounted, Reason: "not a mount point"}}, want: Refuse, refusal: RefuseNotMounted},
		{name: "two-node survivor: never for a node the list does not name",
			in: Inputs{Data: wal, LocalID: 3, Pinned: 0xc1, View: noQuorum, ForceAlone: "pacemaker fenced the peer"}, want: Restart},
		{name: "two-node survivor: a promise not to start the member comes first",
			in: Inputs{InList: true, Running: true, Data: wal, LocalID: 3, Pinned: 0xc1, View: noQuorum, ForceAlone: "pacemaker fenced the peer", Retired: retiredTo("192.0.2.2")}, want: StopRetired},
		{name: "a promise for another cluster than this node's binds nothing",
			in: Inputs{InList: true, Running: true, LocalID: 3, Pinned: 0xc1, View: cluster, Retired: Retirement{Cluster: 0xbad, By: netip.MustParseAddr("192.0.2.2")}}, want: Keep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Cluster, tt.in.Self, tt.in.Desired = "etcd-main", self, list
			d := Decide(tt.in)
			if d.Kind != tt.want {
				t.Fatalf("decision %s (%s), want %s", d.Kind, d.Reason, tt.want)
			}
			if tt.state != "" && d.ClusterState != tt.state {
				t.Errorf("initial-cluster-state %q, want %q", d.ClusterState, tt.state)
			}
			if tt.icExact != "" && d.InitialCluster != tt.icExact {
				t.Errorf("initial cluster %q, want %q", d.InitialCluster, tt.icExact)
			}
			if tt.ic != "" && !strings.Contains(d.InitialCluster, tt.ic) {
				t.Errorf("initial cluster %q does not contain %q", d.InitialCluster, tt.ic)
			}
			if tt.why != "" && !strings.Contains(d.Reason, tt.why) {
				t.Errorf("reason %q does not say %q", d.Reason, tt.why)
			}
			if d.Refusal != tt.refusal {
				t.Errorf("refusal %q, want %q", d.Refusal, tt.refusal)
			}
		})
	}
}

// A node whose cluster.name is not the cluster's does not join it, even
// as the learner the writer added for its address.
func TestAnotherClusterNameDoesNotJoin(t *testing.T) {
	self := ident("192.0.2.3")
	learnerForUs := membership.Member{ID: 3, PeerURLs: []string{self.PeerURL}, IsLearner: true}
	in := Inputs{Cluster: "foo", Self: self, Desired: []identity.Member{self}, InList: true,
		View: reached(started("192.0.2.1", 1), started("192.0.2.2", 2), learnerForUs)}
	for _, m := range in.View.Members[:2] {
		ip, _ := identity.IPFromURL(m.PeerURLs[0])
		in.Desired = append(in.Desired, identity.Member{IP: ip, Name: identity.MemberName("foo", ip), PeerURL: m.PeerURLs[0]})
	}
	d := Decide(in)
	if d.Kind != Refuse || d.Refusal != RefuseClusterName {
		t.Fatalf("decision %s (%s), want a refusal naming the cluster name", d.Kind, d.Reason)
	}
	in.Cluster = "etcd-main"
	if d := Decide(in); d.Kind != Join {
		t.Errorf("with the cluster's name: decision %s (%s), want join", d.Kind, d.Reason)
	}
}
