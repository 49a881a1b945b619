package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/localmember"
)

// checkAfterPass checks the invariants that an agent's pass must keep.
func (s *scheduler) checkAfterPass(h *host, before map[*cluster]bool, crashedMidPass bool) {
	w := s.w
	for _, c := range w.clusters {
		if c.foreign {
			continue
		}
		if before[c] && !w.quorateAnywhere(c) && !crashedMidPass {
			w.fail("%s's pass cost cluster %d its quorum (voters %s)", h.name(), c.inst, s.membersOf(c))
		}
		learners := 0
		for _, m := range c.members {
			if m.learner {
				learners++
			}
		}
		if learners > 1 {
			w.fail("cluster %d has %d learners", c.inst, learners)
		}
	}
	switch {
	case s.existing && w.adds > 0:
		w.fail("an agent bootstrapped a new cluster beside the running one")
	case w.adds > 1:
		w.fail("the agents bootstrapped %d clusters", w.adds)
	case s.mode == config.BootstrapNever && w.adds > 0:
		w.fail("an agent bootstrapped a cluster, though no node may (cluster.bootstrap never)")
	}
	if s.mode != config.BootstrapExplicit {
		return
	}
	for _, c := range w.clusters {
		if c.bootstrapped && !slices.Contains(s.actors, c.by) {
			w.fail("%s formed cluster %d without an operator's act there", c.by.name(), c.inst)
		}
		if c.bootstrapped && c.formedWith != 1 {
			w.fail("cluster %d was founded with %d members; a founder forms it alone", c.inst, c.formedWith)
		}
	}
}

// actIfNoCluster is the operator's act of explicit mode once the faults
// stopped, when none formed a cluster yet: first every listed host must
// wait for that act and say so, then the operator approves on one of them
// (unless cluster.founder names a listed host: its configuration is the
// act).
func (s *scheduler) actIfNoCluster() {
	w := s.w
	if s.mode != config.BootstrapExplicit || s.existing || w.adds > 0 {
		return
	}
	for _, i := range w.rng.Perm(len(w.hosts)) {
		s.pass(w.hosts[i])
	}
	if w.adds > 0 || len(w.failures) > 0 {
		return // the founder's act took effect on that pass
	}
	founderListed := s.founder != nil && slices.Contains(s.current(), s.founder.ip)
	for _, h := range w.hosts {
		if !slices.Contains(s.current(), h.ip) || (founderListed && h == s.founder) || h.store.operator.BootstrapApproval != nil {
			continue
		}
		if d := h.agent.Last().Decision; d.Kind != localmember.Wait || d.Refusal != localmember.RefuseNotApproved ||
			!strings.Contains(d.Reason, "etcdlet bootstrap --approve") {
			w.fail("%s waits for no operator's act, or does not say so: decision %s (%s), refusal %q", h.name(), d.Kind, d.Reason, d.Refusal)
		}
	}
	if !founderListed {
		s.approve()
	}
}

// neverForms plays rounds with every fault stopped, every agent up and
// every host reading the list, in a schedule whose nodes never bootstrap
// (cluster.bootstrap never, as with members.source etcd-resource): no
// cluster may form, and every listed host must say that it waits for one.
func (s *scheduler) neverForms() {
	w := s.w
	s.stopFaults()
	for round := 0; round < 20 && len(w.failures) == 0; round++ {
		w.now = w.now.Add(time.Second)
		w.settle()
		for _, i := range w.rng.Perm(len(w.hosts)) {
			s.pass(w.hosts[i])
		}
	}
	for _, h := range w.hosts {
		if !slices.Contains(s.current(), h.ip) {
			continue
		}
		if d := h.agent.Last().Decision; d.Refusal != localmember.RefuseNeverBootstrap {
			w.fail("%s, never to bootstrap, decides %s (%s), refusal %q", h.name(), d.Kind, d.Reason, d.Refusal)
		}
	}
	w.note("no cluster formed in 20 rounds without faults, as none may")
}

