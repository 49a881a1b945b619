package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// Options shape the schedules.
type Options struct {
	// Steps is the number of events before the faults stop.
	Steps int
	// Rounds bounds convergence once the faults stop: every agent passes
	// once per round, a simulated second apart.
	Rounds int
	// Logs keeps the agents' own logs in the trace (for a replay).
	Logs bool
}

// DefaultOptions are make test's.
var DefaultOptions = Options{Steps: 120, Rounds: 400}

// Result is what one schedule came to.
type Result struct {
	Seed     uint64
	Failures []string
	Trace    string
	Stats    Stats
}

// Stats count what a schedule exercised.
type Stats struct {
	Events  map[string]int
	Actions map[string]int // membership changes applied, by kind
}

func (s *Stats) add(o Stats) {
	for k, v := range o.Events {
		s.Events[k] += v
	}
	for k, v := range o.Actions {
		s.Actions[k] += v
	}
}

// NewStats returns empty counters.
func NewStats() Stats { return Stats{Events: map[string]int{}, Actions: map[string]int{}} }

// Run plays one seeded schedule and checks the invariants after every
// step.
func Run(seed uint64, opts Options) (res Result) {
	//nolint:gosec // G404: the simulator's seed, not a secret: a schedule must replay from its seed
	w := &world{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		token: "etcd-main", trace: newTrace(opts.Logs)}
	res = Result{Seed: seed, Stats: NewStats()}
	w.applied = res.Stats.Actions
	w.lastChange = map[netip.Addr]listedChange{}
	w.strict = w.rng.IntN(2) == 0
	defer func() {
		res.Failures, res.Trace = w.failures, w.trace.String()
	}()
	s := &scheduler{w: w, opts: opts, mu: &sync.Mutex{}, stats: res.Stats}
	w.onLock = func(h *host) {
		// The list changes while the agent holds the lock, after it
		// planned: a new list that reaches this host first.
		s.event("list changes under the lock")
		s.changeList()
		h.list = slices.Clone(s.current())
	}
	w.onPause = s.pauseUnderLock
	s.setUp()
	for step := 0; step < opts.Steps && len(w.failures) == 0; step++ {
		if s.mode == config.BootstrapExplicit && !s.existing && s.founder == nil && step == s.approveAt && w.adds == 0 {
			s.approve()
		}
		s.step()
	}
	switch {
	case len(w.failures) > 0:
	case s.mode == config.BootstrapNever && !s.existing:
		s.neverForms()
	default:
		s.converge()
	}
	return res
}

type scheduler struct {
	w     *world
	opts  Options
	mu    *sync.Mutex
	stats Stats
	// existing: the schedule starts with a formed cluster, so any
	// bootstrap by an agent is a second one.
	existing bool
	main     *cluster // the cluster the schedule is about
	lists    [][]netip.Addr
	// mode is every host's cluster.bootstrap. In explicit mode a cluster
	// forms only on an operator's act: founder is the host cluster.founder
	// names (the act is the configuration), or the operator approves on
	// one listed host at step approveAt; actors are the hosts an act was
	// made on.
	mode      string
	founder   *host
	approveAt int
	actors    []*host
}

// setUp creates 3 to 5 hosts and either a list of fresh nodes or a
// running cluster.
func (s *scheduler) setUp() {
	w := s.w
	n := 3 + w.rng.IntN(3)
	perm := w.rng.Perm(250)
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(perm[i] + 1)}) //nolint:gosec // G115: perm[i] is below 250, so 10.0.0.1 to 10.0.0.250
		h := &host{w: w, idx: i, ip: ip, static: w.rng.IntN(2) == 0, data: &dataDir{}}
		h.store = &store{mu: s.mu, h: h}
		w.hosts = append(w.hosts, h)
	}
	k := 1 + w.rng.IntN(min(3, n))
	var list []netip.Addr
	for _, h := range w.hosts[:k] {
		list = append(list, h.ip)
	}
	s.existing = w.rng.IntN(2) == 0
	if s.existing {
		s.formCluster(w.hosts[:k], list)
	}
	// Fresh nodes: half the schedules form their cluster by consent, most
	// of the others on an operator's act, a few never (members.source
	// etcd-resource); a running cluster converges in every mode.
	switch r := w.rng.IntN(10); {
	case r < 5:
		s.mode = config.BootstrapConsent
	case r < 9:
		s.mode = config.BootstrapExplicit
	default:
		s.mode = config.BootstrapNever
	}
	if s.mode == config.BootstrapExplicit && !s.existing {
		if w.rng.IntN(2) == 0 {
			s.founder = w.hosts[w.rng.IntN(k)]
			s.actors = append(s.actors, s.founder)
		} else {
			s.approveAt = w.rng.IntN(s.opts.Steps + 1)
		}
	}
	s.setList(list)
	for _, h := range w.hosts {
		if w.rng.IntN(4) > 0 || slices.Contains(list, h.ip) {
			s.startAgent(h)
		}
	}
	act := ""
	switch {
	case s.founder != nil:
		act = fmt.Sprintf(", cluster.founder %s", s.founder.ip)
	case s.mode == config.BootstrapExplicit && !s.existing:
		act = fmt.Sprintf(", the operator approves at step %d", s.approveAt)
	}
	w.note("set up: %d hosts, list %v, %s, bootstrap %s%s, strict reconfiguration %v", n, list,
		map[bool]string{true: "a running cluster", false: "fresh nodes"}[s.existing], s.mode, act, w.strict)
}

