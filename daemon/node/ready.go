package node

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// ReadyCode names why a node is ready or not, for tests and logs; the
// body of /readyz is Readiness.Reason.
type ReadyCode string

// Readiness codes.
const (
	ReadyMember ReadyCode = "member" // listed, and the local member is a healthy voter
	ReadyIdle   ReadyCode = "idle"   // not listed, and runs no member

	NotReadyNoPass        ReadyCode = "no-pass"         // no reconcile pass finished yet
	NotReadyStale         ReadyCode = "stale"           // the last pass is too old: the loop is stuck
	NotReadyConfig        ReadyCode = "config-refused"  // a configuration reload was refused
	NotReadyNoList        ReadyCode = "no-list"         // no member list in force
	NotReadyListRejected  ReadyCode = "list-rejected"   // the latest list was rejected; the last good one is in force
	NotReadyNoAddress     ReadyCode = "no-address"      // this node's address is not known
	NotReadyLeaving       ReadyCode = "leaving"         // not listed, but still a member, running or holding data
	NotReadyUnreachable   ReadyCode = "no-quorum"       // listed, and the cluster does not answer with quorum
	NotReadyNotMember     ReadyCode = "not-member"      // listed, and not a member (yet)
	NotReadyLearner       ReadyCode = "learner"         // listed, and still a learner
	NotReadyUnhealthy     ReadyCode = "unhealthy"       // listed, and the member does not answer as itself, or has no leader
	NotReadyAlarm         ReadyCode = "alarm"           // listed, and the member raised an alarm (NOSPACE, CORRUPT)
	NotReadyLocalRefusing ReadyCode = "refused"         // a safety rule holds the local member back
	NotReadyRemoved       ReadyCode = "removed-running" // listed member removed from the cluster, still running
)

// ReadyInputs is what readiness is judged from: the agent's own state and
// the snapshot of its last pass. Judging makes no etcd call.
type ReadyInputs struct {
	// Passed says a pass finished, Age how long ago; a pass older than
	// Stale means the loop is stuck.
	Passed     bool
	Age, Stale time.Duration
	// ConfigErr is why the latest configuration reload was refused; nil
	// when none was, or a later one was applied.
	ConfigErr error
	// Last is the last pass's snapshot (Node.Last).
	Last Snapshot
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready bool
	Code  ReadyCode
	// Reason is the body: "ready: ..." or "not ready: ...".
	Reason string
}

func ready(code ReadyCode, format string, args ...any) Readiness {
	return Readiness{Ready: true, Code: code, Reason: "ready: " + fmt.Sprintf(format, args...)}
}

func notReady(code ReadyCode, format string, args ...any) Readiness {
	return Readiness{Code: code, Reason: "not ready: " + fmt.Sprintf(format, args...)}
}

// Ready judges whether this node does what its configuration and member
// list ask: listed, its member is a healthy voter of the cluster; not
// listed, it runs no member and the cluster has none of it. Everything it
// reads is what the last pass observed.
func Ready(in ReadyInputs) Readiness {
	s := in.Last
	switch {
	case !in.Passed:
		return notReady(NotReadyNoPass, "no reconcile pass finished yet")
	case in.Age > in.Stale:
		return notReady(NotReadyStale, "the last reconcile pass finished %s ago (more than %s): the loop is stuck, see /healthz", in.Age.Round(time.Second), in.Stale)
	case in.ConfigErr != nil:
		return notReady(NotReadyConfig, "%v", in.ConfigErr)
	case !s.ListOK && s.ListErr != nil:
		return notReady(NotReadyNoList, "no valid member list: %v", s.ListErr)
	case !s.ListOK:
		return notReady(NotReadyNoList, "no member list read yet")
	case !s.Self.IP.IsValid():
		return notReady(NotReadyNoAddress, "this node's address is not known: %v", s.SelfErr)
	case s.ListErr != nil:
		return notReady(NotReadyListRejected, "the latest member list was rejected (the last good one stays in force): %v", s.ListErr)
	case s.Orphaning != "":
		return notReady(NotReadyListRejected, "member list refused (the last applied one stays in force): %s", s.Orphaning)
	}
	name := s.Self.Name
	m, isMember := localMember(s)
	if !contains(s.Desired, s.Self) {
		switch {
		case isMember:
			return notReady(NotReadyLeaving, "this node is not listed, but its member %s is still in the cluster; it leaves once the writer removes it", name)
		case s.Runtime.Running:
			return notReady(NotReadyLeaving, "this node is not listed, but its member %s still runs (%s)", name, decision(s.Decision))
		case s.Decision.Kind != localmember.Idle:
			return notReady(NotReadyLeaving, "this node is not listed, and its data dir is not dealt with yet (%s)", decision(s.Decision))
		}
		return ready(ReadyIdle, "this node is not listed; idle")
	}
	switch {
	case !s.View.Reached:
		return notReady(NotReadyUnreachable, "the cluster does not answer with quorum (%s); %s", problems(s.View.Problems), decision(s.Decision))
	case s.Decision.Kind == localmember.StopRetired:
		return notReady(NotReadyRemoved, "local member %s is being stopped (%s)", name, decision(s.Decision))
	case s.Decision.Kind == localmember.StopRemoved:
		return notReady(NotReadyRemoved, "local member %s was removed from the cluster and is being stopped (%s)", name, decision(s.Decision))
	case !isMember && s.Decision.Refusal != "":
		return notReady(NotReadyLocalRefusing, "local member %s is not a member, and %s", name, decision(s.Decision))
	case !isMember:
		return notReady(NotReadyNotMember, "local member %s is not a member yet (%s)", name, decision(s.Decision))
	case m.Name != "" && m.Name != name:
		return notReady(NotReadyLocalRefusing, "member %q of the cluster holds this node's peer URL %s (%s)", m.Name, s.Self.PeerURL, decision(s.Decision))
	case m.IsLearner && m.Health.Problem != "":
		return notReady(NotReadyLearner, "local member %s is a learner, not promoted yet: %s", name, m.Health.Problem)
	case m.IsLearner:
		return notReady(NotReadyLearner, "local member %s is a learner, not promoted yet", name)
	case !m.InRaft():
		return notReady(NotReadyUnhealthy, "local member %s is unhealthy: %s", name, health(m))
	case !m.Healthy():
		return notReady(NotReadyAlarm, "local member %s raised alarm %s", name, strings.Join(m.Health.Alarms, ", "))
	}
	role := "voter"
	if s.View.LeaderID == m.ID {
		role = "voter, the leader"
	}
	return ready(ReadyMember, "local member %s healthy %s, in the list", name, role)
}

// localMember is the cluster's member with this node's peer URL, as the
// last pass saw it.
func localMember(s Snapshot) (membership.Member, bool) {
	for _, m := range s.View.Members {
		if slices.Contains(m.PeerURLs, s.Self.PeerURL) {
			return m, true
		}
	}
	return membership.Member{}, false
}

func decision(d localmember.Decision) string {
	if d.Kind == "" {
		return "no local decision yet"
	}
	if d.Reason == "" {
		return "local decision: " + string(d.Kind)
	}
	return "local decision: " + string(d.Kind) + ": " + d.Reason
}

func health(m membership.Member) string {
	if m.Health.Problem != "" {
		return m.Health.Problem
	}
	return "its Status does not answer"
}

func problems(p []string) string {
	if len(p) == 0 {
		return "no endpoint answered"
	}
	return strings.Join(p, "; ")
}
