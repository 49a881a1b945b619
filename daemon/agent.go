// Package daemon is the etcdlet agent's composition root: it builds the
// node controller (daemon/node) from real components (the etcd client
// pool, the writer lock, the runtime, the data dir, the state store, the
// members-file watch, the agent peer endpoint), runs it on a timer that
// every event shortens, and serves the agent's HTTP listeners. The
// decisions live in the packages below; this package only wires them.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/certs"
	"github.com/etcdlet/etcdlet/daemon/clusterlist"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/httpserve"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/kube/druid"
	"github.com/etcdlet/etcdlet/daemon/kube/report"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/memberlist"
	"github.com/etcdlet/etcdlet/daemon/memberrestart"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/nodeaddr"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/restore"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/daemon/tasks"
	"github.com/etcdlet/etcdlet/internal/exepages"
	"github.com/etcdlet/etcdlet/systemd"
)

// Agent runs the node controller for one node.
type Agent struct {
	// cfg is the configuration loaded at start. Nothing writes to it:
	// goroutines read it without a lock. Its list rules (members.*,
	// cluster.replicas) are those of the start: a reload replaces them in
	// source, which is where they are read (source.Rules()).
	cfg         *config.Config
	log         *slog.Logger
	version     string // etcdlet's build version, for the log and etcdlet_build_info
	node        *node.Node
	source      *memberlist.Source
	runtime     runtime.Runtime
	guard       *protect.Guard // files etcdlet renders; nil with the embedded runtime
	pool        *etcdclient.Pool
	metrics     *metrics.Metrics
	listener    net.Listener // agent.listen
	listenerTLS *tls.Config  // agent.listenTLS, nil without it
	peerTLS     *tls.Config  // the agent peer endpoint's, nil without peer TLS
	peer        *http.Server // the agent peer endpoint, once the node address is known
	reloads     chan reloadRequest
	fresh       chan struct{}            // /readyz asks for a pass (readyNow)
	beat        heartbeat                // the loop's liveness, for the watchdog
	wakes       *consent.Wakes           // wake-ups from other agents, coalesced
	pacemaker   *pacemaker.Health        // nil unless pacemaker.enabled
	report      *report.Reporting        // the kubernetes section; drops Events without it
	tasks       *tasks.Service           // ops tasks, their schedules and APIs
	certs       *certs.Watch             // the certificate expiry metric
	restarts    *memberrestart.Requests  // member restarts after a renewal, which the loop carries out
	autoRenew   *memberrestart.AutoRenew // nil unless certificates.autoRenew
	rollout     *memberrestart.Rollout   // restarts for the changes the node holds
	restored    state.Restored           // a restore to report at start (Kind "" when none)
	listKeeper  *clusterlist.Keeper      // nil unless members.source cluster
	notifier    *systemd.Notifier
	health      healthState
}

type reloadRequest struct {
	cfg   *config.Config
	reply chan error
}

