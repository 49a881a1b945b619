// Package sim is a deterministic simulator of etcdlet's membership engine.
// It drives the real node controllers (daemon/node: the planner, the
// writer, the local-member decisions and their execution) against a model
// of etcd clusters and hosts, on a seeded random schedule of list
// changes, crashes at any step, restarts, partitions, lost replies and
// alarms, and checks after every step the invariants of
// docs/membership.md: no action of etcdlet costs a cluster its quorum, at
// most one learner, no membership call into a cluster the agent does not
// belong to, never a second bootstrap, no live member's data moved aside;
// and, once the faults stop, convergence to the list within a bound.
//
// The model keeps what the engine depends on, and no more: members and
// learners, which processes run and can reach each other, quorum,
// leadership, a learner catching up, the published state of a member, the
// alarms, the writer lock's lease, the data dir's identity. A failing seed
// replays exactly (Run with the same seed), with the full trace.
package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/daemon/node"
)

// world is one schedule's model.
type world struct {
	rng      *rand.Rand
	now      time.Time
	hosts    []*host
	clusters []*cluster // every raft group ever formed
	token    string
	strict   bool // etcd's strict reconfiguration check
	trace    *trace
	failures []string
	// faults armed for the agent pass under way
	armed faults
	// per-step bookkeeping for the invariants
	adds    int            // instances created by an agent's bootstrap
	applied map[string]int // membership changes applied, by kind
	// lastChange is, per address, the last add or removal of its member
	// and the list its agent held: for the invariant that agents whose
	// lists differ never undo each other's changes.
	lastChange map[netip.Addr]listedChange
	// onLock runs when an agent takes the writer lock (the list-change
	// fault).
	onLock func(h *host)
	// onPause runs when an agent confirms its writer lock before a call
	// (the pause fault): the agent stops there, past its lease.
	onPause func(h *host)
}

// listedChange is an add or a removal, who made it, and under which list.
type listedChange struct {
	add       bool
	host, gen int
	list      string
	// alarmed: made while the cluster refused writes, by the leading
	// member's agent on its own list alone (no list could be posted).
	alarmed bool
}

// faults are what the next membership call or side effect does wrong.
type faults struct {
	failBefore bool // the next membership call fails before it applies
	loseReply  bool // the next membership call applies, its reply is lost
	crashAfter bool // the agent dies right after its next side effect
	// listChanges: the list changes on the passing agent's host while it
	// holds the writer lock, after it planned and before it calls.
	listChanges bool
	// pauseUnderLock: the passing agent is stopped (SIGSTOP, a stalled
	// VM) as it confirms its writer lock before a call, for longer than
	// the lock's lease, while the other agents pass; then it goes on.
	pauseUnderLock bool
}

// crashed is the panic value of an agent that dies mid-pass.
type crashed struct{ where string }

// host is one control-plane host: its agent, its etcd process, its disk.
type host struct {
	w    *world
	idx  int
	ip   netip.Addr
	list []netip.Addr // the list as this host's source reads it
	// listRead: the agent has read the newest list; a source never goes
	// back to an older version once it has served a newer one.
	listRead bool
	agent    *node.Node // nil while the agent is down
	gen      int        // agent incarnation, for the writer lock
	static   bool       // static-pod runtime: etcd outlives the agent
	proc     *process
	exits    uint64
	data     *dataDir
	store    *store
	isolated bool
	wake     bool
	// paused: the agent is stopped; it makes no pass and keeps no lease
	// alive (with the embedded runtime its member is stopped with it).
	paused bool
}

// cluster is one raft group. Two bootstraps of the same list give two
// groups with equal IDs, as with real etcd: inst tells them apart.
type cluster struct {
	inst         int
	id           uint64
	members      []*member
	leader       uint64
	alarms       []alarm
	lock         *lockHolder
	board        map[string]boardEntry // the agents' Board (etcdclient.Board)
	rev          int64                 // revision of the last Board write
	foreign      bool                  // put there by the simulator, no agent's
	bootstrapped bool                  // formed by an agent's bootstrap
	by           *host                 // the host whose agent formed it (bootstrapped)
	formedWith   int                   // how many members it was formed with (bootstrapped)
	key          string
	index        uint64 // raft index, for Status
}

type member struct {
	id        uint64
	name      string
	peerURL   string
	clientURL string
	learner   bool
	started   bool // published its name and client URL
}

type alarm struct {
	member uint64
	kind   string
}

type process struct {
	c         *cluster
	memberID  uint64
	startedAt time.Time
}

func (w *world) note(format string, args ...any) { w.trace.add(w.now, format, args...) }

func (w *world) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.failures = append(w.failures, msg)
	w.trace.add(w.now, "VIOLATION: %s", msg)
}

func (w *world) hostOf(ip netip.Addr) *host {
	for _, h := range w.hosts {
		if h.ip == ip {
			return h
		}
	}
	return nil
}

