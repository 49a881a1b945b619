package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/memberlist"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/nodeaddr"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod/manifest"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// Inspector looks at a node the way the agent's next pass would (the
// same node controller's Look), for `etcdlet status` and `etcdlet
// render`, and changes nothing: no membership call, no state written, no
// member started or stopped.
type Inspector struct {
	Node     *node.Node
	State    state.State
	cfg      *config.Config
	settings node.Settings
	list     *configList
	pool     *etcdclient.Pool
	peers    *peers
}

// NewInspector builds a read-only node controller for cfg.
func NewInspector(cfg *config.Config, log *slog.Logger) (*Inspector, error) {
	c, err := connect(cfg, log)
	if err != nil {
		return nil, err
	}
	list := newConfigList(cfg, c.state.AppliedList())
	settings := node.SettingsFrom(cfg)
	deps := node.Deps{
		Settings: settings, Log: log, Cluster: c.pool, Runtime: probedRuntime{cfg: cfg},
		// Reads the agents' posted lists; it posts nothing and takes no lock.
		Locker:  &etcdclient.SessionLocker{Pool: c.pool, TTL: cfg.Agent.LockTTL, CallTimeout: cfg.Agent.CallTimeout, Holder: "etcdlet status"},
		DataDir: datadir.Dir{Path: cfg.Etcd.DataDir}, Store: readOnlyStore{c.store},
		Peers: c.peers, List: list, Detect: nodeaddr.Detect,
	}
	if cfg.Pacemaker.Enabled {
		if err := inspectTwoNode(cfg, &deps, log); err != nil {
			c.pool.Close()
			return nil, err
		}
	}
	n := node.New(deps, c.state)
	return &Inspector{Node: n, State: c.state, cfg: cfg, settings: settings, list: list, pool: c.pool, peers: c.peers}, nil
}

// Look takes one snapshot. Without any list in force (none valid now and
// none applied before) the node's look stops at the list; the cluster is
// then still observed through this node's own address, so that an
// operator sees it exactly when the list is broken.
func (i *Inspector) Look(ctx context.Context) node.Snapshot {
	s := i.Node.Look(ctx)
	if !s.ListOK {
		s.View = i.observeUnlisted(ctx)
	}
	return s
}

func (i *Inspector) observeUnlisted(ctx context.Context) membership.View {
	scheme := i.settings.Scheme
	var endpoints []string
	if ip, _, err := node.NodeAddress(i.settings.Address, nil, i.State, nodeaddr.Detect); err == nil {
		endpoints = append(endpoints, scheme.For(ip).ClientURL)
	}
	pinned, _ := strconv.ParseUint(i.State.ClusterID, 16, 64) // "" before the first join: not pinned
	observer := membership.Observer{Cluster: i.pool, Timeout: i.settings.CallTimeout, Scheme: scheme}
	return observer.Observe(ctx, membership.Target{Endpoints: endpoints, Pinned: pinned})
}

// ClusterVersion is the cluster version, as the first healthy member that
// answers its /version reports it ("3.7.0"); "" when none does.
func (i *Inspector) ClusterVersion(ctx context.Context, v membership.View) string {
	for _, m := range v.Members {
		if !m.Healthy() || len(m.ClientURLs) == 0 {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, i.settings.CallTimeout)
		versions, err := i.pool.Versions(callCtx, m.ClientURLs[0])
		cancel()
		if err == nil && versions.Cluster != "" {
			return versions.Cluster
		}
	}
	return ""
}

// ClientEndpoints are the client URLs an operator command starts from,
// without asking the cluster: the members' of the list in force and this
// node's own.
func (i *Inspector) ClientEndpoints() []string {
	i.list.Refresh()
	listed, _ := i.list.Current()
	addrs := slices.Clone(listed)
	if ip, _, err := node.NodeAddress(i.settings.Address, listed, i.State, nodeaddr.Detect); err == nil {
		addrs = append(addrs, ip)
	}
	return membership.Endpoints(i.settings.Scheme.ForAll(addrs), nil)
}

// ListedData asks every node of the list in force what its member data
// holds (consent.DataReport), this node's own read here, and returns the
// answers the most advanced first (DataReport.Ahead): the survivor a
// cluster that lost its quorum for good is recovered from comes first. A
// node that does not answer is listed with why.
func (i *Inspector) ListedData(ctx context.Context, s node.Snapshot) []consent.DataReport {
	reports := make([]consent.DataReport, len(s.Desired))
	var wg sync.WaitGroup
	for k, d := range s.Desired {
		wg.Go(func() {
			if d.IP == s.Self.IP {
				reports[k] = i.Node.DataOf(ctx, s.Self)
				return
			}
			askCtx, cancel := context.WithTimeout(ctx, i.settings.CallTimeout)
			defer cancel()
			if s.Self.IP.IsValid() {
				askCtx = consent.WithSource(askCtx, s.Self.IP)
			}
			r, err := i.peers.client.Data(askCtx, d.IP)
			if err != nil {
				r = consent.DataReport{Node: d.IP.String(), Error: "its agent does not answer: " + err.Error()}
			}
			reports[k] = r
		})
	}
	wg.Wait()
	consent.RankData(reports)
	return reports
}

