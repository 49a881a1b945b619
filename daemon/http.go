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
)

// listenAgent binds the agent listener. With agent.listenTLS it serves
// https and accepts only clients with a certificate signed by its CA
// (validation requires the CA, and requires listenTLS off loopback).
func listenAgent(a config.Agent) (net.Listener, error) {
	l, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return nil, fmt.Errorf("agent.listen %s: %w", a.Listen, err)
	}
	if !a.ListenTLS.Enabled() {
		return l, nil
	}
	f := a.ListenTLS
	tlsConfig, err := transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.CAFile, ClientCertAuth: true}.ServerConfig()
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("agent.listenTLS: %w", err)
	}
	return tls.NewListener(l, tlsConfig), nil
}

// healthState is what /healthz reports: the loop is alive when a pass
// finished recently.
type healthState struct {
	mu       sync.Mutex
	lastPass time.Time
}

func (h *healthState) passed(t time.Time) {
	h.mu.Lock()
	h.lastPass = t
	h.mu.Unlock()
}

func (h *healthState) since() (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastPass.IsZero() {
		return 0, false
	}
	return time.Since(h.lastPass), true
}

// serveHTTP serves /metrics, /healthz, /pacemaker and /tasks on the agent listener
// (https with client certificates when agent.listenTLS is set: see
// listenAgent).
func (a *Agent) serveHTTP(wg *sync.WaitGroup) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{}))
	// A pass can take a few call timeouts (observe, then re-observe and
	// act under the lock); a loop silent for much longer is wedged.
	stale := 3*a.cfg.Agent.ReconcileInterval + 10*a.cfg.Agent.CallTimeout
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		age, ok := a.health.since()
		switch {
		case !ok:
			http.Error(w, "no reconcile pass finished yet", http.StatusServiceUnavailable)
		case age > stale:
			http.Error(w, fmt.Sprintf("last reconcile pass finished %s ago", age.Round(time.Second)), http.StatusServiceUnavailable)
		default:
			fmt.Fprintf(w, "ok: last reconcile pass %s ago\n", age.Round(time.Millisecond))
		}
	})
	mux.HandleFunc("GET /pacemaker", a.servePacemaker)
	a.tasks.taskRoutes(mux, a.token)
	// Timeouts, so that a slow or idle client cannot hold connections open:
	// every answer here is small and made at once.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	wg.Go(func() {
		if err := srv.Serve(a.listener); err != nil && err != http.ErrServerClosed {
			a.log.Error("agent HTTP listener stopped", "error", err)
		}
	})
	return srv
}
