package node

import (
	"net/netip"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// The snapshots the tests of a pass's outcome (readiness, pace) start
// from: a cluster etcd-main with TLS on etcd's default ports.
var testScheme = identity.Scheme{Cluster: "etcd-main", PeerScheme: "https", ClientScheme: "https", PeerPort: 2380, ClientPort: 2379}

func testIdentity(ip string) identity.Member { return testScheme.For(netip.MustParseAddr(ip)) }

// healthyMember is d as a started member that answers with member 2 as
// its leader.
func healthyMember(d identity.Member, id uint64) membership.Member {
	return membership.Member{ID: id, Name: d.Name, PeerURLs: []string{d.PeerURL}, ClientURLs: []string{d.ClientURL},
		Health: membership.Health{Reachable: true, Leader: 2}}
}

// reachedView is cluster 0xc1 answering with quorum, member 2 leading.
func reachedView(members ...membership.Member) membership.View {
	return membership.View{Reached: true, Established: true, Observation: membership.Observation{ClusterID: 0xc1, LeaderID: 2, Members: members}}
}

// twoMemberPass is a pass of self, listed with other: both healthy voters
// (self member 1, other member 2 and leading), self's member running and
// kept. change, when set, adjusts it to what a case is about.
func twoMemberPass(self, other identity.Member, change func(s *Snapshot)) Snapshot {
	s := Snapshot{List: []netip.Addr{self.IP, other.IP}, ListOK: true, Self: self, Desired: []identity.Member{self, other},
		Runtime:  runtime.Status{Running: true},
		View:     reachedView(healthyMember(self, 1), healthyMember(other, 2)),
		Decision: localmember.Decision{Kind: localmember.Keep}}
	if change != nil {
		change(&s)
	}
	return s
}
