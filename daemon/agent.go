// Package daemon is the etcdlet agent: one level-triggered loop that, on
// every pass, reads the desired member list, observes the cluster, decides
// about the local member, and lets the membership reconciler make at most
// one change. Each concern lives in its own sub-package; this package only
// wires them together.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/memberlist"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/systemd"
)

// Agent runs the reconcile loop for one node.
type Agent struct {
	cfg        *config.Config
	log        *slog.Logger
	scheme     identity.Scheme
	source     *memberlist.Source
	runtime    runtime.Runtime
	pool       *etcdclient.Pool
	observer   *membership.Observer
	reconciler *membership.Reconciler
	store      state.Store
	state      state.State
	metrics    *metrics.Metrics
	listener   net.Listener
	reloads    chan reloadRequest
	pacemaker  *pacemakerHealth // nil unless pacemaker.enabled
	notifier   *systemd.Notifier
	guard      *protect.Guard // files etcdlet renders; nil with the embedded runtime

	// Loop-owned bookkeeping.
	self         identity.Member
	lastMembers  []membership.Member
	logged       map[string]string // logOnce: category -> last key
	stale        []uint64
	seenExits    uint64    // runtime exit count already accounted for
	exits        int       // consecutive failed starts and exits of the local member
	restartAfter time.Time // no restart before this (crash-loop backoff)
	settling     int       // passes since the last progress, for settle()
	applied      bool      // the local decision was carried out once (for READY)
	local        localmember.Decision
	plan         membership.Plan

	health healthState
}

type reloadRequest struct {
	cfg   *config.Config
	reply chan error
}

// New builds an agent from a validated configuration and a runtime. It
// binds the agent's HTTP listener at once, so a port conflict is a start
// error rather than a log line.
func New(cfg *config.Config, log *slog.Logger) (*Agent, error) {
	store := state.Store{Dir: cfg.Agent.StateDir}
	st, err := store.Load()
	if err != nil {
		return nil, err
	}
	pool, err := etcdclient.NewPool(cfg.ClientTLS(), cfg.Agent.CallTimeout)
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	a := &Agent{
		cfg: cfg, log: log, scheme: identity.SchemeFrom(cfg), pool: pool,
		store: store, state: st, metrics: m, reloads: make(chan reloadRequest), logged: map[string]string{},
	}
	a.runtime, a.guard = newRuntime(cfg, log, m)
	a.notifier = systemd.NewNotifier(log)
	a.source = memberlist.New(cfg, log, parseAddrs(st.LastAppliedList))
	a.source.OnReload = func(accepted bool) {
		a.metrics.ListReloads.WithLabelValues(map[bool]string{true: "accepted", false: "rejected"}[accepted]).Inc()
	}
	a.observer = &membership.Observer{Pool: pool, Timeout: cfg.Agent.CallTimeout, Scheme: a.scheme}
	a.reconciler = &membership.Reconciler{
		Pool: pool, Observer: a.observer, Log: log,
		LockKey: "/etcdlet/" + cfg.Cluster.Name + "/membership-lock",
		LockTTL: cfg.Agent.LockTTL,
		// A change is retried for about a second under the lock: long
		// enough for a learner that just started to catch up.
		Policy: etcdclient.Policy{Attempts: 6, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
			Jitter: 0.3, AttemptTimeout: cfg.Agent.CallTimeout},
		OnChange: func(act membership.Action, r etcdclient.Result) {
			m.MembershipChanges.WithLabelValues(string(act.Kind), string(r.Outcome)).Inc()
		},
	}
	if cfg.Pacemaker.Enabled {
		collector, err := pacemaker.NewCollector(cfg.Pacemaker, log.With("component", "pacemaker"))
		if err != nil {
			pool.Close()
			return nil, err
		}
		a.pacemaker = &pacemakerHealth{collector: collector}
	}
	if a.listener, err = net.Listen("tcp", cfg.Agent.Listen); err != nil {
		pool.Close()
		return nil, fmt.Errorf("agent.listen %s: %w", cfg.Agent.Listen, err)
	}
	return a, nil
}