// approve is the operator's act of explicit mode, on a listed host whose
// agent runs and that holds no data, while no cluster exists (what
// `etcdlet bootstrap --approve` checks): the approval of the list in
// force there. A host that holds an older approval and is listed gets the
// new one (the operator approves where the approval was before); any
// other approval stays behind, stale, as the operator left it.
func (s *scheduler) approve() {
	w := s.w
	var pick *host
	for _, h := range w.hosts {
		if slices.Contains(s.current(), h.ip) && h.agent != nil && h.data.wal == nil && (pick == nil || h.store.operator.BootstrapApproval != nil) {
			pick = h
		}
	}
	if pick == nil {
		return
	}
	s.event("operator approves")
	pick.store.operator.BootstrapApproval = &state.Approval{List: slices.Sorted(slices.Values(identity.AddrStrings(pick.list))), At: w.now}
	if !slices.Contains(s.actors, pick) {
		s.actors = append(s.actors, pick)
	}
	w.note("%s: the operator approves a new cluster of %v there (etcdlet bootstrap --approve)", pick.name(), pick.list)
}

// formCluster starts a running cluster on hosts, as earlier agents left
// it: members started, data and state in place.
func (s *scheduler) formCluster(hosts []*host, list []netip.Addr) {
	w := s.w
	c := &cluster{inst: len(w.clusters), id: hashID("pre-existing", fmt.Sprint(w.rng.Uint64()))}
	w.clusters = append(w.clusters, c)
	for _, h := range hosts {
		m := &member{id: hashID(h.ip.String(), "pre"), name: "etcd-main-" + h.ip.String(), peerURL: peerURL(h.ip),
			clientURL: clientURL(h.ip), started: true}
		c.members = append(c.members, m)
		h.proc = &process{c: c, memberID: m.id, startedAt: w.now.Add(-time.Hour)}
		h.data.wal = &walIdentity{c: c, memberID: m.id}
		h.store.st = state.State{SelfAddress: h.ip.String(), MemberID: membership.IDString(m.id), ClusterID: membership.IDString(c.id),
			WasMember: true, LastAppliedList: identity.AddrStrings(list)}
	}
	s.main = c
}

// setList makes list the newest. A list change reaches the hosts one
// after another: each reads it now or, with some chance, only when it
// arrives later (listArrives; converge brings it to all). Before the
// schedule's cluster has formed, every host reads it at once: fresh nodes
// that read lists sharing nothing bootstrap a cluster each by consent
// (the documented limit that cluster.bootstrap: explicit closes).
func (s *scheduler) setList(list []netip.Addr) {
	s.lists = append(s.lists, list)
	formed := s.mainCluster() != nil && len(s.mainCluster().voters()) > 0
	first := true
	for _, i := range s.w.rng.Perm(len(s.w.hosts)) {
		h := s.w.hosts[i]
		h.listRead = false
		if first || !formed || s.w.rng.IntN(2) == 0 {
			h.list = slices.Clone(list)
			first = false
		} else {
			s.w.note("%s: the list %v has not reached it yet", h.name(), list)
		}
	}
}

func (s *scheduler) current() []netip.Addr { return s.lists[len(s.lists)-1] }

// config is a host's etcdlet configuration.
func (s *scheduler) config(h *host) *config.Config {
	runtime := "embedded"
	if h.static {
		runtime = "static-pod"
	}
	var addrs []string
	for _, ip := range s.current() {
		addrs = append(addrs, ip.String())
	}
	founder := ""
	if s.founder != nil {
		founder = ", founder: " + s.founder.ip.String()
	}
	text := fmt.Sprintf(`cluster: {name: etcd-main, bootstrap: %s%s}
members: {source: static, addresses: [%s]}
node: {address: %s}
etcd: {runtime: %s}
agent: {learnerTimeout: 30s}
`, s.mode, founder, strings.Join(addrs, ", "), h.ip, runtime)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		panic(fmt.Sprintf("sim config: %v\n%s", err, text))
	}
	return cfg
}

