package membership

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

var scheme = identity.Scheme{Cluster: "etcd-main", PeerScheme: "https", ClientScheme: "https", PeerPort: 2380, ClientPort: 2379}

func desired(ips ...string) []identity.Member {
	addrs := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		addrs[i] = netip.MustParseAddr(ip)
	}
	return scheme.ForAll(addrs)
}

// member builds an observed member from an IP; id is derived from the last
// byte so that tests can name IDs.
type memberOpt func(*Member)

func learner(m *Member)   { m.IsLearner = true }
func down(m *Member)      { m.Health = Health{Problem: "dial tcp: connection refused"} }
func unstarted(m *Member) { m.Name, m.ClientURLs, m.Health = "", nil, Health{Problem: "not started"} }
func applied(i uint64) memberOpt {
	return func(m *Member) { m.Health.RaftAppliedIndex = i }
}

func member(ip string, id uint64, opts ...memberOpt) Member {
	d := scheme.For(netip.MustParseAddr(ip))
	m := Member{ID: id, Name: d.Name, PeerURLs: []string{d.PeerURL}, ClientURLs: []string{d.ClientURL},
		Health: Health{Reachable: true, Leader: 1, RaftAppliedIndex: 100}}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func obs(leader uint64, members ...Member) Observation {
	return Observation{ClusterID: 7, LeaderID: leader, Members: members}
}

func TestMakePlan(t *testing.T) {
	tests := []struct {
		name    string
		desired []identity.Member
		obs     Observation
		want    string   // Next.String() prefix, "" for none
		waits   []string // Wait reasons (and names) in order
	}{
		{
			name:    "converged",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3)),
		},
		{
			name:    "members match regardless of list order",
			desired: desired("192.0.2.3", "192.0.2.1", "192.0.2.2"),
			obs:     obs(1, member("192.0.2.2", 2), member("192.0.2.1", 1), member("192.0.2.3", 3)),
		},
		{
			name:    "empty list never removes members",
			desired: nil,
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2)),
			waits:   []string{"EmptyList"},
		},
		{
			name:    "no quorum changes nothing",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4"),
			obs:     obs(0, member("192.0.2.1", 1), member("192.0.2.2", 2, down), member("192.0.2.3", 3, down)),
			waits:   []string{"NoQuorum"},
		},
		{
			name:    "missing member is added as learner",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3)),
			want:    "add etcd-main-192.0.2.4 (https://192.0.2.4:2380) as learner",
		},
		{
			name:    "IPv6 member is added with a bracketed peer URL",
			desired: desired("2001:db8::1", "2001:db8::2"),
			obs:     obs(1, member("2001:db8::1", 1)),
			want:    "add etcd-main-2001:db8::2 (https://[2001:db8::2]:2380) as learner",
		},
		{
			name:    "second learner waits its turn",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3)),
			want:    "add etcd-main-192.0.2.4",
			waits:   []string{"LearnerPending etcd-main-192.0.2.5"},
		},
		{
			name:    "listed learner is promoted before anyone else is added",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3), member("192.0.2.4", 4, learner)),
			want:    "promote etcd-main-192.0.2.4 [4]",
			waits:   []string{"LearnerPending etcd-main-192.0.2.5"},
		},
		{
			name:    "a running learner that has not published itself yet is promoted under its listed name",
			desired: desired("192.0.2.1", "192.0.2.4"),
			obs: obs(1, member("192.0.2.1", 1), member("192.0.2.4", 4, learner, unstarted, func(m *Member) {
				m.Health.PeerListening = true // etcd serves its client port only once published
			})),
			want: "promote etcd-main-192.0.2.4 [4]",
		},
		{
			name:    "a learner etcd refused as not in sync waits while it copies the keyspace",
			desired: desired("192.0.2.1", "192.0.2.4"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.4", 4, learner, unstarted, func(m *Member) { m.Health.PeerListening = true }))
				o.CatchingUp = []uint64{4}
				return o
			}(),
			waits: []string{"LearnerCatchingUp etcd-main-192.0.2.4"},
		},
		{
			name:    "its own agent keeps promoting a learner that copies the keyspace, for the moment etcd allows it",
			desired: desired("192.0.2.1", "192.0.2.4"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.4", 4, learner, unstarted, func(m *Member) { m.Health.PeerListening = true }))
				o.CatchingUp, o.Local = []uint64{4}, 4
				return o
			}(),
			want: "promote etcd-main-192.0.2.4 [4]",
		},
		{
			name:    "a learner etcd refused before is promoted once it serves its client port",
			desired: desired("192.0.2.1", "192.0.2.4"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.4", 4, learner))
				o.CatchingUp = []uint64{4}
				return o
			}(),
			want: "promote etcd-main-192.0.2.4 [4]",
		},
		{
			name:    "add waits while a voter is unhealthy",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, down)),
			waits:   []string{"UnhealthyVoter etcd-main-192.0.2.4"},
		},
		{
			name:    "unlisted learner is removed first",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3), member("192.0.2.9", 9, learner)),
			want:    "remove etcd-main-192.0.2.9 [9]: learner is not in the member list",
		},
		{
			name:    "removal of a follower",
			desired: desired("192.0.2.1", "192.0.2.3"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3)),
			want:    "remove etcd-main-192.0.2.2 [2]: member is not in the member list",
		},
		{
			name:    "leader hands over before it is removed",
			desired: desired("192.0.2.2", "192.0.2.3"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2, applied(90)), member("192.0.2.3", 3, applied(95))),
			want:    "move leadership from etcd-main-192.0.2.1 to member 3",
		},
		{
			name:    "removal that would lose quorum is refused",
			desired: desired("192.0.2.1", "192.0.2.2"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2, down), member("192.0.2.3", 3)),
			waits:   []string{"WouldLoseQuorum etcd-main-192.0.2.3"},
		},
		{
			name:    "a listed learner whose server does not answer yet is not promoted, and blocks the rest",
			desired: desired("192.0.2.4", "192.0.2.2", "192.0.2.3"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.4", 4), member("192.0.2.2", 2, learner, down)),
			waits:   []string{"LearnerNotStarted etcd-main-192.0.2.2", "LearnerPending etcd-main-192.0.2.3", "JoinPending etcd-main-192.0.2.1"},
		},
		{
			name:    "a learner whose endpoint answers as someone else is never promoted",
			desired: desired("192.0.2.1", "192.0.2.2"),
			obs: obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2, learner, func(m *Member) {
				m.Health = Health{Reachable: true, WrongIdentity: true, Problem: "answers for cluster 9, not 7"}
			})),
			waits: []string{"LearnerNotStarted etcd-main-192.0.2.2"},
		},
		{
			name:    "a learner not promoted within the learner timeout is removed",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2, learner, down))
				o.Expired = []uint64{2}
				return o
			}(),
			want: "remove etcd-main-192.0.2.2 [2]: learner was not promoted within the learner timeout",
		},
		{
			name:    "after its learner expired, an address waits while another joins",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1))
				o.HeldBack = []string{scheme.For(netip.MustParseAddr("192.0.2.2")).PeerURL}
				return o
			}(),
			want:  "add etcd-main-192.0.2.3",
			waits: []string{"LearnerBackoff etcd-main-192.0.2.2"},
		},
		{
			name:    "an address held back is added when nobody else waits",
			desired: desired("192.0.2.1", "192.0.2.2"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1))
				o.HeldBack = []string{scheme.For(netip.MustParseAddr("192.0.2.2")).PeerURL}
				return o
			}(),
			want: "add etcd-main-192.0.2.2",
		},
		{
			name:    "the only voter is never removed: a list without it would orphan the cluster",
			desired: desired("192.0.2.2"),
			obs: func() Observation {
				squatter := member("192.0.2.2", 2, learner)
				squatter.Name = "infra2"
				return obs(1, member("192.0.2.1", 1), squatter)
			}(),
			waits: []string{"OrphaningList"},
		},
		{
			name:    "a list sharing no address with the voters is refused",
			desired: desired("192.0.2.4", "192.0.2.5", "192.0.2.6"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3)),
			waits:   []string{"OrphaningList"},
		},
		{
			name:    "a cluster whose only voter is down has no quorum",
			desired: desired("192.0.2.1", "192.0.2.2"),
			obs:     obs(0, member("192.0.2.1", 1, down)),
			waits:   []string{"NoQuorum"},
		},
		{
			name:    "an address that answers for another cluster is never added",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4", "192.0.2.5"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2))
				o.Pinned = 7
				o.Foreign = []Foreign{{Endpoint: scheme.For(netip.MustParseAddr("192.0.2.4")).ClientURL, ClusterID: 9, MemberID: 4}}
				return o
			}(),
			want:  "add etcd-main-192.0.2.5",
			waits: []string{"Foreign etcd-main-192.0.2.4"},
		},
		{
			name:    "an agent in no cluster yet that hears two clusters acts for neither",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2))
				o.Foreign = []Foreign{{Endpoint: scheme.For(netip.MustParseAddr("192.0.2.4")).ClientURL, ClusterID: 9, MemberID: 4}}
				return o
			}(),
			waits: []string{"Foreign"},
		},
		{
			name:    "an alarm does not take its member out of the quorum, and a join proceeds",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1, func(m *Member) { m.Health.Alarms = []string{"NOSPACE"} }),
					member("192.0.2.2", 2), member("192.0.2.3", 3))
				o.Alarms = []etcdclient.Alarm{{MemberID: 1, Type: "NOSPACE"}}
				return o
			}(),
			want: "add etcd-main-192.0.2.4",
		},
		{
			name:    "the alarm of a member that left is disarmed",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3))
				o.Alarms = []etcdclient.Alarm{{MemberID: 9, Type: "CORRUPT"}}
				return o
			}(),
			want: "disarm the CORRUPT alarm of member 9",
		},
		{
			name:    "dead unlisted voter is removed before a join, since etcd refuses adds while it is down",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, down)),
			want:    "remove etcd-main-192.0.2.3 [3]: unhealthy member",
		},
		{
			name:    "replace: the new member joins before the healthy old one leaves",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3)),
			want:    "add etcd-main-192.0.2.4",
			waits:   []string{"JoinPending etcd-main-192.0.2.3"},
		},
		{
			name:    "replace: the old member waits while the new one is a learner",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3), member("192.0.2.4", 4, learner)),
			want:    "promote etcd-main-192.0.2.4",
			waits:   []string{"JoinPending etcd-main-192.0.2.3"},
		},
		{
			name:    "replace: the old member waits while the new voter applies the keyspace (its peer port listens, its client port does not answer)",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4"),
			obs: obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3),
				member("192.0.2.4", 4, down, func(m *Member) { m.Health.PeerListening = true })),
			waits: []string{"JoinPending etcd-main-192.0.2.3"},
		},
		{
			name:    "replace: a listed voter that is down holds no removal (its peer port does not listen)",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.4"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3), member("192.0.2.4", 4, down)),
			want:    "remove etcd-main-192.0.2.3 [3]: member is not in the member list",
		},
		{
			name:    "stale incarnation of this node is removed so it can rejoin",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3"),
			obs: func() Observation {
				o := obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, down))
				o.Stale = []uint64{3}
				return o
			}(),
			want: "remove etcd-main-192.0.2.3 [3]: member is this node's earlier incarnation",
		},
		{
			name:    "a member holding a listed peer URL under another name is a conflict, never removed",
			desired: desired("192.0.2.1", "192.0.2.2"),
			obs: func() Observation {
				other := member("192.0.2.2", 2)
				other.Name = "infra1"
				return obs(1, member("192.0.2.1", 1), other)
			}(),
			waits: []string{"Conflict etcd-main-192.0.2.2"},
		},
		{
			name:    "a member with the listed name but another peer URL is a conflict",
			desired: desired("192.0.2.1", "192.0.2.2"),
			obs: func() Observation {
				moved := member("192.0.2.2", 2)
				moved.PeerURLs = []string{"http://192.0.2.2:2380"}
				return obs(1, member("192.0.2.1", 1), moved)
			}(),
			waits: []string{"Conflict etcd-main-192.0.2.2"},
		},
		{
			name:    "bootstrap: unstarted listed voters are waited for, not re-added",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3"),
			obs:     obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, unstarted)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MakePlan(tt.desired, tt.obs)
			got := ""
			if p.Next != nil {
				got = p.Next.String()
			}
			if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
				t.Errorf("next = %q, want prefix %q", got, tt.want)
			}
			if tt.waits == nil {
				tt.waits = []string{}
			}
			if len(p.Waiting) != len(tt.waits) {
				t.Fatalf("waiting = %v, want %v", p.Waiting, tt.waits)
			}
			for i, w := range p.Waiting {
				label := string(w.Reason)
				if w.Name != "" {
					label += " " + w.Name
				}
				if label != tt.waits[i] {
					t.Errorf("waiting[%d] = %q (%s), want %q", i, label, w.Detail, tt.waits[i])
				}
			}
		})
	}
}