// connected: two hosts' processes and agents can reach each other.
func connected(a, b *host) bool { return a == b || (!a.isolated && !b.isolated) }

func (c *cluster) member(id uint64) *member {
	for _, m := range c.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (c *cluster) memberWithPeerURL(u string) *member {
	for _, m := range c.members {
		if m.peerURL == u {
			return m
		}
	}
	return nil
}

func (c *cluster) voters() []*member {
	var vs []*member
	for _, m := range c.members {
		if !m.learner {
			vs = append(vs, m)
		}
	}
	return vs
}

// runningIn is the host whose process runs member id of c, if any.
func (w *world) runningIn(c *cluster, id uint64) *host {
	for _, h := range w.hosts {
		if h.proc != nil && h.proc.c == c && h.proc.memberID == id {
			return h
		}
	}
	return nil
}

// quorate reports whether c has a quorum of running voters that can reach
// from: what it takes for a linearizable answer or a change to commit.
func (w *world) quorate(c *cluster, from *host) bool {
	vs := c.voters()
	up := 0
	for _, m := range vs {
		if h := w.runningIn(c, m.id); h != nil && connected(h, from) {
			up++
		}
	}
	return len(vs) > 0 && up >= len(vs)/2+1
}

// quorateAnywhere: some group of hosts gives c a quorum.
func (w *world) quorateAnywhere(c *cluster) bool {
	for _, h := range w.hosts {
		if h.proc != nil && h.proc.c == c && w.quorate(c, h) {
			return true
		}
	}
	return false
}

// leaderFor is c's leader as seen from a host (0 without quorum there):
// the current leader while it runs in that group, else the lowest voter
// ID that does (an election).
func (w *world) leaderFor(c *cluster, from *host) uint64 {
	if !w.quorate(c, from) {
		return 0
	}
	if h := w.runningIn(c, c.leader); h != nil && connected(h, from) && c.member(c.leader) != nil && !c.member(c.leader).learner {
		return c.leader
	}
	var best uint64
	for _, m := range c.voters() {
		if h := w.runningIn(c, m.id); h != nil && connected(h, from) && (best == 0 || m.id < best) {
			best = m.id
		}
	}
	c.leader = best
	return best
}

// settle applies what happens between steps on its own: members that run
// in a quorate group publish themselves; a process whose member was
// removed, and that can hear its cluster, stops; the lock's lease is kept
// alive by a live, connected holder.
func (w *world) settle() {
	for _, h := range w.hosts {
		p := h.proc
		if p == nil {
			continue
		}
		m := p.c.member(p.memberID)
		if m == nil {
			if p.c.foreign || w.quorateAnywhere(p.c) {
				h.stop(true, "its member was removed")
			}
			continue
		}
		if !m.started && w.quorate(p.c, h) {
			m.started = true
		}
	}
	for _, c := range w.clusters {
		if l := c.lock; l != nil {
			if h := w.hosts[l.host]; h.agent != nil && h.gen == l.gen && !h.isolated && !h.paused {
				l.expires = w.now.Add(lockTTL)
			}
		}
		for key, e := range c.board {
			switch h := w.hosts[e.host]; {
			case !e.leased:
			case h.agent != nil && h.gen == e.gen && !h.isolated && !h.paused:
				e.expires = w.now.Add(lockTTL)
				c.board[key] = e
			case !w.now.Before(e.expires):
				delete(c.board, key) // its agent's lease expired
			}
		}
	}
}

func hashID(parts ...string) uint64 {
	f := fnv.New64a()
	for _, p := range parts {
		f.Write([]byte(p))
		f.Write([]byte{0})
	}
	return f.Sum64() | 1 // never 0
}

// bootstrapCluster forms a new raft group from an initial cluster string.
func (w *world) bootstrapCluster(by *host, initial, token string) *cluster {
	c := &cluster{inst: len(w.clusters), key: bootstrapKey(initial, token), bootstrapped: true, by: by}
	var ids []string
	for _, entry := range strings.Split(initial, ",") {
		name, url, _ := strings.Cut(entry, "=")
		m := &member{id: hashID(url, token), name: name, peerURL: url}
		c.members = append(c.members, m)
		ids = append(ids, fmt.Sprint(m.id))
	}
	slices.Sort(ids)
	c.id = hashID(append(ids, token)...)
	c.formedWith = len(c.members)
	w.clusters = append(w.clusters, c)
	w.adds++
	return c
}

// bootstrapKey identifies a bootstrap the way etcd's IDs do: member IDs
// hash the peer URLs and token, the cluster ID the sorted member IDs, so
// the order of the initial cluster does not matter.
func bootstrapKey(initial, token string) string {
	entries := strings.Split(initial, ",")
	slices.Sort(entries)
	return strings.Join(entries, ",") + "|" + token
}
