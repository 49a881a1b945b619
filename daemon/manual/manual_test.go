package manual

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

var testScheme = identity.Scheme{Cluster: "etcd-main", PeerScheme: "https", ClientScheme: "https", PeerPort: 2380, ClientPort: 2379}

// m is a member on 192.0.2.<n> with ID n: healthy when problem is "",
// at applied index 5000.
func m(n int, learner bool, problem string) membership.Member {
	d := testScheme.For(netip.AddrFrom4([4]byte{192, 0, 2, byte(n)}))
	return membership.Member{ID: uint64(n), Name: d.Name, PeerURLs: []string{d.PeerURL}, ClientURLs: []string{d.ClientURL}, IsLearner: learner,
		Health: membership.Health{Reachable: problem == "", Problem: problem, Leader: 1, RaftAppliedIndex: 5000}}
}

func listOf(ns ...int) []identity.Member {
	var ips []netip.Addr
	for _, n := range ns {
		ips = append(ips, netip.AddrFrom4([4]byte{192, 0, 2, byte(n)}))
	}
	return testScheme.ForAll(ips)
}

func snap(list []identity.Member, members ...membership.Member) node.Snapshot {
	return node.Snapshot{Desired: list, ListOK: list != nil, View: membership.View{Reached: true,
		Observation: membership.Observation{ClusterID: 0xc1, LeaderID: 1, Members: members}}}
}

func TestResolveMember(t *testing.T) {
	members := []membership.Member{m(1, false, ""), m(2, false, ""), m(0xa, true, "")}
	for _, tc := range []struct {
		arg     string
		want    uint64
		wantErr string
	}{
		{"etcd-main-192.0.2.2", 2, ""},
		{"2", 2, ""},
		{"A", 0xa, ""}, // IDs are hex, either case
		{"192.0.2.10", 0xa, ""},
		{"::ffff:192.0.2.1", 1, ""}, // the same IP, written IPv4-mapped
		{"192.0.2.9", 0, "no member is named, has the ID or the IP"},
		{"etcd-main-192.0.2.9", 0, "members: etcd-main-192.0.2.1 [1]"},
	} {
		got, err := Resolve(members, tc.arg)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: %v, want an error with %q", tc.arg, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got.ID != tc.want):
			t.Errorf("%q: member %x, %v; want %x", tc.arg, got.ID, err, tc.want)
		}
	}
	// A name that also reads as another member's ID is ambiguous: the
	// command never guesses which one is meant.
	odd := m(3, false, "")
	odd.Name = "1"
	if _, err := Resolve(append(members, odd), "1"); err == nil || !strings.Contains(err.Error(), "names 2 members") {
		t.Errorf("an ambiguous target: %v", err)
	}
}

func TestCheckRemove(t *testing.T) {
	for _, tc := range []struct {
		name    string
		snap    node.Snapshot
		target  membership.Member
		force   bool
		wantErr string
	}{
		{"unlisted healthy voter of four", snap(listOf(1, 2, 3), m(1, false, ""), m(2, false, ""), m(3, false, ""), m(4, false, "")), m(4, false, ""), false, ""},
		{"unlisted dead voter of three", snap(listOf(1, 2), m(1, false, ""), m(2, false, ""), m(3, false, "down")), m(3, false, "down"), false, ""},
		{"listed member", snap(listOf(1, 2, 3), m(1, false, ""), m(2, false, ""), m(3, false, "")), m(3, false, ""), false, "is in the member list in force"},
		{"listed member with --force", snap(listOf(1, 2, 3, 4), m(1, false, ""), m(2, false, ""), m(3, false, ""), m(4, false, "")), m(4, false, ""), true, ""},
		{"--force never overrides quorum", snap(listOf(1, 2, 3), m(1, false, ""), m(2, false, "down"), m(3, false, "")), m(3, false, ""), true, "would leave 1 healthy of 2, below quorum 2"},
		{"healthy voter while another is down", snap(listOf(1, 2), m(1, false, ""), m(2, false, "down"), m(3, false, "")), m(3, false, ""), false, "2 of 3 voters are healthy"},
		{"last voter", snap(nil, m(1, false, "")), m(1, false, ""), true, "last voter"},
		{"learner: quorum unchanged", snap(listOf(1, 2), m(1, false, ""), m(2, false, "down"), m(3, true, "")), m(3, true, ""), false, ""},
		{"no list in force: nothing adds it back", snap(nil, m(1, false, ""), m(2, false, ""), m(3, false, "")), m(3, false, ""), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRemove(tc.snap, tc.target, tc.force)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("checkRemove = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckEvict(t *testing.T) {
	if err := checkEvict(m(4, true, "")); err != nil {
		t.Errorf("a learner: %v", err)
	}
	if err := checkEvict(m(4, false, "")); err == nil || !strings.Contains(err.Error(), "is a voter") {
		t.Errorf("a voter: %v", err)
	}
}

func TestCheckMoveLeader(t *testing.T) {
	behind := m(3, false, "")
	behind.Health.RaftAppliedIndex = 5000 - membership.MaxLeaderLag - 1
	leader := m(1, false, "")
	leader.Health.RaftAppliedIndex = 5000
	alarmed := m(4, false, "")
	alarmed.Health.Alarms = []string{"NOSPACE"}
	s := snap(listOf(1, 2, 3), leader, m(2, false, ""), behind, alarmed, m(5, true, ""), m(6, false, "no answer within 2s"))
	for _, tc := range []struct {
		target  membership.Member
		wantErr string
	}{
		{m(2, false, ""), ""},
		{leader, ""}, // leads already: nothing to do
		{behind, "applied entries behind the leader"},
		{m(5, true, ""), "a learner cannot lead"},
		{m(6, false, "no answer within 2s"), "not healthy: no answer within 2s"},
		{alarmed, "not healthy: alarm NOSPACE"},
	} {
		err := checkMoveLeader(s, tc.target)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want %q", tc.target, err, tc.wantErr)
		}
	}
	noLeader := s
	noLeader.View.LeaderID = 0
	if err := checkMoveLeader(noLeader, m(2, false, "")); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Errorf("without a leader: %v", err)
	}
	// The leader leaving hands over to the healthy voter furthest along.
	ahead := m(2, false, "")
	ahead.Health.RaftAppliedIndex = 5001
	s.View.Members[1] = ahead
	if to, ok := s.View.Transferee(1, nil, nil); !ok || to.ID != 2 {
		t.Errorf("transferee = %v, %v; want member 2", to, ok)
	}
	if _, ok := snap(nil, leader, behind, m(5, true, "")).View.Transferee(1, nil, nil); ok {
		t.Error("a transferee was found among a lagging voter and a learner")
	}
}
