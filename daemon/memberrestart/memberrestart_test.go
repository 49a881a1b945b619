package memberrestart

import (
	"fmt"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

func TestRestartAllowed(t *testing.T) {
	const cluster = 0xc1
	self := identity.Member{Name: "etcd-main-10.0.0.1", PeerURL: "https://10.0.0.1:2380", ClientURL: "https://10.0.0.1:2379"}
	member := func(n int, mods ...func(*membership.Member)) membership.Member {
		m := membership.Member{ID: uint64(n), Name: fmt.Sprintf("etcd-main-10.0.0.%d", n),
			PeerURLs: []string{fmt.Sprintf("https://10.0.0.%d:2380", n)}, ClientURLs: []string{fmt.Sprintf("https://10.0.0.%d:2379", n)},
			Health: membership.Health{Reachable: true, Leader: 1}}
		for _, f := range mods {
			f(&m)
		}
		return m
	}
	down := func(m *membership.Member) {
		m.Health = membership.Health{Problem: "unreachable: context deadline exceeded"}
	}
	learner := func(m *membership.Member) { m.IsLearner = true }
	nospace := func(m *membership.Member) { m.Health.Alarms = []string{"NOSPACE"} }
	snap := func(members ...membership.Member) node.Snapshot {
		s := node.Snapshot{Self: self, Pinned: cluster, Decision: localmember.Decision{Kind: localmember.Keep}}
		s.View.Reached, s.View.ClusterID, s.View.Members = true, cluster, members
		return s
	}
	with := func(s node.Snapshot, f func(*node.Snapshot)) node.Snapshot { f(&s); return s }

	for _, tt := range []struct {
		name string
		snap node.Snapshot
		want string // a substring of the refusal; empty: allowed
	}{
		{"three healthy voters", snap(member(1), member(2), member(3)), ""},
		{"five healthy voters", snap(member(1), member(2), member(3), member(4), member(5)), ""},
		{"another voter down", snap(member(1), member(2), member(3, down)), "etcd-main-10.0.0.3 is not healthy (unreachable"},
		{"this member down is no reason to refuse", snap(member(1, down), member(2), member(3)), ""},
		{"another voter with an alarm", snap(member(1), member(2, nospace), member(3)), "etcd-main-10.0.0.2 is not healthy (NOSPACE)"},
		{"a learner joining", snap(member(1), member(2), member(3), member(4, learner)), "etcd-main-10.0.0.4 is a learner"},
		{"two voters", snap(member(1), member(2)), "a cluster of 2 voters has no quorum without this member"},
		{"one voter", snap(member(1)), "a cluster of 1 voters has no quorum"},
		{"this member a learner", snap(member(1, learner), member(2), member(3)), "the local member 1 is a learner"},
		{"not a member", snap(member(2), member(3), member(4)), "no member with this node's peer URL"},
		{"no quorum", with(snap(member(1), member(2), member(3)), func(s *node.Snapshot) { s.View.Reached = false }), "no quorum"},
		{"another cluster answers", with(snap(member(1), member(2), member(3)), func(s *node.Snapshot) { s.View.ClusterID = 0xbad }), "answer for cluster bad"},
		{"the member is not running", with(snap(member(1), member(2), member(3)), func(s *node.Snapshot) {
			s.Decision = localmember.Decision{Kind: localmember.Restart, Reason: "restart on the existing data dir"}
		}), "decision restart: restart on the existing data dir"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, err := Allowed(tt.snap)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "" && id != 1:
				t.Errorf("member ID %x, want 1", id)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