// Retire asks each of nodes to promise not to start its member of
// cluster (hex ID) again, for this node recovers that cluster from its
// data; gone are the nodes the operator named gone for good. It returns
// one line per node that did not promise, with why; none when all did.
func (i *Inspector) Retire(ctx context.Context, s node.Snapshot, nodes []string, cluster string, gone []string) []string {
	refused := make([]string, len(nodes))
	var wg sync.WaitGroup
	for k, n := range nodes {
		wg.Go(func() {
			ip, err := netip.ParseAddr(n)
			if err != nil {
				refused[k] = fmt.Sprintf("%s: not an address", n)
				return
			}
			askCtx, cancel := context.WithTimeout(ctx, i.settings.CallTimeout)
			defer cancel()
			askCtx = consent.WithSource(askCtx, s.Self.IP)
			a, err := i.peers.client.Retire(askCtx, ip, consent.RetireRequest{Cluster: cluster, By: s.Self.IP.String(), Gone: gone})
			switch {
			case err != nil:
				refused[k] = fmt.Sprintf("%s: its agent does not answer: %v", n, err)
			case !a.Retired:
				refused[k] = fmt.Sprintf("%s: %s", n, a.Detail)
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(refused, func(r string) bool { return r == "" })
}

// PinnedClusterID is the ID of the cluster this node belongs to, in hex,
// or "" before its first join.
func (i *Inspector) PinnedClusterID() string { return i.State.ClusterID }

// Pool is the inspector's connection pool, with the agent's client TLS.
func (i *Inspector) Pool() *etcdclient.Pool { return i.pool }

// WriterLocker returns the agents' writer lock, for an operator command
// that changes membership and must never race an agent's change. holder
// says who holds it in `etcdlet lock status`.
func (i *Inspector) WriterLocker(holder string) *etcdclient.SessionLocker {
	return &etcdclient.SessionLocker{Pool: i.pool, TTL: i.cfg.Agent.LockTTL,
		CallTimeout: i.cfg.Agent.CallTimeout, Holder: holder}
}

// Close releases the connections.
func (i *Inspector) Close() {
	i.Node.Close()
	i.pool.Close()
}

// Preview returns the spec the local member would run with now.
func (i *Inspector) Preview(ctx context.Context) (runtime.Spec, error) {
	s := i.Look(ctx)
	switch {
	case !s.ListOK && s.ListErr != nil:
		return runtime.Spec{}, fmt.Errorf("member list:\n%w", s.ListErr)
	case s.SelfErr != nil:
		return runtime.Spec{}, s.SelfErr
	}
	spec, ok := node.SpecFor(i.settings.Member, s.Self, s.Decision, i.State)
	if !ok {
		return runtime.Spec{}, fmt.Errorf("no member runs on this node now: %s: %s", s.Decision.Kind, s.Decision.Reason)
	}
	return spec, nil
}

// probedRuntime tells from outside whether the local member runs: a
// static pod while its manifest is in place, an embedded member while an
// etcd process holds its data dir.
type probedRuntime struct{ cfg *config.Config }

func (p probedRuntime) Status() runtime.Status {
	if p.cfg.Etcd.Runtime == config.RuntimeStaticPod {
		path := p.cfg.StaticPod.ManifestPath()
		_, err := os.Stat(path)
		return runtime.Status{Running: err == nil, Version: staticpod.ManifestVersion(path)}
	}
	inUse, _ := datadir.InUse(p.cfg.Etcd.DataDir)
	return runtime.Status{Running: inUse}
}

// WouldRestart tells, as the agent's static-pod runtime does, whether the
// manifest in place differs from what the agent renders now: a change the
// agent holds for a member-restart task (node.HeldChange).
func (p probedRuntime) WouldRestart(spec runtime.Spec) (bool, error) {
	if p.cfg.Etcd.Runtime != config.RuntimeStaticPod {
		return false, nil
	}
	data, err := manifest.Render(spec, p.cfg.StaticPod)
	if err != nil {
		return false, err
	}
	return staticpod.ManifestDiffers(p.cfg.StaticPod.ManifestPath(), data)
}

func (probedRuntime) Apply(context.Context, runtime.Spec) error {
	return fmt.Errorf("read-only: the inspector starts nothing")
}
func (probedRuntime) Stop(context.Context) error {
	return fmt.Errorf("read-only: the inspector stops nothing")
}
func (probedRuntime) Close(context.Context) error { return nil }
func (probedRuntime) Changed() <-chan struct{}    { return nil }

// readOnlyStore reads the agent's state and never writes it.
type readOnlyStore struct{ state.Store }

func (readOnlyStore) Save(state.State) error           { return nil }
func (readOnlyStore) SavePromise(*state.Promise) error { return nil }
func (readOnlyStore) SaveRetirement(*state.Retirement) error {
	return fmt.Errorf("read-only: the inspector promises nothing")
}
func (readOnlyStore) SaveWitness(*state.Witness) error { return nil }

// configList is the configuration's list, read on every Refresh. Like
// the agent's list source, it keeps the last list applied in force while
// the list read is rejected.
type configList struct {
	cfg   *config.Config
	addrs []netip.Addr
	err   error
	ok    bool
}

func newConfigList(cfg *config.Config, applied []netip.Addr) *configList {
	return &configList{cfg: cfg, addrs: applied, ok: len(applied) > 0}
}

func (l *configList) Refresh() bool {
	if rules := l.cfg.ListRules(); memberlist.NoCopyYet(rules) {
		l.err = errors.New(memberlist.NoCopyReason(rules))
		return false
	}
	addrs, errs := l.cfg.DesiredMembers()
	if len(errs) > 0 {
		l.err = errs
		return false
	}
	l.addrs, l.ok, l.err = addrs, true, nil
	return true
}

func (l *configList) Current() ([]netip.Addr, bool) { return l.addrs, l.ok }
func (l *configList) Err() error                    { return l.err }
