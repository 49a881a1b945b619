package node

import (
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

func TestSettled(t *testing.T) {
	self, other, third := testIdentity("192.0.2.1"), testIdentity("2001:db8::2"), testIdentity("198.51.100.3")
	// calm is a node whose two-member cluster matches its list.
	calm := func(change func(s *Snapshot)) Snapshot { return twoMemberPass(self, other, change) }
	tests := []struct {
		name   string
		change func(s *Snapshot)
		want   bool
	}{
		{"members are the list, healthy voters", nil, true},
		{"no list in force", func(s *Snapshot) { s.ListOK = false }, false},
		{"a list refused as orphaning", func(s *Snapshot) { s.Orphaning = "shares no address with the voters" }, false},
		{"no quorum", func(s *Snapshot) { s.View.Reached = false }, false},
		{"the local member is to be started", func(s *Snapshot) { s.Decision.Kind = localmember.Restart }, false},
		{"the local member waits", func(s *Snapshot) { s.Decision.Kind = localmember.Wait }, false},
		{"a listed node is no member yet", func(s *Snapshot) {
			s.List, s.Desired = append(s.List, third.IP), append(s.Desired, third)
		}, false},
		{"a member that is not listed", func(s *Snapshot) { s.View.Members = append(s.View.Members, healthyMember(third, 3)) }, false},
		{"a learner", func(s *Snapshot) { s.View.Members[1].IsLearner = true }, false},
		{"a member that does not answer", func(s *Snapshot) {
			s.View.Members[1].Health = membership.Health{Problem: "unreachable"}
		}, false},
		{"a member with an alarm", func(s *Snapshot) { s.View.Members[0].Health.Alarms = []string{"NOSPACE"} }, false},
		{"an alarm in the cluster", func(s *Snapshot) {
			s.View.Alarms = []etcdclient.Alarm{{MemberID: 9, Type: "NOSPACE"}}
		}, false},
		{"another cluster answers at a listed address", func(s *Snapshot) {
			s.View.Foreign = []membership.Foreign{{Endpoint: "https://[2001:db8::2]:2379", ClusterID: 0xbad}}
		}, false},
		{"a planned change", func(s *Snapshot) {
			s.Plan.Waiting = []membership.Wait{{Kind: membership.ActionAddLearner, Name: third.Name, Reason: membership.WaitListsDisagree}}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := settled(calm(tt.change)); got != tt.want {
				t.Errorf("settled = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("the loop slows only after calm passes in a row, says so once, and not for long", func(t *testing.T) {
		heard := 0
		n := &Node{Deps: Deps{Settings: Settings{ReconcileInterval: 5 * time.Second, IdleInterval: 30 * time.Second},
			OnSettled: func() { heard++ }}}
		learner := calm(func(s *Snapshot) { s.View.Members[1].IsLearner = true })
		steps := []struct {
			snap    Snapshot
			next    time.Duration
			ok      bool
			want    time.Duration
			settles bool // OnSettled is heard on this pass
		}{
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 5 * time.Second, true, 30 * time.Second, true},
			{calm(nil), 5 * time.Second, true, 30 * time.Second, false}, // once per settling
			{learner, 5 * time.Second, true, 5 * time.Second, false},    // anything else: back at once
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 100 * time.Millisecond, true, 100 * time.Millisecond, false}, // a follow-up asked for
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 5 * time.Second, false, 5 * time.Second, false}, // a failed call or save
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 5 * time.Second, true, 5 * time.Second, false},
			{calm(nil), 5 * time.Second, true, 30 * time.Second, true},
		}
		for i, s := range steps {
			before := heard
			if got := n.pace(s.snap, s.next, s.ok); got != s.want {
				t.Fatalf("pass %d: next pass in %s, want %s", i+1, got, s.want)
			}
			if settled := heard > before; settled != s.settles {
				t.Fatalf("pass %d: OnSettled heard %v, want %v", i+1, settled, s.settles)
			}
		}
	})
	t.Run("an idle interval of the reconcile interval keeps the pace", func(t *testing.T) {
		n := &Node{Deps: Deps{Settings: Settings{ReconcileInterval: 5 * time.Second}}}
		for i := range 2 * settleAfter {
			if got := n.pace(calm(nil), 5*time.Second, true); got != 5*time.Second {
				t.Fatalf("pass %d: next pass in %s with no idle interval", i+1, got)
			}
		}
	})
}
