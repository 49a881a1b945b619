package daemon

// The parts the agent is wired from: the state, the etcd client pool, the
// other agents, the runtime.

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/clusterlist"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod/manifest"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// newRuntime builds the configured runtime; the static-pod runtime writes
// through a protection guard, which the agent runs.
func newRuntime(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, events kube.Recorder) (runtime.Runtime, *protect.Guard) {
	if cfg.Etcd.Runtime != config.RuntimeStaticPod {
		return embedded.New(log), nil
	}
	guard := protect.New(protect.Options{
		Enabled:  cfg.Protection.On(),
		Interval: cfg.Protection.Interval,
		Log:      log.With("component", "protection"),
		OptOut:   func(_ string, onDisk []byte) bool { return manifest.OptsOut(onDisk) },
		OnChange: func(c protect.Change) {
			m.ProtectedFileChanges.WithLabelValues(c.Path, string(c.Action)).Inc()
			if c.Action != protect.Allowed {
				events.Eventf(corev1.EventTypeWarning, kube.ReasonProtectionReverted, "%s: a change made by someone else was %s", c.Path, c.Action)
			}
		},
	})
	return staticpod.New(cfg.StaticPod, cfg.Agent.StateDir, guard, log), guard
}

// newListKeeper follows the list kept in the cluster (members.source
// cluster). It reads through the listed members, this node's own member
// and the seeds, and from the cluster this node belongs to: the one its
// last pass saw it pinned to, or before the first pass the one its state
// names (pinnedAtStart, hex).
func (a *Agent) newListKeeper(pinnedAtStart string) *clusterlist.Keeper {
	startPinned, _ := strconv.ParseUint(pinnedAtStart, 16, 64)
	scheme := identity.SchemeFrom(a.cfg)
	return &clusterlist.Keeper{
		Rules: a.source.Rules,
		Dial:  a.pool.NewMulti,
		Endpoints: func() []string {
			last := a.node.Last()
			extra := clusterlist.SeedURLs(scheme, a.source.Rules().Members.Seeds)
			if last.Self.ClientURL != "" {
				extra = append(extra, last.Self.ClientURL)
			}
			return membership.Endpoints(last.Desired, nil, extra...)
		},
		Pinned: func() uint64 {
			if p := a.node.Last().Pinned; p != 0 {
				return p
			}
			return startPinned
		},
		CallTimeout: a.cfg.Agent.CallTimeout, Retry: a.cfg.Agent.ReconcileInterval,
		Log: a.log.With("component", "member-list"),
	}
}

// peers reaches the other agents' peer endpoints; Wake never blocks the
// loop.
type peers struct {
	client  *consent.Client
	timeout time.Duration
	log     *slog.Logger
	// self is this node's address, which a wake-up leaves from (the node
	// controller gives it to its asks itself); nil without an agent.
	self func() netip.Addr
}

func (p *peers) Ask(ctx context.Context, n netip.Addr) (consent.Answer, error) {
	return p.client.Ask(ctx, n)
}

func (p *peers) Promise(ctx context.Context, n netip.Addr, list []string) (consent.Answer, error) {
	return p.client.Promise(ctx, n, list)
}

func (p *peers) Wake(n netip.Addr) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		defer cancel()
		if p.self != nil {
			ctx = consent.WithSource(ctx, p.self())
		}
		if err := p.client.Wake(ctx, n); err != nil {
			p.log.Debug("could not wake the agent of a node", "node", n.String(), "error", err)
		}
	}()
}

// connection is what every node controller of this process works
// through: the state, the etcd client pool, the other agents.
type connection struct {
	store state.Store
	state state.State
	pool  *etcdclient.Pool
	peers *peers
}

func connect(cfg *config.Config, log *slog.Logger) (connection, error) {
	c := connection{store: state.Store{Dir: cfg.Agent.StateDir}}
	var err error
	if c.state, err = c.store.Load(); err != nil {
		return c, err
	}
	client, err := consent.NewClient(cfg.Etcd.TLS.Peer, cfg.Agent.PeerPort, cfg.Agent.CallTimeout)
	if err != nil {
		return c, err
	}
	c.peers = &peers{client: client, timeout: cfg.Agent.CallTimeout, log: log}
	if c.pool, err = etcdclient.NewPool(cfg.ClientTLS(), cfg.Agent.CallTimeout); err != nil {
		return c, err
	}
	return c, nil
}