func (s *scheduler) startAgent(h *host) {
	w := s.w
	h.gen++
	st, _ := h.store.Load()
	log := slog.New(slog.DiscardHandler)
	if w.trace.logs {
		log = slog.New(slog.NewTextHandler(w.trace.writer(h.name()), &slog.HandlerOptions{Level: slog.LevelDebug,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))
	}
	h.agent = node.New(node.Deps{
		Settings: node.SettingsFrom(s.config(h)), Log: log, Now: func() time.Time { return w.now },
		Cluster: &etcdAPI{w: w, from: h, mu: s.mu}, Locker: &locker{w: w, h: h, gen: h.gen, mu: s.mu},
		Runtime: &hostRuntime{h: h, mu: s.mu}, DataDir: &hostDataDir{h: h, mu: s.mu}, Store: h.store,
		Peers: &peers{w: w, h: h, mu: s.mu}, List: &list{h: h, mu: s.mu},
		Policy: etcdclient.Policy{Attempts: 6, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			AttemptTimeout: 2 * time.Second, Sleep: s.sleep},
		InOrder:       true,
		PeerListening: s.peerListening(h),
	}, st)
	w.note("%s: agent starts", h.name())
}

// sleep is the retry backoff: simulated time passes.
func (s *scheduler) sleep(_ context.Context, d time.Duration) bool {
	s.mu.Lock()
	s.w.now = s.w.now.Add(d)
	s.mu.Unlock()
	return true
}

func (s *scheduler) peerListening(from *host) func(context.Context, []string) bool {
	return func(_ context.Context, urls []string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, u := range urls {
			if h := s.w.hostOf(hostOfURL(u)); h != nil && h.proc != nil && connected(from, h) {
				return true
			}
		}
		return false
	}
}

// crashAgent kills a host's agent: with the embedded runtime, etcd dies
// with it.
func (s *scheduler) crashAgent(h *host, why string) {
	if h.agent == nil {
		return
	}
	h.agent = nil
	s.w.note("%s: agent dies (%s)", h.name(), why)
	if !h.static {
		h.stop(false, "it ran in the agent's process")
	}
}

// pauseUnderLock stops h's agent where it confirms its writer lock, for
// longer than the lock's lease (Jepsen found etcd's locks unsafe under
// such pauses): its lease is not kept alive, its embedded member stops
// with it, and one to three passes of other agents run meanwhile, which
// may take the lock and change the membership. Then h goes on with the
// pass it planned before the pause: its confirmation must find the lock
// lost, and checkCallInto fails any call made without it.
func (s *scheduler) pauseUnderLock(h *host) {
	w := s.w
	s.event("agent paused under the lock")
	w.note("%s: agent paused as it confirms the writer lock (fault)", h.name())
	h.paused = true
	isolated := h.isolated
	if !h.static {
		h.isolated = true
	}
	w.now = w.now.Add(lockTTL + time.Duration(w.rng.IntN(5000))*time.Millisecond)
	w.settle()
	for range 1 + w.rng.IntN(3) {
		if o := s.pickAgent(); o != h {
			s.pass(o)
		}
	}
	h.paused, h.isolated = false, isolated
	w.note("%s: agent continued", h.name())
}

// pass runs one pass of a host's agent; a fault may kill it half-way.
func (s *scheduler) pass(h *host) {
	if h.agent == nil {
		s.w.armed = faults{} // a fault armed for a dead agent expires
		return
	}
	if h.paused {
		return
	}
	h.wake = false
	h.listRead = slices.Equal(h.list, s.current())
	w := s.w
	before := map[*cluster]bool{}
	for _, c := range w.clusters {
		before[c] = w.quorateAnywhere(c)
	}
	crashedMidPass := func() (died bool) {
		defer func() {
			if r := recover(); r != nil {
				c, ok := r.(crashed)
				if !ok {
					panic(r)
				}
				s.crashAgent(h, "mid-pass, right after: "+c.where)
				died = true
			}
		}()
		h.agent.Pass(context.Background())
		return false
	}()
	w.armed = faults{}
	w.settle()
	s.checkAfterPass(h, before, crashedMidPass)
}

func peerURL(ip netip.Addr) string   { return "http://" + hostPort(ip, 2380) }
func clientURL(ip netip.Addr) string { return "http://" + hostPort(ip, 2379) }

func hostPort(ip netip.Addr, port uint16) string { return netip.AddrPortFrom(ip, port).String() }
