package node

import (
	"fmt"
	"log/slog"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// record takes in what a look found before the pass acts: the local
// member's exits, the membership it now has, the list it applies, and the
// logs and metrics of all that.
func (n *Node) record(s Snapshot) {
	n.recordRefusals(s)
	if !s.ListOK || !s.Self.IP.IsValid() {
		n.publish(s)
		return
	}
	if s.Runtime.Exits != n.seenExits {
		n.seenExits = s.Runtime.Exits
		// A member that keeps stopping on its own is restarted with a
		// growing delay; removal is told apart by the member list.
		n.backOff()
	}
	if s.Runtime.MemberID != 0 {
		n.state.MemberID = membership.IDString(s.Runtime.MemberID)
	} else if n.state.MemberID == "" && s.Runtime.Running {
		if id := n.localMemberID(&s); id != 0 {
			n.state.MemberID = membership.IDString(id)
		}
	}
	n.noteMembership(s)
	if f := n.state.Founded; f != nil && !f.Started && s.Decision.Kind != localmember.Found && !s.Data.HasData() && !s.Runtime.Running {
		// A founding marked but never started (the agent died between the
		// mark and the start) and no longer decided: nothing of it ran, and
		// its mark would keep other nodes from founding.
		n.Log.Info("a founding that never started is dropped", "decidedAt", f.At, "decision", string(s.Decision.Kind))
		n.state.Founded = nil
	}
	n.rememberList(s)
	n.recordView(s)
	n.recordDecision(s)
	n.publish(s)
}

func (n *Node) recordView(s Snapshot) {
	m := n.Metrics
	v := s.View
	if v.Reached {
		n.logged["view"] = "reached"
		n.lastMembers = v.Members
		n.recordSilent(s)
	} else {
		n.logOnce("view", fmt.Sprint(v.Established), slog.LevelInfo, "cluster not reachable with quorum", "established", v.Established, "problems", v.Problems)
	}
	for _, f := range v.Foreign {
		addr := f.Endpoint
		if ip, ok := identity.IPFromURL(f.Endpoint); ok {
			addr = ip.String()
		}
		n.logOnce("foreign:"+f.Endpoint, membership.IDString(f.ClusterID), slog.LevelError,
			"a listed address answers for another cluster", "address", addr, "action", "none: nothing is done to or for it",
			"endpoint", f.Endpoint, "foreignClusterID", membership.IDString(f.ClusterID), "foreignMemberID", membership.IDString(f.MemberID),
			"clusterID", membership.IDString(v.ClusterID))
	}
	if s.Orphaning != "" {
		n.logOnce("orphaning", fmt.Sprint(s.List), slog.LevelError, "member list refused: it would orphan the cluster",
			"reason", s.Orphaning, "inForce", n.state.LastAppliedList)
	} else {
		n.logged["orphaning"] = ""
	}
	if m == nil {
		return
	}
	m.DesiredMembers.Set(float64(len(s.Desired)))
	m.ForeignAnswers.Set(float64(len(v.Foreign)))
	reachable := 0.0
	if v.Reached {
		reachable = 1
		voters, healthy := v.Voters()
		m.Members.WithLabelValues("voter").Set(float64(voters))
		m.Members.WithLabelValues("learner").Set(float64(len(v.Members) - voters))
		m.HealthyVoters.Set(float64(healthy))
	}
	m.ClusterReachable.Set(reachable)
}

// recordSilent says, once per set, which listed members do not answer:
// the agents wait for them, and what lets a host gone for good go.
func (n *Node) recordSilent(s Snapshot) {
	silent := identity.IPs(membership.Silent(s.Desired, s.View.Observation))
	if len(silent) == 0 {
		n.logged["silent"] = ""
		return
	}
	n.logOnce("silent", fmt.Sprint(silent), slog.LevelWarn, "listed members do not answer; the agents wait for them and never remove a listed member",
		"members", silent, "ifGoneForGood", SilentHint)
}

// SilentHint is what to do about a listed member whose host is gone for
// good.
const SilentHint = "take its IP off the member list (docs: Remove a node; with members.source cluster: etcdlet members remove <IP>): the agents then remove its member, never below quorum"

func (n *Node) recordDecision(s Snapshot) {
	d := s.Decision
	if d.Kind != localmember.Keep {
		level := slog.LevelInfo
		if d.Kind == localmember.Refuse {
			level = slog.LevelError
		}
		n.logOnce("local", string(d.Kind)+d.Reason, level, "local member", "decision", string(d.Kind), "reason", d.Reason)
	} else {
		n.logged["local"] = ""
	}
	if m := n.Metrics; m != nil {
		m.LocalDecision.Reset()
		m.LocalDecision.WithLabelValues(string(d.Kind)).Set(1)
		waiting := 0.0
		if d.Kind == localmember.Wait && len(s.Consent.Silent)+len(s.Consent.Refusing) > 0 {
			waiting = 1
		}
		m.BootstrapWaiting.Set(waiting)
	}
}

// recordRefusals counts each refusal to act for safety once, as it
// begins: the local decision's (localmember.Refusal), one per endpoint
// found answering for another cluster, and an orphaning list. That a
// refusal lasts is what etcdlet_local_member_decision and
// etcdlet_foreign_cluster_answers show.
func (n *Node) recordRefusals(s Snapshot) {
	now := map[string]localmember.Refusal{}
	if r := s.Decision.Refusal; r != "" {
		// Keyed by the rule alone: the reason's details (which node is
		// silent) change while the refusal lasts.
		now["local"] = r
	}
	for _, f := range s.View.Foreign {
		now["foreign "+f.Endpoint+" "+membership.IDString(f.ClusterID)] = localmember.RefuseForeignAnswer
	}
	if s.Orphaning != "" {
		now["orphaning "+fmt.Sprint(s.List)] = localmember.RefuseOrphaningList
	}
	if m := n.Metrics; m != nil {
		for key, r := range now {
			if n.refusing[key] != r {
				m.Refusals.WithLabelValues(string(r)).Inc()
			}
		}
	}
	n.refusing = now
}

func (n *Node) recordPlan(p membership.Plan) {
	if m := n.Metrics; m != nil {
		m.PlanWaiting.Reset()
		for _, w := range p.Waiting {
			m.PlanWaiting.WithLabelValues(string(w.Reason)).Inc()
		}
	}
	if len(p.Waiting) == 0 {
		n.logged["plan"] = ""
		return
	}
	waits := make([]string, len(p.Waiting))
	for i, w := range p.Waiting {
		waits[i] = w.String()
	}
	n.logOnce("plan", fmt.Sprint(p.Waiting), slog.LevelInfo, "membership changes waiting", "waiting", waits)
}
