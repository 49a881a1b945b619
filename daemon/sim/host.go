package sim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
)

func (h *host) name() string { return fmt.Sprintf("host %d (%s)", h.idx, h.ip) }

// stop ends the host's etcd process; crash says it stopped on its own
// (counted as an exit the agent sees).
func (h *host) stop(crash bool, why string) {
	if h.proc == nil {
		return
	}
	h.w.note("%s: etcd stops: %s", h.name(), why)
	h.proc = nil
	if crash {
		h.exits++
	}
}

// dataDir is a host's data dir: the identity its WAL records (nil: none),
// a backend without a WAL, and every data dir moved aside.
type dataDir struct {
	wal         *walIdentity
	backendOnly bool
	moved       []movedDir
}

type walIdentity struct {
	c        *cluster
	memberID uint64
}

type movedDir struct {
	at  time.Time
	wal *walIdentity
}

// hostRuntime is runtime.Runtime on one host of the model.
type hostRuntime struct {
	h  *host
	mu *sync.Mutex
}

var _ runtime.Runtime = (*hostRuntime)(nil)

// Apply starts etcd as etcd would: on existing data it restarts the member
// the WAL records, whatever the spec says; on an empty data dir it forms
// a new cluster from the initial cluster (state new) or joins the one
// whose member has this peer URL (state existing).
func (r *hostRuntime) Apply(_ context.Context, spec runtime.Spec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, w := r.h, r.h.w
	if h.proc != nil && h.proc.c.foreign {
		h.exits++
		return errors.New("listen tcp " + hostPort(h.ip, 2379) + ": bind: address already in use (another cluster's etcd runs here)")
	}
	if h.proc != nil {
		return nil
	}
	switch {
	case h.data.backendOnly && h.data.wal == nil:
		h.exits++
		return errors.New("etcd: the data dir has a backend but no WAL")
	case h.data.wal != nil:
		id := h.data.wal
		if id.c.member(id.memberID) == nil && w.quorateAnywhere(id.c) {
			h.exits++
			w.note("%s: etcd restarts on its data and learns its member %x was removed; it exits", h.name(), id.memberID)
			return nil
		}
		h.proc = &process{c: id.c, memberID: id.memberID, startedAt: w.now}
		w.note("%s: etcd restarts as member %x of cluster %d", h.name(), id.memberID, id.c.inst)
	case spec.InitialClusterState == runtime.StateNew:
		c, id := w.bootstrapTarget(h, spec)
		if c == nil {
			h.exits++
			w.note("%s: etcd learns from a peer that its member %x of the bootstrap was removed; it exits", h.name(), id)
			return nil
		}
		h.proc = &process{c: c, memberID: id, startedAt: w.now}
		w.note("%s: etcd bootstraps as member %x of cluster %d", h.name(), id, c.inst)
	default:
		c, m := w.joinTarget(h, spec)
		if c == nil {
			h.exits++
			w.note("%s: etcd cannot join (no listed peer runs a cluster with its member); it exits", h.name())
			return nil
		}
		h.proc = &process{c: c, memberID: m.id, startedAt: w.now}
		w.note("%s: etcd joins as member %x of cluster %d", h.name(), m.id, c.inst)
	}
	if m := h.proc.c.member(h.proc.memberID); m != nil {
		m.name, m.clientURL = spec.Name, spec.AdvertiseClientURL
	}
	if h.data.wal == nil {
		h.data.wal = &walIdentity{c: h.proc.c, memberID: h.proc.memberID}
	}
	w.maybeCrash(h, "etcd started")
	return nil
}

// bootstrapTarget is the cluster a bootstrap with this spec forms, and
// the member it starts as. The same initial cluster and token give the
// same cluster and member IDs, as with real etcd: a start that completes
// an earlier bootstrap (this peer URL's member has not started yet) is
// part of that cluster. So is one whose member has since been removed:
// like real etcd, it exits once a quorum of the cluster tells it so, and
// waits without a quorum of its own until then. Starting a member that
// already ran on an empty data dir would give it a second, empty log: a
// violation. Any other bootstrap forms a new cluster.
func (w *world) bootstrapTarget(h *host, spec runtime.Spec) (*cluster, uint64) {
	key := bootstrapKey(spec.InitialCluster, spec.Token)
	for _, c := range w.clusters {
		if c.key != key {
			continue
		}
		m := c.memberWithPeerURL(spec.AdvertisePeerURL)
		switch {
		case m != nil && (m.started || w.runningIn(c, m.id) != nil):
			w.fail("%s: etcd bootstraps member %x of cluster %d again on an empty data dir", h.name(), m.id, c.inst)
			return c, m.id
		case m != nil:
			return c, m.id
		case w.quorateAnywhere(c):
			return nil, hashID(spec.AdvertisePeerURL, spec.Token)
		default:
			return c, hashID(spec.AdvertisePeerURL, spec.Token)
		}
	}
	w.note("a bootstrap of [%s] forms a new cluster", spec.InitialCluster)
	c := w.bootstrapCluster(h, spec.InitialCluster, spec.Token)
	return c, c.memberWithPeerURL(spec.AdvertisePeerURL).id
}

