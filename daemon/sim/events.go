package sim

import (
	"net/netip"
	"slices"
	"time"

	"github.com/etcdlet/etcdlet/daemon/state"
)

// step plays one event: mostly an agent's pass, sometimes a change of
// the list or a fault. Simulated time moves on between events.
func (s *scheduler) step() {
	w := s.w
	w.now = w.now.Add(time.Duration(w.rng.IntN(1500)) * time.Millisecond)
	w.settle()
	if w.rng.IntN(100) < 3 {
		// The founder's, when an operator's act was made: it must never
		// found again; else any host's, as the fault campaign's wipe.
		s.event("disk lost")
		if len(s.actors) > 0 {
			s.loseDisk(s.actors[w.rng.IntN(len(s.actors))])
		} else {
			s.loseDisk(s.pickHost())
		}
		return
	}
	switch r := w.rng.IntN(100); {
	case r < 62:
		s.event("pass")
		s.pass(s.pickAgent())
	case r < 68:
		s.event("list change")
		s.changeList()
	case r < 70:
		s.event("list arrives")
		s.listArrives()
	case r < 72:
		s.event("list seen late")
		h := s.pickHost()
		if len(s.lists) > 1 && !h.listRead {
			h.list = slices.Clone(s.lists[len(s.lists)-2])
			w.note("%s: still reads the previous list %v", h.name(), h.list)
		}
	case r < 76:
		s.event("agent crash")
		s.crashAgent(s.pickHost(), "killed")
	case r < 82:
		s.event("agent restart")
		for _, h := range w.hosts {
			if h.agent == nil {
				s.startAgent(h)
				break
			}
		}
	case r < 84:
		s.event("etcd crash")
		if h := s.pickHost(); h.proc != nil {
			h.stop(true, "crashed")
		}
	case r < 87:
		s.event("partition")
		h := s.pickHost()
		h.isolated = !h.isolated
		w.note("%s: %s", h.name(), map[bool]string{true: "cut off from the others", false: "reachable again"}[h.isolated])
	case r < 94:
		s.event("fault armed")
		s.armFault()
	case r < 96:
		s.event("foreign cluster")
		s.foreignCluster()
	default:
		s.event("alarm")
		s.raiseAlarm()
	}
}

func (s *scheduler) event(kind string) { s.stats.Events[kind]++ }

// pickAgent prefers a host another agent woke.
func (s *scheduler) pickAgent() *host {
	w := s.w
	for _, h := range w.hosts {
		if h.wake && h.agent != nil && w.rng.IntN(3) > 0 {
			return h
		}
	}
	var alive []*host
	for _, h := range w.hosts {
		if h.agent != nil {
			alive = append(alive, h)
		}
	}
	if len(alive) == 0 {
		return w.hosts[0]
	}
	return alive[w.rng.IntN(len(alive))]
}

func (s *scheduler) pickHost() *host { return s.w.hosts[s.w.rng.IntN(len(s.w.hosts))] }

// changeList adds, removes or replaces one address. The new list always
// keeps an address of the previous list and of the schedule's cluster's
// current voters: a list that shares none would orphan the cluster
// (refused by the agents that know it), and a fresh node that only ever
// read one list cannot know of a cluster its list does not name, so it
// could bootstrap beside it. docs/membership.md documents this limit and
// how to migrate in steps.
func (s *scheduler) changeList() {
	w := s.w
	cur := s.current()
	var next []netip.Addr
	for attempt := 0; attempt < 10; attempt++ {
		next = slices.Clone(cur)
		var out []netip.Addr
		for _, h := range w.hosts {
			if !slices.Contains(next, h.ip) {
				out = append(out, h.ip)
			}
		}
		switch op := w.rng.IntN(3); {
		case op == 0 && len(out) > 0:
			next = append(next, out[w.rng.IntN(len(out))])
		case op == 1 && len(next) > 1:
			i := w.rng.IntN(len(next))
			next = slices.Delete(next, i, i+1)
		case len(out) > 0:
			next[w.rng.IntN(len(next))] = out[w.rng.IntN(len(out))]
		}
		if s.keepsAVoter(next) && sharesAny(next, cur) {
			break
		}
		next = cur
	}
	s.setList(next)
	w.note("list: %v", next)
}

// listArrives brings the newest list to one host that does not read it
// yet: a list change reaches hosts one after another.
func (s *scheduler) listArrives() {
	var lagging []*host
	for _, h := range s.w.hosts {
		if !slices.Equal(h.list, s.current()) {
			lagging = append(lagging, h)
		}
	}
	if len(lagging) == 0 {
		return
	}
	h := lagging[s.w.rng.IntN(len(lagging))]
	h.list = slices.Clone(s.current())
	s.w.note("%s: the list %v arrives", h.name(), h.list)
}