// Reload applies a reloaded configuration (SIGHUP). Only the member list
// source and the list rules can change at run time; any other change is
// refused as a whole, naming the fields, and the running config stays.
func (a *Agent) Reload(ctx context.Context, cfg *config.Config) error {
	req := reloadRequest{cfg: cfg, reply: make(chan error, 1)}
	select {
	case a.reloads <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-req.reply
}

// Run runs the loop until ctx ends, then stops the local member.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("etcdlet agent starting", "cluster", a.cfg.Cluster.Name, "runtime", a.cfg.Etcd.Runtime,
		"dataDir", a.cfg.Etcd.DataDir, "stateDir", a.cfg.Agent.StateDir, "listen", a.listener.Addr().String())
	var wg sync.WaitGroup
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	srv := a.serveHTTP(&wg)
	if a.pacemaker != nil {
		wg.Go(func() { a.runPacemaker(loopCtx) })
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

	watchdog := systemd.WatchdogInterval()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return a.shutdown(srv, &wg, stop)
		case req := <-a.reloads:
			req.reply <- a.applyReload(req.cfg)
		case <-a.source.Changes():
			a.settling = 0
		case <-a.runtime.Changed():
			a.settling = 0
		case <-timer.C:
		}
		next := a.pass(ctx)
		a.notify()
		if watchdog > 0 {
			next = min(next, watchdog)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

func (a *Agent) shutdown(srv interface{ Shutdown(context.Context) error }, wg *sync.WaitGroup, stop context.CancelFunc) error {
	a.log.Info("etcdlet agent stopping")
	a.notifier.Stopping()
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.reconciler.Close()
	err := a.runtime.Close(ctx)
	_ = srv.Shutdown(ctx)
	wg.Wait()
	a.pool.Close()
	if err != nil {
		return fmt.Errorf("stop local member: %w", err)
	}
	return nil
}

// pass runs one reconcile pass and returns when the next should run.
func (a *Agent) pass(ctx context.Context) time.Duration {
	start := time.Now()
	defer func() {
		a.metrics.ReconcilePasses.Inc()
		a.metrics.ReconcileDuration.Observe(time.Since(start).Seconds())
		a.health.passed(time.Now())
	}()
	interval := a.cfg.Agent.ReconcileInterval

	// The watch reacts at once; this re-read catches what a watch can miss
	// (a file that existed before the watch, a directory replaced).
	a.source.Refresh()
	addrs, ok := a.source.Current()
	if !ok {
		if err := a.source.Err(); err != nil {
			a.logOnce("list", err.Error(), slog.LevelWarn, "waiting for a valid member list", "error", err)
		} else {
			// Not read yet: the file was being written; the next pass reads it.
			a.logOnce("list", "", slog.LevelDebug, "waiting for the members file to settle before the first read")
		}
		return a.settle()
	}
	a.rememberList(addrs)
	desired := a.scheme.ForAll(addrs)
	a.metrics.DesiredMembers.Set(float64(len(desired)))
	if err := a.resolveSelf(addrs); err != nil {
		a.logOnce("self", err.Error(), slog.LevelError, "cannot tell which member is this node", "error", err)
		return interval
	}

	view := a.observer.Observe(ctx, membership.Endpoints(desired, a.lastMembers, a.self.ClientURL))
	a.recordView(view)
	a.pool.Retain(membership.Endpoints(desired, a.lastMembers, a.self.ClientURL))
	requeue := a.reconcileLocal(ctx, desired, view)

	if view.Reached {
		res, err := a.reconciler.Step(ctx, desired, view, a.stale)
		a.recordPlan(res.Plan)
		switch {
		case err != nil:
			a.log.Warn("membership step failed", "error", err)
			requeue = min(requeue, a.settle())
		case res.Busy:
			a.metrics.WriterLockBusy.Inc()
			requeue = min(requeue, a.settle())
		case res.Acted != nil && res.Result.Outcome == etcdclient.Done:
			a.settling = 0
			requeue = min(requeue, a.settle()) // the next step may be ready at once
		case res.Acted != nil || waitsFor(res.Plan, membership.WaitLearnerNotStarted):
			requeue = min(requeue, a.settle())
		}
	} else {
		a.recordPlan(membership.Plan{})
	}
	return min(requeue, interval)
}

// notify tells systemd that the loop is alive, what the agent is doing,
// and (once) that it is ready: the local member's decision was carried out
// (its manifest is in place, or the embedded member started), or there is
// nothing to run yet (not listed, waiting to be added, refusing). The
// kubelet is ordered after READY=1.
func (a *Agent) notify() {
	a.notifier.Watchdog()
	status := a.statusLine()
	switch a.local.Kind {
	case localmember.Idle, localmember.Wait, localmember.Refuse:
		a.notifier.Ready(status)
	default:
		if a.applied {
			a.notifier.Ready(status)
		}
	}
	a.notifier.Status(status)
}

// statusLine summarises the agent's state for systemctl status.
func (a *Agent) statusLine() string {
	if a.local.Kind == "" {
		return "starting: no member list or node address yet"
	}
	line := "local member: " + string(a.local.Kind)
	if a.local.Reason != "" && a.local.Kind != localmember.Keep {
		line += " (" + a.local.Reason + ")"
	}
	switch {
	case a.plan.Next != nil:
		line += "; next: " + a.plan.Next.String()
	case len(a.plan.Waiting) > 0:
		line += "; waiting: " + a.plan.Waiting[0].String()
	default:
		line += "; membership matches the list"
	}
	return line
}

// settle is how soon to look again while something is in motion (a join,
// a change being retried, another writer at work): fast at first, then
// slowing to the reconcile interval, so a join completes quickly but a
// state that persists (a learner whose host is down) is not polled hard.
// Progress (a list change, a change done, the local member started or
// stopped) makes it fast again.
func (a *Agent) settle() time.Duration {
	d := time.Duration(float64(100*time.Millisecond) * math.Pow(1.5, float64(a.settling)))
	a.settling++
	return min(d, a.cfg.Agent.ReconcileInterval)
}

func waitsFor(p membership.Plan, reason membership.WaitReason) bool {
	return slices.ContainsFunc(p.Waiting, func(w membership.Wait) bool { return w.Reason == reason })
}

// resolveSelf fixes this node's member identity for the agent's lifetime:
// node.address, or the one local address among the listed ones and the
// address used before a restart.
func (a *Agent) resolveSelf(listed []netip.Addr) error {
	if a.self.IP.IsValid() {
		return nil
	}
	ip, detected, err := NodeAddress(a.cfg, listed, a.state)
	if err != nil {
		return err
	}
	if detected {
		a.log.Info("detected node address", "address", ip.String())
	}
	a.self = a.scheme.For(ip)
	a.log = a.log.With("self", a.self.Name)
	if a.state.SelfAddress != ip.String() {
		a.state.SelfAddress = ip.String()
		a.saveState()
	}
	return nil
}

func (a *Agent) rememberList(addrs []netip.Addr) {
	list := make([]string, len(addrs))
	for i, ip := range addrs {
		list[i] = ip.String()
	}
	if !slices.Equal(list, a.state.LastAppliedList) {
		a.state.LastAppliedList = list
		a.saveState()
	}
}

func (a *Agent) recordView(v membership.View) {
	reachable := 0.0
	if v.Reached {
		reachable = 1
		a.logged["view"] = "reached"
		a.lastMembers = v.Members
		voters, healthy := v.Voters()
		a.metrics.Members.WithLabelValues("voter").Set(float64(voters))
		a.metrics.Members.WithLabelValues("learner").Set(float64(len(v.Members) - voters))
		a.metrics.HealthyVoters.Set(float64(healthy))
	} else {
		a.logOnce("view", fmt.Sprint(v.Established), slog.LevelInfo, "cluster not reachable with quorum", "established", v.Established, "problems", v.Problems)
	}
	a.metrics.ClusterReachable.Set(reachable)
}

func (a *Agent) recordPlan(p membership.Plan) {
	a.plan = p
	a.metrics.PlanWaiting.Reset()
	for _, w := range p.Waiting {
		a.metrics.PlanWaiting.WithLabelValues(string(w.Reason)).Inc()
	}
	key := fmt.Sprint(p.Waiting)
	if len(p.Waiting) == 0 {
		a.logged["plan"] = ""
	} else {
		a.logOnce("plan", key, slog.LevelInfo, "membership changes waiting", "waiting", waitStrings(p.Waiting))
	}
}

// logOnce logs a message only when its key differs from the previous key
// of the same category, so a condition that persists across passes is
// logged once, when it starts or changes.
func (a *Agent) logOnce(category, key string, level slog.Level, msg string, attrs ...any) {
	if prev, ok := a.logged[category]; ok && prev == key {
		return
	}
	a.logged[category] = key
	a.log.Log(context.Background(), level, msg, attrs...)
}

func (a *Agent) saveState() {
	if err := a.store.Save(a.state); err != nil {
		a.log.Error("cannot persist agent state", "error", err)
	}
}

func parseAddrs(list []string) []netip.Addr {
	var addrs []netip.Addr
	for _, s := range list {
		if ip, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, ip)
		}
	}
	return addrs
}

func waitStrings(ws []membership.Wait) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}
