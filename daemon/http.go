package daemon

import (
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
// the latest configuration reload was refused.
type healthState struct {
	mu        sync.Mutex
	started   time.Time
	lastPass  time.Time
	configErr error
}

func (h *healthState) start(t time.Time) {
	h.mu.Lock()
	h.started = t
	h.mu.Unlock()
}

func (h *healthState) passed(t time.Time) {
	h.mu.Lock()
	h.lastPass = t
	h.mu.Unlock()
}

// reloaded records the outcome of a configuration reload: nil when it was
// applied, else why it was refused.
func (h *healthState) reloaded(err error) {
	h.mu.Lock()
	h.configErr = err
	h.mu.Unlock()
}

func (h *healthState) read() (started, lastPass time.Time, configErr error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started, h.lastPass, h.configErr
}

// staleAfter is how old the last pass may be before the loop counts as
// stuck: a pass can take a few call timeouts (observe, then re-observe and
// act under the lock); a loop silent for much longer is wedged.
func staleAfter(a config.Agent) time.Duration { return 3*a.ReconcileInterval + 10*a.CallTimeout }

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
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		r := a.ready(time.Now())
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