// New builds an agent from a validated configuration. It binds the
// agent's HTTP listener at once, so a port conflict is a start error
// rather than a log line.
func New(cfg *config.Config, log *slog.Logger, version string) (*Agent, error) {
	// A two-node failover that a crash interrupted after the data dir went
	// aside is finished before anything looks at the data dir.
	if resumed, err := restore.ResumeForced(cfg.Etcd.DataDir); err != nil {
		return nil, fmt.Errorf("finish an interrupted two-node failover: %w", err)
	} else if resumed {
		log.Warn("finished a two-node failover that was interrupted: the forced copy of the member's data is in place", "dataDir", cfg.Etcd.DataDir)
	}
	// So is a restore or a recovery interrupted after its data dir was
	// complete: the node must not start without data, nor on the old.
	if resumed, moved, err := restore.ResumeRestored(restore.SettingsFrom(cfg), time.Now()); err != nil {
		return nil, fmt.Errorf("finish an interrupted restore: %w", err)
	} else if resumed {
		log.Warn("finished a restore that was interrupted: the restored data dir is in place and the agent pinned to its cluster", "dataDir", cfg.Etcd.DataDir, "movedAside", moved)
	}
	c, err := connect(cfg, log)
	if err != nil {
		return nil, err
	}
	store, st, pool := c.store, c.state, c.pool
	restored := takeRestored(store, &st, log)
	peerTLS, err := consent.ServerTLS(cfg.Etcd.TLS.Peer)
	if err != nil {
		pool.Close()
		return nil, err
	}
	m := metrics.New(cfg.Cluster.Name)
	m.SetBuildInfo(version)
	a := &Agent{cfg: cfg, log: log, version: version, pool: pool, metrics: m, peerTLS: peerTLS,
		reloads: make(chan reloadRequest), fresh: make(chan struct{}, 1), wakes: consent.NewWakes(consent.WakeInterval), restored: restored}
	// The list source owns the list rules in force (a reload replaces
	// them there); the keeper of the Etcd resource's list reads them from it.
	a.source = memberlist.New(cfg.ListRules(), log, st.AppliedList())
	host, _ := os.Hostname()
	if a.report, err = report.New(report.SettingsFrom(cfg), a.source.Rules, log, m, host); err != nil {
		pool.Close()
		return nil, err
	}
	events := a.report.Events()
	a.runtime, a.guard = newRuntime(cfg, log, m, events)
	a.report.SetGuard(a.guard)
	a.notifier = systemd.NewNotifier(log)
	a.source.OnReload = func(source string, rejected error) {
		m.ListReloads.WithLabelValues(map[bool]string{true: "accepted", false: "rejected"}[rejected == nil]).Inc()
		if rejected != nil {
			events.Eventf(corev1.EventTypeWarning, kube.ReasonMemberListRefused, "member list (%s) refused, the last good list stays in force: %v", source, rejected)
		}
	}
	deps := node.Deps{
		Settings: node.SettingsFrom(cfg), Log: log, Cluster: pool,
		Locker: &etcdclient.SessionLocker{Pool: pool, TTL: cfg.Agent.LockTTL,
			CallTimeout: cfg.Agent.CallTimeout, Holder: "etcdlet agent"},
		Runtime: a.runtime, DataDir: datadir.Dir{Path: cfg.Etcd.DataDir}, Store: store,
		Peers: c.peers, List: a.source,
		Detect: nodeaddr.Detect, Metrics: m,
		OnChange: a.report.MembershipEvent,
		OnMoveAside: func(to, reason string) {
			events.Eventf(corev1.EventTypeWarning, kube.ReasonDataDirMovedAside, "data dir %s moved aside to %s (kept, not deleted): %s", cfg.Etcd.DataDir, to, reason)
		},
		OnSettled: func() { settled(log, cfg.Agent.IdleInterval) },
	}
	if cfg.Pacemaker.Enabled {
		a.wireTwoNode(&deps, events)
	}
	a.node = node.New(deps, st)
	c.peers.self = func() netip.Addr { return a.node.Self().IP }
	// The tasks' etcd endpoints are the client URLs of the members of the
	// list in force.
	a.tasks, err = tasks.New(tasks.Options{Settings: tasks.SettingsFrom(cfg), Log: log, Pool: pool, Metrics: m, Events: events, Node: host,
		Endpoints: func() []string { return membership.ClientURLs(a.node.Last().Desired) },
		OnSnapshot: func(full bool, lastRevision int64, at time.Time) {
			a.report.SnapshotTaken(druid.Taken{Full: full, LastRevision: lastRevision, At: at})
		}})
	if err != nil {
		pool.Close()
		return nil, err
	}
	a.certs = certs.NewWatch(certs.CertTargets(cfg), log, m)
	a.restarts = memberrestart.NewRequests()
	backups := memberrestart.Backups{Dir: filepath.Join(cfg.Agent.StateDir, "version-changes"), Keep: memberrestart.BackupsKept,
		Client: func() (*clientv3.Client, error) { return pool.NewMulti([]string{a.node.Self().ClientURL}) }}
	a.tasks.Register(memberrestart.Type(memberrestart.Deps{Requests: a.restarts, Self: a.node.Self, Status: pool.Status,
		Files: memberrestart.FilesFrom(cfg), CallTimeout: cfg.Agent.CallTimeout, Served: a.certs.Refresh, Save: backups.Save}))
	a.rollout = &memberrestart.Rollout{Log: log.With("component", "rollout"), Now: time.Now,
		Restart: func(ctx context.Context, params map[string]string) (task.Task, error) {
			return a.tasks.Run(ctx, task.Request{Type: memberrestart.TaskType, Params: params, Source: "held change"})
		}}
	if cfg.Certificates.AutoRenew {
		a.autoRenew = memberrestart.AutoRenewFrom(cfg)
		a.autoRenew.Self, a.autoRenew.Log = a.node.Self, log.With("component", "certificates")
		a.autoRenew.Restart = func(ctx context.Context) (task.Task, error) {
			return a.tasks.Run(ctx, task.Request{Type: memberrestart.TaskType, Source: "certificates.autoRenew"})
		}
	}
	if cfg.Members.Source == config.SourceCluster {
		a.listKeeper = a.newListKeeper(st.ClusterID)
	}
	if cfg.Pacemaker.Enabled {
		plog := log.With("component", "pacemaker")
		collector, err := pacemaker.NewCollector(cfg.Pacemaker, plog)
		if err != nil {
			pool.Close()
			return nil, err
		}
		a.pacemaker = pacemaker.NewHealth(collector, cfg.Pacemaker.Interval, m, plog)
	}
	if a.listener, a.listenerTLS, err = listenAgent(cfg.Agent); err != nil {
		pool.Close()
		return nil, err
	}
	return a, nil
}