// joinTarget is the cluster a joining member finds through the running
// peers of its initial cluster: one with a member for its peer URL.
func (w *world) joinTarget(h *host, spec runtime.Spec) (*cluster, *member) {
	for _, entry := range strings.Split(spec.InitialCluster, ",") {
		_, u, _ := strings.Cut(entry, "=")
		peer := w.hostOf(hostOfURL(u))
		if peer == nil || peer == h || peer.proc == nil || !connected(peer, h) {
			continue
		}
		if m := peer.proc.c.memberWithPeerURL(spec.AdvertisePeerURL); m != nil && w.runningIn(peer.proc.c, m.id) == nil {
			return peer.proc.c, m
		}
	}
	return nil, nil
}

func (r *hostRuntime) Stop(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	if p := h.proc; p != nil && p.c.member(p.memberID) != nil {
		h.w.fail("%s: the agent stops etcd while its member %x is still in cluster %d", h.name(), p.memberID, p.c.inst)
	}
	h.stop(false, "stopped by the agent")
	return nil
}

func (r *hostRuntime) Close(context.Context) error { return nil }

func (r *hostRuntime) Status() runtime.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	s := runtime.Status{Exits: h.exits}
	if h.proc != nil && !h.proc.c.foreign { // another cluster's etcd is not the agent's
		s.Running = true
		if !h.static {
			s.MemberID, s.ClusterID = h.proc.memberID, h.proc.c.id
		}
	}
	return s
}

func (r *hostRuntime) Changed() <-chan struct{} { return nil }

// hostDataDir is node.DataDir on one host.
type hostDataDir struct {
	h  *host
	mu *sync.Mutex
}

func (d *hostDataDir) Inspect() (datadir.Contents, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dd := d.h.data
	return datadir.Contents{WAL: dd.wal != nil, Backend: dd.wal != nil || dd.backendOnly}, nil
}

func (d *hostDataDir) Identity() (datadir.Identity, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id := d.h.data.wal; id != nil {
		return datadir.Identity{MemberID: id.memberID, ClusterID: id.c.id}, nil
	}
	return datadir.Identity{}, datadir.ErrNoIdentity
}

func (d *hostDataDir) InUse() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h.proc != nil, nil
}

// MoveAside keeps the data (the model never deletes it) and checks that
// it is no live member's: moving that aside would cost its cluster a
// member.
func (d *hostDataDir) MoveAside(now time.Time) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, dd := d.h, d.h.data
	if dd.wal == nil && !dd.backendOnly {
		return "", nil
	}
	if id := dd.wal; id != nil && id.c.member(id.memberID) != nil {
		h.w.fail("%s: data of member %x, still in cluster %d, is moved aside", h.name(), id.memberID, id.c.inst)
	}
	dd.moved = append(dd.moved, movedDir{at: now, wal: dd.wal})
	dd.wal, dd.backendOnly = nil, false
	h.w.note("%s: data dir moved aside", h.name())
	h.w.maybeCrash(h, "data moved aside")
	return fmt.Sprintf("/var/lib/etcd.etcdlet-moved-%d", len(dd.moved)), nil
}

func (d *hostDataDir) MovedSince(since time.Time) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.h.data.moved {
		if !m.at.Before(since) {
			n++
		}
	}
	return n, nil
}

func (d *hostDataDir) MountPoint() (bool, error) { return true, nil }

// FreeBytes: the simulator's disks never fill (its etcd reports no
// backend size either).
func (*hostDataDir) FreeBytes() (uint64, error) { return 1 << 40, nil }

// The simulated etcd has no versions: nothing is refused for one.
func (*hostDataDir) ClusterVersion() (string, error) { return "", nil }

// Survey: the simulator's hosts have no write-ahead log to read.
func (d *hostDataDir) Survey() (datadir.Survey, error) {
	return datadir.Survey{}, datadir.ErrNoIdentity
}

// store is a host's disk for the agent's state, its bootstrap promise
// and the operator's file.
type store struct {
	mu       *sync.Mutex
	h        *host
	st       state.State
	promise  *state.Promise
	operator state.Operator
}

func (s *store) LoadPromise() (*state.Promise, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.promise == nil {
		return nil, nil
	}
	p := *s.promise
	return &p, nil
}

func (s *store) SavePromise(p *state.Promise) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == nil {
		s.promise = nil
		return nil
	}
	c := *p
	s.promise = &c
	return nil
}

// The simulator runs no recovery: no host is ever asked to retire.
func (*store) LoadRetirement() (*state.Retirement, error) { return nil, nil }
func (*store) SaveRetirement(*state.Retirement) error     { return nil }

