package node

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

func TestReady(t *testing.T) {
	self, other := testIdentity("192.0.2.1"), testIdentity("192.0.2.2")
	// snap is a pass of a node listed with the other, whose member is a
	// healthy voter; each case changes what it is about.
	snap := func(change func(s *Snapshot)) Snapshot { return twoMemberPass(self, other, change) }
	notListed := func(s *Snapshot) {
		s.List, s.Desired = []netip.Addr{other.IP}, []identity.Member{other}
		s.Runtime = runtime.Status{}
		s.View = reachedView(healthyMember(other, 2))
		s.Decision = localmember.Decision{Kind: localmember.Idle, Reason: "this node's address is not in the member list"}
	}
	stale := 30 * time.Second

	tests := []struct {
		name string
		in   ReadyInputs
		code ReadyCode
		why  string // a substring of the body
	}{
		{name: "a healthy voter in the list is ready",
			in: ReadyInputs{Passed: true, Last: snap(nil)}, code: ReadyMember, why: "ready: local member etcd-main-192.0.2.1 healthy voter, in the list"},
		{name: "the leader says so",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) { s.View.LeaderID = 1 })}, code: ReadyMember, why: "healthy voter, the leader, in the list"},
		{name: "not listed, no member, nothing running: idle is ready",
			in: ReadyInputs{Passed: true, Last: snap(notListed)}, code: ReadyIdle, why: "ready: this node is not listed; idle"},
		{name: "not listed and nothing runs: idle even while the cluster is away",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) { notListed(s); s.View = membership.View{} })}, code: ReadyIdle},
		{name: "before the first pass",
			in: ReadyInputs{}, code: NotReadyNoPass, why: "no reconcile pass finished yet"},
		{name: "a pass too old: the loop is stuck",
			in: ReadyInputs{Passed: true, Age: time.Minute, Stale: stale, Last: snap(nil)}, code: NotReadyStale, why: "finished 1m0s ago (more than 30s)"},
		{name: "a pass in time is judged",
			in: ReadyInputs{Passed: true, Age: time.Second, Stale: stale, Last: snap(nil)}, code: ReadyMember},
		{name: "a refused configuration reload",
			in:   ReadyInputs{Passed: true, ConfigErr: errors.New("reload refused: etcd.clientPort changed"), Last: snap(nil)},
			code: NotReadyConfig, why: "not ready: reload refused: etcd.clientPort changed"},
		{name: "no list yet",
			in: ReadyInputs{Passed: true, Last: Snapshot{}}, code: NotReadyNoList, why: "no member list read yet"},
		{name: "no valid list",
			in: ReadyInputs{Passed: true, Last: Snapshot{ListErr: errors.New("line 2: 10.0.0.01 is not canonical")}}, code: NotReadyNoList, why: "no valid member list: line 2"},
		{name: "the node's address is not known",
			in:   ReadyInputs{Passed: true, Last: Snapshot{ListOK: true, SelfErr: errors.New("no listed address is local")}},
			code: NotReadyNoAddress, why: "no listed address is local"},
		{name: "a rejected list, the last good one in force",
			in:   ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) { s.ListErr = errors.New("duplicate 192.0.2.2") })},
			code: NotReadyListRejected, why: "the last good one stays in force): duplicate 192.0.2.2"},
		{name: "an orphaning list",
			in:   ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) { s.Orphaning = "the list [192.0.2.9] shares no address" })},
			code: NotReadyListRejected, why: "shares no address"},
		{name: "not listed but still a member: leaving",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				s.List, s.Desired = []netip.Addr{other.IP}, []identity.Member{other}
			})}, code: NotReadyLeaving, why: "still in the cluster"},
		{name: "not listed, removed, still running: leaving",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				notListed(s)
				s.Runtime.Running = true
				s.Decision = localmember.Decision{Kind: localmember.StopRemoved, Reason: "member 1 is no longer in the cluster (removed)"}
			})}, code: NotReadyLeaving, why: "still runs (local decision: stop-removed"},
		{name: "not listed, data not moved aside yet: leaving",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				notListed(s)
				s.Decision = localmember.Decision{Kind: localmember.MoveAside, Reason: "the local data is stale"}
			})}, code: NotReadyLeaving, why: "data dir is not dealt with yet"},
		{name: "listed, and the cluster has no quorum",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				s.View = membership.View{Problems: []string{"https://192.0.2.2:2379: connection refused"}}
			})}, code: NotReadyUnreachable, why: "does not answer with quorum (https://192.0.2.2:2379: connection refused); local decision: keep"},
		{name: "listed, a bootstrap waits for consent",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				s.Runtime, s.View = runtime.Status{}, membership.View{}
				s.Decision = localmember.Decision{Kind: localmember.Wait, Reason: "a bootstrap needs every listed node's consent", Refusal: localmember.RefuseNoConsent}
			})}, code: NotReadyUnreachable, why: "no endpoint answered); local decision: wait: a bootstrap needs"},
		{name: "listed, not added yet",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				s.Runtime, s.View = runtime.Status{}, reachedView(healthyMember(other, 2))
				s.Decision = localmember.Decision{Kind: localmember.Wait, Reason: "not a member yet; waiting to be added as a learner"}
			})}, code: NotReadyNotMember, why: "is not a member yet (local decision: wait: not a member yet"},
		{name: "listed, and a safety rule holds the member back",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				s.Runtime, s.View = runtime.Status{}, reachedView(healthyMember(other, 2))
				s.Decision = localmember.Decision{Kind: localmember.Refuse, Reason: "the data dir was moved aside 3 times", Refusal: localmember.RefuseMovesAside}
			})}, code: NotReadyLocalRefusing, why: "refuse: the data dir was moved aside 3 times"},
		{name: "listed, another name holds the peer URL",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				m := healthyMember(self, 1)
				m.Name = "infra1"
				s.Runtime, s.View = runtime.Status{}, reachedView(m, healthyMember(other, 2))
				s.Decision = localmember.Decision{Kind: localmember.Wait, Reason: "resolve by hand", Refusal: localmember.RefusePeerURLTaken}
			})}, code: NotReadyLocalRefusing, why: `member "infra1" of the cluster holds this node's peer URL`},
		{name: "listed, removed by someone, still running",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				s.View = reachedView(healthyMember(other, 2))
				s.Decision = localmember.Decision{Kind: localmember.StopRemoved, Reason: "member 1 is no longer in the cluster (removed)"}
			})}, code: NotReadyRemoved, why: "was removed from the cluster"},
		{name: "a learner not promoted yet",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				m := healthyMember(self, 1)
				m.IsLearner = true
				s.View = reachedView(m, healthyMember(other, 2))
			})}, code: NotReadyLearner, why: "is a learner, not promoted yet"},
		{name: "a learner that has not started",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				s.View = reachedView(membership.Member{ID: 1, PeerURLs: []string{self.PeerURL}, IsLearner: true, Health: membership.Health{Problem: "not started: connection refused"}}, healthyMember(other, 2))
				s.Decision = localmember.Decision{Kind: localmember.Join, Reason: "member 1 was added for this node; joining"}
			})}, code: NotReadyLearner, why: "not promoted yet: not started: connection refused"},
		{name: "the local member does not answer",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				m := healthyMember(self, 1)
				m.Health = membership.Health{Problem: "no answer within 2s"}
				s.View = reachedView(m, healthyMember(other, 2))
			})}, code: NotReadyUnhealthy, why: "not ready: local member etcd-main-192.0.2.1 is unhealthy: no answer within 2s"},
		{name: "the local endpoint answers as another cluster's member",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				m := healthyMember(self, 1)
				m.Health.Problem, m.Health.WrongIdentity = "answers for cluster bad, not c1", true
				s.View = reachedView(m, healthyMember(other, 2))
			})}, code: NotReadyUnhealthy, why: "answers for cluster bad"},
		{name: "an alarm",
			in: ReadyInputs{Passed: true, Last: snap(func(s *Snapshot) {
				m := healthyMember(self, 1)
				m.Health.Alarms = []string{"NOSPACE"}
				s.View = reachedView(m, healthyMember(other, 2))
			})}, code: NotReadyAlarm, why: "raised alarm NOSPACE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.in.Stale == 0 {
				tt.in.Stale = stale
			}
			got := Ready(tt.in)
			if got.Code != tt.code {
				t.Fatalf("code %s (%s), want %s", got.Code, got.Reason, tt.code)
			}
			if wantReady := tt.code == ReadyMember || tt.code == ReadyIdle; got.Ready != wantReady {
				t.Errorf("ready %v, want %v", got.Ready, wantReady)
			}
			prefix := map[bool]string{true: "ready: ", false: "not ready: "}[got.Ready]
			if !strings.HasPrefix(got.Reason, prefix) {
				t.Errorf("body %q does not start with %q", got.Reason, prefix)
			}
			if !strings.Contains(got.Reason, tt.why) {
				t.Errorf("body %q does not say %q", got.Reason, tt.why)
			}
		})
	}
}