// Reload applies a reloaded configuration (see ConfigFile). Only the
// member list source and the list rules can change at run time; any other
// change is refused as a whole, naming the fields, and the running config
// stays.
func (a *Agent) Reload(ctx context.Context, cfg *config.Config) error {
	req := reloadRequest{cfg: cfg, reply: make(chan error, 1)}
	select {
	case a.reloads <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-req.reply
}

// RejectReload records that a reloaded configuration file, whose content
// has the digest tried, was rejected before it reached Reload (it does not
// load or validate): /readyz says so until a reload is applied.
func (a *Agent) RejectReload(tried string, err error) {
	a.reloaded(tried, fmt.Errorf("configuration reload rejected, the running configuration stays in force: %w", err))
}

// Run runs the loop until ctx ends, then stops the local member.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("etcdlet agent starting", "version", a.version, "runtime", a.cfg.Etcd.Runtime,
		"dataDir", a.cfg.Etcd.DataDir, "stateDir", a.cfg.Agent.StateDir, "listen", a.listener.Addr().String(),
		"listenTLS", a.cfg.Agent.ListenTLS.Enabled(), "bootstrap", a.cfg.BootstrapMode())
	// Every start says so, so that an opt-out never goes unnoticed.
	for _, w := range a.cfg.SecurityWarnings() {
		a.log.Warn("insecure configuration: " + w)
	}
	a.record(a.health.start(time.Now(), a.cfg.Digest))
	var wg sync.WaitGroup
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	srv := a.serveHTTP(&wg)
	if a.pacemaker != nil {
		wg.Go(func() {
			a.pacemaker.Run(loopCtx, func(snap pacemaker.Snapshot, built status.Object) {
				a.report.OfferPacemaker(snap, built, a.node.Self().IP)
			})
		})
	}
	a.report.Start(loopCtx, &wg, a.localMember)
	a.reportRestored()
	a.tasks.Start(loopCtx, &wg)
	wg.Go(func() { a.certs.Run(loopCtx) })
	if a.autoRenew != nil {
		wg.Go(func() { a.autoRenew.Run(loopCtx, autoRenewInterval(a.cfg.Agent.ReconcileInterval)) })
	}
	if a.listKeeper != nil {
		wg.Go(func() { a.listKeeper.Run(loopCtx) })
	}
	if a.guard != nil {
		wg.Go(func() {
			if err := a.guard.Run(loopCtx); err != nil {
				a.log.Error("protection of managed files stopped", "error", err)
			}
		})
	}
	wg.Go(func() {
		if err := a.source.Watch(loopCtx); err != nil {
			a.log.Error("members file watch stopped; changes are picked up on each reconcile pass", "error", err)
		}
	})

	if watchdog := systemd.WatchdogInterval(); watchdog > 0 {
		wg.Go(func() { a.feedWatchdog(loopCtx, watchdog) })
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		a.beat.waiting()
		select {
		case <-ctx.Done():
			return a.shutdown(srv, &wg, stop)
		case req := <-a.reloads:
			a.beat.working(time.Now())
			req.reply <- a.applyReload(req.cfg)
		case <-a.source.Changes():
			// At once: no change follows a new list before every agent
			// has posted it, so each posts as soon as it can.
			a.node.Progress()
		case <-a.runtime.Changed():
			a.node.Progress()
		case <-a.wakes.C():
			a.node.Progress()
		case <-a.node.ListsChanged():
			a.node.Progress()
			if d := a.node.YieldToLeader(); d > 0 {
				resetTimer(timer, d)
				continue
			}
		case req := <-a.restarts.C():
			a.beat.working(time.Now())
			a.restartMember(ctx, req)
		case <-a.fresh:
		case <-timer.C:
		}
		a.beat.working(time.Now())
		began := time.Now()
		next := a.node.Pass(ctx)
		a.health.passed(began, time.Now())
		a.rollout.Offer(loopCtx, &wg, a.node.Last().HeldChange)
		a.startPeerEndpoint(&wg)
		if self := a.node.Self(); self.IP.IsValid() {
			a.tasks.StartAPI(&wg, self.IP.String())
		}
		a.notify()
		resetTimer(timer, next)
	}
}