// The simulator runs no pacemaker: no two-node failover.
func (*store) LoadWitness() (*state.Witness, error) { return nil, nil }
func (*store) SaveWitness(*state.Witness) error     { return nil }

func (s *store) Load() (state.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Clone(), nil
}

func (s *store) Save(st state.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st = st.Clone()
	s.h.w.maybeCrash(s.h, "state saved")
	return nil
}

func (s *store) LoadOperator() (state.Operator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.operator, nil
}

// peers is node.Peers on one host: other hosts' agents, when they run and
// can be reached.
type peers struct {
	w  *world
	h  *host
	mu *sync.Mutex
}

func (p *peers) Ask(_ context.Context, ip netip.Addr) (consent.Answer, error) {
	agent := p.reach(ip)
	if agent == nil {
		return consent.Answer{}, errRefused
	}
	return agent.Answer(), nil
}

func (p *peers) Promise(_ context.Context, ip netip.Addr, list []string) (consent.Answer, error) {
	agent := p.reach(ip)
	if agent == nil {
		return consent.Answer{}, errRefused
	}
	return agent.Promise(list), nil
}

// reach is the agent of a host this one can reach, or nil.
func (p *peers) reach(ip netip.Addr) *node.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.w.hostOf(ip); t != nil && connected(p.h, t) {
		return t.agent
	}
	return nil
}

func (p *peers) Wake(ip netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.w.hostOf(ip); t != nil && connected(p.h, t) {
		t.wake = true
	}
}

// list is node.ListSource on one host.
type list struct {
	h  *host
	mu *sync.Mutex
}

func (l *list) Refresh() bool { return false }

func (l *list) Current() ([]netip.Addr, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.h.list), len(l.h.list) > 0
}

func (l *list) Err() error { return nil }

// maybeCrash kills the agent passing now right after a side effect, when
// that fault is armed.
func (w *world) maybeCrash(h *host, after string) {
	if w.armed.crashAfter && h.agent != nil {
		w.armed.crashAfter = false
		panic(crashed{after})
	}
}

// noteChange checks, for an add or a removal of addr's member by from,
// that agents whose lists differ never undo each other's changes: the
// last change about addr was made by an agent that still holds the list
// it made it under and still has that list posted for the others to see
// (it answers, and could redo it), and from's list says the opposite
// about addr: the two would fight.
func (w *world) noteChange(from *host, c *cluster, addr netip.Addr, add bool) {
	now := listedChange{add: add, host: from.idx, gen: from.gen, list: fmt.Sprint(from.list), alarmed: len(c.alarms) > 0}
	prev, ok := w.lastChange[addr]
	w.lastChange[addr] = now
	if !ok || prev.add == add || now.alarmed || prev.alarmed {
		// Under an alarm no agent can post its list, nor a removal's
		// record (both are writes): the leading member's agent acts on
		// its own list alone, and an agent holding an older list may undo
		// that change once the alarm is cleared, until the lists agree
		// (the known limit docs/membership.md states).
		return
	}
	actor := w.hosts[prev.host]
	stillHolds := actor.agent != nil && actor.gen == prev.gen && fmt.Sprint(actor.list) == prev.list && slices.Contains(actor.list, addr) == prev.add
	if stillHolds && w.posted(c, actor) && slices.Contains(from.list, addr) == add {
		w.fail("%s undid %s's %s of %s: it holds the list %v, the other still %v and has it posted: agents whose lists differ fight",
			from.name(), actor.name(), map[bool]string{true: "add", false: "removal"}[prev.add], addr, from.list, actor.list)
	}
}

// posted reports whether h's agent has a live post on c's Board.
func (w *world) posted(c *cluster, h *host) bool {
	for _, e := range c.board {
		if e.leased && e.host == h.idx && e.gen == h.gen && w.now.Before(e.expires) {
			return true
		}
	}
	return false
}

// checkCallInto is the invariant that an agent makes membership calls
// only into its own cluster: never into one the simulator put on an
// address as a foreign cluster, and, once the agent's host belongs to a
// cluster (its data or state say which), only into that one.
func (w *world) checkCallInto(from *host, c *cluster, what string) {
	if c.foreign {
		w.fail("%s: %s sent into a foreign cluster (%d)", from.name(), what, c.inst)
		return
	}
	if id := from.data.wal; id != nil && id.c != c {
		w.fail("%s: %s sent into cluster %d, but its data belongs to cluster %d", from.name(), what, c.inst, id.c.inst)
	}
	// One writer at a time: the holder of the cluster's writer lock, its
	// lease alive; or, while an alarm refuses writes (no lock can be
	// taken), the leading member's agent alone.
	if l := c.lock; len(c.alarms) == 0 && (l == nil || l.host != from.idx || l.gen != from.gen || !w.now.Before(l.expires)) {
		w.fail("%s: %s sent into cluster %d without holding its writer lock", from.name(), what, c.inst)
	}
}
