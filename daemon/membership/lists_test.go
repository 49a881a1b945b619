package membership

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/identity"
)

// posted is agent node's post of a list, posted at revision since.
func posted(node string, since int64, list ...string) PostedList {
	return PostedList{Node: node, List: list, Since: since, ReadAt: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
}

// agreeing is the Agreement of an agent on node that posted desired at
// revision 100, with the others' posts, its list held for an hour.
func agreeing(node string, d []identity.Member, others ...PostedList) Agreement {
	return Agreement{Known: true, Own: ownList(d, Agreement{Own: PostedList{Node: node, Since: 100}}), Others: others,
		Stable: time.Hour, HoldDown: 2 * time.Second}
}

func withLists(o Observation, a Agreement) Observation {
	o.Lists = a
	return o
}

// Agents whose lists differ about an address make no change about it
// until they agree; a change about addresses they agree on goes on. A
// healthy voter goes only once the list held for the hold-down; a dead
// one needs none. Nothing follows a list that is not posted, or that is
// older than the one a member was removed under. A node that refuses to
// join holds no learner slot and blocks nobody.
func TestMakePlanWithTheAgentsLists(t *testing.T) {
	three := desired("192.0.2.1", "192.0.2.2", "192.0.2.3")
	two := desired("192.0.2.1", "192.0.2.2")
	voters3 := obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3))
	tests := []struct {
		name    string
		desired []identity.Member
		obs     Observation
		want    string // Next.String() prefix, "" for none
		waits   []string
	}{
		{
			name:    "a removal waits while another agent still lists the member",
			desired: two,
			obs:     withLists(voters3, agreeing("192.0.2.1", two, posted("192.0.2.2", 90, "192.0.2.1", "192.0.2.2", "192.0.2.3"))),
			waits:   []string{"ListsDisagree etcd-main-192.0.2.3"},
		},
		{
			name:    "the removal goes once every posted list agrees",
			desired: two,
			obs:     withLists(voters3, agreeing("192.0.2.1", two, posted("192.0.2.2", 110, "192.0.2.1", "192.0.2.2"), posted("192.0.2.3", 111, "192.0.2.1", "192.0.2.2"))),
			want:    "remove etcd-main-192.0.2.3 [3]",
		},
		{
			name:    "an add waits while another agent's list does not name the address",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"),
			obs: withLists(voters3, agreeing("192.0.2.1", desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"),
				posted("192.0.2.3", 90, "192.0.2.1", "192.0.2.2", "192.0.2.3"))),
			waits: []string{"ListsDisagree etcd-main-192.0.2.4"},
		},
		{
			name:    "the agent holding the shorter list does not remove the learner the other added",
			desired: three,
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3), member("192.0.2.4", 4, learner)),
				agreeing("192.0.2.3", three, posted("192.0.2.1", 120, "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"))),
			waits: []string{"ListsDisagree etcd-main-192.0.2.4"},
		},
		{
			name:    "nor does it promote a learner its peers' list does not name",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"),
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3), member("192.0.2.4", 4, learner)),
				agreeing("192.0.2.1", desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"), posted("192.0.2.2", 90, "192.0.2.1", "192.0.2.2", "192.0.2.3"))),
			waits: []string{"ListsDisagree etcd-main-192.0.2.4"},
		},
		{
			name:    "a change the lists agree on goes on beside one they disagree on",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"),
			obs: withLists(voters3, agreeing("192.0.2.1", desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"),
				posted("192.0.2.2", 90, "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.5"))),
			want:  "add etcd-main-192.0.2.5",
			waits: []string{"ListsDisagree etcd-main-192.0.2.4"},
		},
		{
			name:    "a healthy voter waits for the list to hold",
			desired: two,
			obs: withLists(voters3, func() Agreement {
				a := agreeing("192.0.2.1", two)
				a.Stable = 500 * time.Millisecond
				return a
			}()),
			waits: []string{"ListSettling etcd-main-192.0.2.3"},
		},
		{
			name:    "a dead voter needs no hold-down",
			desired: two,
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, down)), func() Agreement {
				a := agreeing("192.0.2.1", two)
				a.Stable = 0
				return a
			}()),
			want: "remove etcd-main-192.0.2.3 [3]",
		},
		{
			name:    "a dead voter another agent lists waits for the lists",
			desired: two,
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, down)),
				agreeing("192.0.2.1", two, posted("192.0.2.2", 90, "192.0.2.1", "192.0.2.2", "192.0.2.3"))),
			waits: []string{"ListsDisagree etcd-main-192.0.2.3"},
		},
		{
			name:    "a stale incarnation goes whatever the lists say",
			desired: three,
			obs: func() Observation {
				o := withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, down)),
					agreeing("192.0.2.1", three, posted("192.0.2.2", 90, "192.0.2.1", "192.0.2.2")))
				o.Stale = []uint64{3}
				return o
			}(),
			want: "remove etcd-main-192.0.2.3 [3]",
		},
		{
			name:    "nothing follows a list that is not posted",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"),
			obs: withLists(voters3, func() Agreement {
				a := agreeing("192.0.2.1", desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"))
				a.Own.Since = 0
				return a
			}()),
			waits: []string{"ListsDisagree"},
		},
		{
			name:    "a member removed under a newer list is not added back",
			desired: three,
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2)), func() Agreement {
				a := agreeing("192.0.2.1", three)
				a.Removals = []Removal{{Address: "192.0.2.3", MemberID: "3", By: "192.0.2.2", Digest: "abc", Since: 150}}
				return a
			}()),
			waits: []string{"RemovedUnderNewerList etcd-main-192.0.2.3"},
		},
		{
			name:    "under a list posted after the removal it is",
			desired: three,
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2)), func() Agreement {
				a := agreeing("192.0.2.1", three)
				a.Removals = []Removal{{Address: "192.0.2.3", MemberID: "3", By: "192.0.2.2", Digest: "abc", Since: 50}}
				return a
			}()),
			want: "add etcd-main-192.0.2.3",
		},
		{
			name:    "a node that refuses to join loses its unstarted learner",
			desired: three,
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3, learner, unstarted)),
				agreeing("192.0.2.1", three, refusing(posted("192.0.2.3", 90, "192.0.2.1", "192.0.2.2", "192.0.2.3")))),
			want: "remove etcd-main-192.0.2.3 [3]: its node refuses to join",
		},
		{
			name:    "and is not added, while the rest of the plan goes on",
			desired: desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.5"),
			obs: withLists(obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.4", 4)),
				agreeing("192.0.2.1", desired("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.5"),
					refusing(posted("192.0.2.3", 90, "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.5")))),
			want:  "add etcd-main-192.0.2.5",
			waits: []string{"NodeRefuses etcd-main-192.0.2.3", "JoinPending etcd-main-192.0.2.4"},
		},
		{
			name:    "an agent whose cluster.name is not the cluster's makes no change",
			desired: identity.Scheme{Cluster: "foo", PeerScheme: "https", ClientScheme: "https", PeerPort: 2380, ClientPort: 2379}.ForAll(addrs("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4")),
			obs:     voters3,
			waits:   []string{"Conflict"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MakePlan(tt.desired, tt.obs)
			got := ""
			if p.Next != nil {
				got = p.Next.String()
			}
			if (tt.want == "") != (got == "") || !strings.HasPrefix(got, tt.want) {
				t.Errorf("next = %q, want %q", got, tt.want)
			}
			var waits []string
			for _, w := range p.Waiting {
				waits = append(waits, strings.TrimSpace(string(w.Reason)+" "+w.Name))
			}
			if strings.Join(waits, "|") != strings.Join(tt.waits, "|") {
				t.Errorf("waits = %q, want %q\n%v", waits, tt.waits, p.Waiting)
			}
		})
	}
}

func refusing(p PostedList) PostedList {
	p.Refusing = "moved aside 3 times within 1h"
	return p
}

func addrs(ips ...string) []netip.Addr {
	out := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		out[i] = netip.MustParseAddr(ip)
	}
	return out
}

// A stale report about a member that answers in raft as itself is never
// acted on: another node claims its address, and the member is alive.
func TestALiveMemberIsNeverStale(t *testing.T) {
	o := obs(1, member("192.0.2.1", 1), member("192.0.2.2", 2), member("192.0.2.3", 3))
	o.Stale = []uint64{3}
	if p := MakePlan(desired("192.0.2.1", "192.0.2.2", "192.0.2.3"), o); p.Next != nil {
		t.Errorf("a stale report about a live voter made the plan %s", p.Next)
	}
	o.Members[2].Health = Health{Problem: "connection refused"}
	if p := MakePlan(desired("192.0.2.1", "192.0.2.2", "192.0.2.3"), o); p.Next == nil || p.Next.Kind != ActionRemove || p.Next.MemberID != 3 {
		t.Errorf("a stale report about a silent voter: plan %v, want its removal", p.Next)
	}
}