func (a *Agent) shutdown(srv *http.Server, wg *sync.WaitGroup, stop context.CancelFunc) error {
	a.log.Info("etcdlet agent stopping")
	a.notifier.Stopping()
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.node.Close()
	err := a.runtime.Close(ctx)
	_ = srv.Shutdown(ctx)
	a.tasks.Shutdown(ctx)
	if a.peer != nil {
		_ = a.peer.Shutdown(ctx)
	}
	wg.Wait()
	a.report.Stop()
	a.pool.Close()
	if err != nil {
		return fmt.Errorf("stop local member: %w", err)
	}
	return nil
}

// startPeerEndpoint opens the agent peer endpoint on the node address
// once it is known (node.address, or detected among the listed ones).
// Until then other agents find this node silent, which never grants a
// bootstrap. A failure to listen is logged and retried on the next pass.
func (a *Agent) startPeerEndpoint(wg *sync.WaitGroup) {
	self := a.node.Self()
	if a.peer != nil || !self.IP.IsValid() {
		return
	}
	addr := net.JoinHostPort(self.IP.String(), strconv.Itoa(a.cfg.Agent.PeerPort))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		a.log.Error("agent peer endpoint cannot listen; other nodes cannot ask this one about a bootstrap", "address", addr, "error", err)
		return
	}
	guard := consent.NewGuard(a.peerTLS, a.log.With("listener", "agent peer endpoint"))
	a.peer = consent.Server(consent.Handler(consent.Endpoints{Answer: a.node.Answer, Promise: a.node.Promise, Wake: a.wakes.Wake, Data: a.node.Data, Retire: a.retire}, guard), a.peerTLS)
	srv := a.peer
	a.log.Info("agent peer endpoint listening", "address", addr, "tls", a.peerTLS != nil)
	httpserve.Serve(wg, a.log, "agent peer endpoint", srv, l)
}

// retire answers a node that recovers the cluster from its data, and once
// this node promised, looks at once: its member is to stop.
func (a *Agent) retire(caller netip.Addr, req consent.RetireRequest) consent.RetireAnswer {
	answer := a.node.Retire(caller, req)
	if answer.Retired {
		a.metrics.RecoverySteps.WithLabelValues(metrics.RecoveryRetired).Inc()
		a.report.Events().Eventf(corev1.EventTypeWarning, kube.ReasonMemberRetired,
			"promised %s not to start this node's member of cluster %s again: %s recovers that cluster from its data; this node's data goes aside (kept) and it joins the recovered cluster once it answers there",
			req.By, req.Cluster, req.By)
		a.wakes.Wake()
	}
	return answer
}