func TestMatchNeverByPosition(t *testing.T) {
	d := desired("192.0.2.1", "192.0.2.2")
	m := Match(d, []Member{member("192.0.2.2", 2), member("192.0.2.9", 9)})
	if len(m.Matched) != 1 || m.Matched[0].Desired.Name != "etcd-main-192.0.2.2" || m.Matched[0].Member.ID != 2 {
		t.Errorf("matched = %+v", m.Matched)
	}
	if len(m.Missing) != 1 || m.Missing[0].Name != "etcd-main-192.0.2.1" {
		t.Errorf("missing = %+v", m.Missing)
	}
	if len(m.Extra) != 1 || m.Extra[0].ID != 9 {
		t.Errorf("extra = %+v", m.Extra)
	}
}

// Silent names the listed members that ran and do not answer now; a
// member added and not started yet is a join, and an unlisted one is not
// waited for.
func TestSilent(t *testing.T) {
	obs := Observation{ClusterID: 1, Members: []Member{
		member("192.0.2.1", 1),
		member("192.0.2.2", 2, down),
		member("2001:db8::3", 3, learner, down),
		member("192.0.2.4", 4, learner, unstarted),
		member("192.0.2.9", 9, down),
	}}
	var got []string
	for _, m := range Silent(desired("192.0.2.1", "192.0.2.2", "2001:db8::3", "192.0.2.4", "192.0.2.5"), obs) {
		got = append(got, m.IP.String())
	}
	if want := []string{"192.0.2.2", "2001:db8::3"}; !slices.Equal(got, want) {
		t.Errorf("Silent = %v, want %v", got, want)
	}
}