// keepsAVoter: the list names a voter of the schedule's cluster (any list
// does while there is none yet) whose data is still on its host: a voter
// whose disk was lost is removed as stale, and a list that names only it
// would orphan the cluster.
func (s *scheduler) keepsAVoter(list []netip.Addr) bool {
	c := s.mainCluster()
	if c == nil && len(s.actors) > 0 {
		// An operator's act is pending (explicit mode): the host it was
		// made on founds the cluster, perhaps from a list it still reads,
		// and is its first voter.
		return slices.ContainsFunc(s.actors, func(h *host) bool { return slices.Contains(list, h.ip) })
	}
	if c == nil || len(c.voters()) == 0 {
		return true
	}
	for _, m := range c.voters() {
		h := s.w.hostOf(hostOfURL(m.peerURL))
		if slices.Contains(list, hostOfURL(m.peerURL)) && h != nil && h.data.wal != nil && h.data.wal.c == c && h.data.wal.memberID == m.id {
			return true
		}
	}
	return false
}

// mainCluster is the cluster the schedule is about: the one it started
// with, or the one the agents bootstrapped.
func (s *scheduler) mainCluster() *cluster {
	if s.main != nil {
		return s.main
	}
	for _, c := range s.w.clusters {
		if c.bootstrapped {
			s.main = c
			return c
		}
	}
	return nil
}

// armFault makes the next membership call fail before it applies, or
// lose its reply after it applied, or the agent die right after its next
// side effect, or the list change on its host while it holds the lock.
func (s *scheduler) armFault() {
	w := s.w
	switch w.rng.IntN(5) {
	case 0:
		w.armed.failBefore = true
	case 1:
		w.armed.loseReply = true
	case 2:
		w.armed.listChanges = true
	case 3:
		w.armed.pauseUnderLock = true
	default:
		w.armed.crashAfter = true
	}
	h := s.pickAgent()
	w.note("fault armed for %s's next pass: %+v", h.name(), w.armed)
	s.pass(h)
}

// foreignCluster starts a one-member etcd of another cluster on a host
// that runs nothing of etcdlet's: a listed address may then answer for a
// cluster no agent belongs to.
func (s *scheduler) foreignCluster() {
	w := s.w
	for _, h := range w.hosts {
		if h.agent != nil || h.proc != nil || h.data.wal != nil {
			continue
		}
		c := &cluster{inst: len(w.clusters), id: hashID("foreign", h.ip.String()), foreign: true}
		m := &member{id: hashID("foreign-member", h.ip.String()), name: "foreign", peerURL: peerURL(h.ip), clientURL: clientURL(h.ip), started: true}
		c.members = []*member{m}
		w.clusters = append(w.clusters, c)
		h.proc = &process{c: c, memberID: m.id, startedAt: w.now}
		w.note("%s: a foreign one-member cluster %d runs here", h.name(), c.inst)
		return
	}
}

// raiseAlarm raises NOSPACE or CORRUPT for a running member of the
// schedule's cluster.
func (s *scheduler) raiseAlarm() {
	c := s.mainCluster()
	if c == nil {
		return
	}
	for _, m := range c.members {
		if s.w.runningIn(c, m.id) != nil {
			kind := []string{"NOSPACE", "CORRUPT"}[s.w.rng.IntN(2)]
			c.alarms = append(c.alarms, alarm{member: m.id, kind: kind})
			s.w.note("cluster %d: member %x raises %s", c.inst, m.id, kind)
			return
		}
	}
}

func sharesAny(a, b []netip.Addr) bool {
	for _, ip := range a {
		if slices.Contains(b, ip) {
			return true
		}
	}
	return false
}

// loseDisk destroys h's data dir while its cluster keeps the data of a
// quorum of voters elsewhere: the host must rejoin that cluster (its
// member, stale now, removed and added again). A host the operator's act
// was made on (explicit mode) must never found a second cluster, neither
// on cluster.founder nor on the approval it used. Half the time the state
// dir is lost with it (a replaced disk): the host is then fresh, and only
// the other nodes' answers keep it from founding.
func (s *scheduler) loseDisk(h *host) {
	w := s.w
	c := s.mainCluster()
	if c == nil || h.data.wal == nil || h.data.wal.c != c {
		return
	}
	voters, kept := c.voters(), 0
	for _, m := range voters {
		for _, o := range w.hosts {
			if o != h && o.data.wal != nil && o.data.wal.c == c && o.data.wal.memberID == m.id {
				kept++
			}
		}
	}
	if kept < len(voters)/2+1 {
		return // the cluster would be lost for good, which no agent recovers
	}
	// Nor may the lists name no voter but this one: lists keep a voter of
	// the cluster (keepsAVoter), and one whose disk is lost is none. Such a
	// list, with the state lost too, leaves the host fresh among fresh
	// nodes, with cluster.founder telling it to found: the limit that
	// docs/membership.md states (remove cluster.founder once it did its
	// work).
	for _, o := range w.hosts {
		if !slices.ContainsFunc(voters, func(m *member) bool {
			v := s.w.hostOf(hostOfURL(m.peerURL))
			return v != nil && v != h && slices.Contains(o.list, v.ip) && v.data.wal != nil && v.data.wal.c == c && v.data.wal.memberID == m.id
		}) {
			return
		}
	}
	s.crashAgent(h, "its disk failed")
	h.stop(false, "its disk failed")
	h.data.wal, h.data.backendOnly, h.data.moved = nil, false, nil
	what := "data dir"
	if w.rng.IntN(2) == 0 {
		h.store.st, h.store.promise, h.store.operator = state.State{}, nil, state.Operator{}
		what = "data dir and state dir"
	}
	w.note("%s: its disk is lost: the %s are gone", h.name(), what)
}