// localMember is what the local member says about itself, for the member
// Lease: nothing while it is not running, and nothing when it answers for
// another cluster than the one this node belongs to (a data dir from
// elsewhere): a Lease must never vouch for a foreign cluster.
func (a *Agent) localMember(ctx context.Context) (druid.LocalMember, error) {
	s := a.node.Last()
	switch {
	case !s.Self.IP.IsValid():
		return druid.LocalMember{}, errors.New("this node's address is not known yet")
	case !s.Runtime.Running:
		return druid.LocalMember{}, errors.New("the local member is not running")
	}
	st, err := a.pool.Status(ctx, s.Self.ClientURL)
	if err != nil {
		return druid.LocalMember{}, fmt.Errorf("the local member does not answer: %w", err)
	}
	h := st.GetHeader()
	if s.Pinned != 0 && h.GetClusterId() != s.Pinned {
		return druid.LocalMember{}, fmt.Errorf("the local member answers for cluster %x, this node belongs to %x", h.GetClusterId(), s.Pinned)
	}
	if st.IsLearner {
		return druid.LocalMember{}, errors.New("the local member is a learner, not yet a voting member")
	}
	return druid.LocalMember{IP: s.Self.IP, MemberID: h.GetMemberId(), ClusterID: h.GetClusterId(), Leader: st.Leader == h.GetMemberId()}, nil
}

// notify tells systemd that the loop is alive, what the agent is doing,
// and (once) that it is ready: the local member's decision was carried out
// (its manifest is in place, or the embedded member started), or there is
// nothing to run yet (no member list or node address yet, not listed,
// waiting to be added, refusing). The kubelet is ordered after READY=1, so
// READY=1 must never wait on something only the kubelet can provide: the
// member list is often a ConfigMap volume that the kubelet mounts, and a
// missing or rejected list (decision kind "") is therefore ready once the
// source was read. A members file that is there but still settling is not
// "missing": its first read comes within moments, and the manifest with it.
func (a *Agent) notify() {
	snap := a.node.Last()
	status := statusLine(a.cfg.Cluster.Name, snap)
	switch snap.Decision.Kind {
	case "":
		if a.source.Read() {
			a.notifier.Ready(status)
		}
	case localmember.Idle, localmember.Wait, localmember.Refuse:
		a.notifier.Ready(status)
	default:
		if a.node.Applied() {
			a.notifier.Ready(status)
		}
	}
	a.notifier.Status(status)
}

// statusLine summarises the agent's state for systemctl status. It says
// what `etcdlet status` says of the same look (statusreport.FromSnapshot):
// the cluster's reach comes before the plan, so that a cluster without
// quorum, or one not founded yet, never reads as "matches the list".
func statusLine(cluster string, s node.Snapshot) string {
	switch {
	case !s.ListOK:
		return "ready, nothing to run: no member list yet"
	case s.SelfErr != nil:
		return "ready, nothing to run: cannot tell which member is this node (set node.address)"
	case s.Decision.Kind == "":
		return "ready, nothing to run yet"
	}
	r := statusreport.FromSnapshot(cluster, s)
	line := "local member: " + string(s.Decision.Kind)
	if s.Decision.Reason != "" && s.Decision.Kind != localmember.Keep {
		line += " (" + s.Decision.Reason + ")"
	}
	switch {
	case !r.Answered:
		return line + "; cluster unreachable: no member answered"
	case !r.Reached:
		return line + "; no quorum: members answer, but not a majority of the voters agree"
	case r.Converged:
		return line + "; membership matches the list"
	case r.Plan.Next != "":
		return line + "; next: " + r.Plan.Next
	case len(r.Plan.Waiting) > 0:
		return line + "; waiting: " + r.Plan.Waiting[0]
	}
	return line + "; membership does not match the list yet"
}

// autoRenewInterval is how often the served certificates are looked at:
// six reconcile intervals, between 10 s and a minute. A renewal is due
// weeks ahead; the interval only bounds how late after a refusal or a
// start it is noticed.
func autoRenewInterval(reconcile time.Duration) time.Duration {
	return min(max(6*reconcile, 10*time.Second), time.Minute)
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// settled says that the agent slows to its idle pace, and gives back what
// it no longer uses: the pages of its executable that starting and the
// last change touched (exepages), and the heap's free pages, which the
// runtime would otherwise return only over minutes.
func settled(log *slog.Logger, idle time.Duration) {
	debug.FreeOSMemory()
	released, err := exepages.Release()
	if err != nil {
		log.Warn("cannot give back the executable's pages", "error", err)
	}
	log.Info("node settled: a pass every agent.idleInterval until something changes", "idleInterval", idle.String(), "releasedKiB", released>>10)
}