// converge stops the faults (every host reachable and running its agent,
// every host reading the final list, no foreign cluster, no alarm, moves
// aside acknowledged) and passes the agents round after round until the
// membership is the list, or fails at the bound.
func (s *scheduler) converge() {
	w := s.w
	s.stopFaults()
	s.actIfNoCluster()
	for round := 1; round <= s.opts.Rounds; round++ {
		w.now = w.now.Add(time.Second)
		for _, h := range w.hosts {
			h.store.operator.MovesAcknowledged = w.now // the operator acknowledges
		}
		w.settle()
		for _, i := range w.rng.Perm(len(w.hosts)) {
			s.pass(w.hosts[i])
		}
		for _, h := range w.hosts {
			if h.wake {
				s.pass(h)
			}
		}
		if len(w.failures) > 0 {
			return
		}
		if why := s.unconverged(); why == "" {
			w.note("converged after %d rounds", round)
			return
		}
	}
	w.fail("no convergence within %d rounds after the faults stopped: %s; %s", s.opts.Rounds, s.unconverged(), s.describe())
}

// stopFaults ends the faults: every host reachable and running its agent,
// every host reading the final list, no foreign cluster, no alarm.
func (s *scheduler) stopFaults() {
	w := s.w
	w.armed = faults{}
	w.note("the faults stop; the list is %v", s.current())
	for _, h := range w.hosts {
		h.isolated = false
		h.list = slices.Clone(s.current())
		if h.proc != nil && h.proc.c.foreign {
			h.proc = nil
		}
	}
	for _, c := range w.clusters {
		c.alarms = nil
	}
	for _, h := range w.hosts {
		if h.agent == nil {
			s.startAgent(h)
		}
	}
}

// unconverged says why the cluster is not the list yet ("" when it is):
// every listed host runs a started voter of one cluster, that cluster has
// no other member, and no unlisted host runs etcd.
func (s *scheduler) unconverged() string {
	w := s.w
	list := s.current()
	var c *cluster
	for _, h := range w.hosts {
		listed := slices.Contains(list, h.ip)
		switch {
		case !listed && h.proc != nil:
			return fmt.Sprintf("unlisted %s runs etcd", h.name())
		case !listed:
		case h.proc == nil:
			return fmt.Sprintf("listed %s runs no etcd", h.name())
		case c == nil:
			c = h.proc.c
		case h.proc.c != c:
			return fmt.Sprintf("listed hosts run clusters %d and %d", c.inst, h.proc.c.inst)
		}
	}
	if c == nil {
		return "no cluster"
	}
	if len(c.members) != len(list) {
		return fmt.Sprintf("cluster %d has members %s for a list of %d", c.inst, s.membersOf(c), len(list))
	}
	for _, m := range c.members {
		if m.learner || !m.started || !slices.Contains(list, hostOfURL(m.peerURL)) {
			return fmt.Sprintf("cluster %d has members %s", c.inst, s.membersOf(c))
		}
	}
	return ""
}

func (s *scheduler) membersOf(c *cluster) string {
	var parts []string
	for _, m := range c.members {
		p := fmt.Sprintf("%x@%s", m.id, hostOfURL(m.peerURL))
		if m.learner {
			p += "(learner)"
		}
		if !m.started {
			p += "(unstarted)"
		}
		if s.w.runningIn(c, m.id) == nil {
			p += "(down)"
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// describe is every host's state, for a failure's report.
func (s *scheduler) describe() string {
	var parts []string
	for _, h := range s.w.hosts {
		p := h.name() + ":"
		if h.proc != nil {
			p += fmt.Sprintf(" etcd member %x of cluster %d", h.proc.memberID, h.proc.c.inst)
		} else {
			p += " no etcd"
		}
		if h.data.wal != nil {
			p += fmt.Sprintf(", data of %x/cluster %d", h.data.wal.memberID, h.data.wal.c.inst)
		}
		if h.agent != nil {
			snap := h.agent.Last()
			p += fmt.Sprintf(", decision %s (%s)", snap.Decision.Kind, snap.Decision.Reason)
			for _, wt := range snap.Plan.Waiting {
				p += "; waits: " + wt.String()
			}
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " | ")
}
