package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/httpserve"
	"github.com/etcdlet/etcdlet/daemon/node"
)

// listenAgent binds the agent listener and, with agent.listenTLS, makes
// the TLS configuration it serves: https that accepts only clients with a
// certificate signed by its CA (validation requires the CA, and requires
// listenTLS off loopback). nil without listenTLS.
func listenAgent(a config.Agent) (net.Listener, *tls.Config, error) {
	var tlsConfig *tls.Config
	if a.ListenTLS.Enabled() {
		f := a.ListenTLS
		var err error
		tlsConfig, err = transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.CAFile, ClientCertAuth: true}.ServerConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("agent.listenTLS: %w", err)
		}
	}
	l, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("agent.listen %s: %w", a.Listen, err)
	}
	return l, tlsConfig, nil
}

// healthState is what /healthz and /readyz read besides the last pass's
// snapshot: when the loop started and last finished a pass, and whether
// the latest configuration reload was refused. It also keeps the digest
// of the configuration in force, for the reload record.
type healthState struct {
	mu        sync.Mutex
	started   time.Time
	lastPass  time.Time     // when the last pass finished
	lastBegan time.Time     // when it began
	passDone  chan struct{} // closed when the next pass finishes
	configErr error
	inForce   string // config.Config.Digest of the configuration in force
}

// start records the start and the configuration loaded for it.
func (h *healthState) start(t time.Time, digest string) ReloadOutcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started, h.inForce = t, digest
	return ReloadOutcome{At: t.UTC(), InForce: digest, Tried: digest}
}

// passed records a pass that began at began and finished at done.
func (h *healthState) passed(began, done time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastBegan, h.lastPass = began, done
	if h.passDone != nil {
		close(h.passDone)
		h.passDone = nil
	}
}

// awaitPassSince waits until a pass that began at t or later finished,
// and reports whether one did before ctx ended.
func (h *healthState) awaitPassSince(ctx context.Context, t time.Time) bool {
	for {
		h.mu.Lock()
		if !h.lastBegan.Before(t) {
			h.mu.Unlock()
			return true
		}
		if h.passDone == nil {
			h.passDone = make(chan struct{})
		}
		done := h.passDone
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-done:
		}
	}
}

// reloaded records the outcome of a reload of the file content whose
// digest is tried: nil when it was applied, else why it was refused.
func (h *healthState) reloaded(tried string, err error) ReloadOutcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.configErr = err
	if err == nil {
		h.inForce = tried
	}
	o := ReloadOutcome{At: time.Now().UTC(), InForce: h.inForce, Tried: tried}
	if err != nil {
		o.Error = err.Error()
	}
	return o
}

func (h *healthState) read() (started, lastPass time.Time, configErr error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started, h.lastPass, h.configErr
}

// staleAfter is how old the last pass may be before the loop counts as
// stuck: a pass can take a few call timeouts (observe, then re-observe and
// act under the lock), and a settled node passes only every idle
// interval; a loop silent for much longer is wedged.
func staleAfter(a config.Agent) time.Duration {
	return 3*max(a.ReconcileInterval, a.IdleInterval) + 10*a.CallTimeout
}

// serveHTTP serves /metrics, /healthz, /readyz, /pacemaker and /tasks on
// the agent listener (https with client certificates when agent.listenTLS
// is set: see listenAgent).
func (a *Agent) serveHTTP(wg *sync.WaitGroup) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, body := a.alive(time.Now())
		answer(w, ok, body)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		r := a.readyNow(req.Context(), time.Now())
		answer(w, r.Ready, r.Reason)
	})
	if a.pacemaker != nil {
		mux.Handle("GET /pacemaker", a.pacemaker)
	} else {
		mux.HandleFunc("GET /pacemaker", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "pacemaker polling is off (pacemaker.enabled: false)", http.StatusNotFound)
		})
	}
	a.tasks.Routes(mux)
	// Timeouts, so that a slow or idle client cannot hold connections open:
	// every answer here is small and made at once.
	srv := &http.Server{Handler: mux, TLSConfig: a.listenerTLS, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	httpserve.Serve(wg, a.log, "agent HTTP listener", srv, a.listener)
	return srv
}

// alive is /healthz: the loop is alive while passes keep finishing.
func (a *Agent) alive(now time.Time) (bool, string) {
	started, last, _ := a.health.read()
	stale := staleAfter(a.cfg.Agent)
	switch {
	case last.IsZero() && now.Sub(started) > stale:
		return false, fmt.Sprintf("not alive: no reconcile pass finished since the start %s ago (more than %s): the loop is stuck",
			now.Sub(started).Round(time.Second), stale)
	case last.IsZero():
		return false, fmt.Sprintf("starting: no reconcile pass finished yet (started %s ago)", now.Sub(started).Round(time.Millisecond))
	case now.Sub(last) > stale:
		return false, fmt.Sprintf("not alive: the last reconcile pass finished %s ago (more than %s): the loop is stuck",
			now.Sub(last).Round(time.Second), stale)
	}
	return true, fmt.Sprintf("ok: last reconcile pass %s ago", now.Sub(last).Round(time.Millisecond))
}

// readyWait bounds the wait for that pass: kubelet's probes give up after
// a second by default. A pass that takes longer (a cluster that does not
// answer) leaves the answer to the last pass.
const readyWait = 800 * time.Millisecond

// readyNow is /readyz at asked. "Ready" from a pass younger than the
// reconcile interval is answered at once: it is the common case. Any
// other answer is asked again of a pass that begins after the request:
// "not ready", so that /readyz does not lag a change that etcdlet status
// (its own look, made at once) already shows: when the status --wait of a
// rolling restart returns 0, the node's readiness must not say "not
// ready" for up to a reconcile interval more; and an older "ready" (a
// settled node passes only every idle interval), so that a member that
// failed meanwhile is not called ready for longer than it was before the
// loop slowed down. Requests that arrive together share one pass, and
// passes never overlap, so probes cannot pile work up; a pass keeps its
// own delays (a member's restart backoff) whenever it runs.
func (a *Agent) readyNow(ctx context.Context, asked time.Time) node.Readiness {
	r := a.ready(asked)
	if _, last, _ := a.health.read(); r.Ready && asked.Sub(last) < a.cfg.Agent.ReconcileInterval {
		return r
	}
	select {
	case a.fresh <- struct{}{}:
	default: // a pass is already asked for
	}
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	if a.health.awaitPassSince(ctx, asked) {
		return a.ready(time.Now())
	}
	return r
}

// ready is /readyz, judged from the last pass (node.Ready).
func (a *Agent) ready(now time.Time) node.Readiness {
	_, last, configErr := a.health.read()
	return node.Ready(node.ReadyInputs{Passed: !last.IsZero(), Age: now.Sub(last), Stale: staleAfter(a.cfg.Agent),
		ConfigErr: configErr, Last: a.node.Last()})
}

// answer writes a probe's body: 200 when ok, else 503.
func answer(w http.ResponseWriter, ok bool, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, body)
}
