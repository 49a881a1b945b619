package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

// The unit's STATUS line says what etcdlet status says of the same look:
// a cluster without quorum, or one that is not founded yet, never reads as
// "membership matches the list" (which it did while the plan was empty).
func TestStatusLineTellsTheClusterStateFirst(t *testing.T) {
	scheme := identity.Scheme{Cluster: "etcd-main", PeerScheme: "http", ClientScheme: "http", PeerPort: 2380, ClientPort: 2379}
	ips := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("192.0.2.3")}
	desired := scheme.ForAll(ips)
	voter := func(d identity.Member, id uint64) membership.Member {
		return membership.Member{ID: id, Name: d.Name, PeerURLs: []string{d.PeerURL}, ClientURLs: []string{d.ClientURL},
			Health: membership.Health{Reachable: true, Leader: 1}}
	}
	all := []membership.Member{voter(desired[0], 1), voter(desired[1], 2), voter(desired[2], 3)}
	look := func(v membership.View, d localmember.Decision) node.Snapshot {
		return node.Snapshot{ListOK: true, List: ips, Desired: desired, Self: desired[0], View: v, Decision: d}
	}
	keep := localmember.Decision{Kind: localmember.Keep, Reason: "running and a member"}
	tests := []struct {
		name string
		snap node.Snapshot
		want string
	}{
		{"converged", look(membership.View{Reached: true, Observation: membership.Observation{ClusterID: 0xc1, LeaderID: 1, Members: all}}, keep),
			"local member: keep; membership matches the list"},
		{"quorum lost", look(membership.View{Observation: membership.Observation{ClusterID: 0xc1, Members: all}}, keep),
			"local member: keep; no quorum: members answer, but not a majority of the voters agree"},
		{"a bootstrap that waits", look(membership.View{}, localmember.Decision{Kind: localmember.Wait, Reason: "new cluster: waiting for etcdlet bootstrap --approve"}),
			"local member: wait (new cluster: waiting for etcdlet bootstrap --approve); cluster unreachable: no member answered"},
		{"a member to add", look(membership.View{Reached: true, Observation: membership.Observation{ClusterID: 0xc1, LeaderID: 1, Members: all[:2]}}, keep),
			"local member: keep; next: add etcd-main-192.0.2.3 (http://192.0.2.3:2380) as learner"},
		{"no list", node.Snapshot{}, "ready, nothing to run: no member list yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.snap.Plan = membership.MakePlan(tt.snap.Desired, tt.snap.View.Observation)
			if got := statusLine("etcd-main", tt.snap); !strings.HasPrefix(got, tt.want) {
				t.Errorf("statusLine = %q, want it to start %q", got, tt.want)
			}
		})
	}
}
