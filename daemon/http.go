package daemon

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

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

// serveHTTP serves /metrics, /healthz and /pacemaker on the agent listener.
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	wg.Go(func() {
		if err := srv.Serve(a.listener); err != nil && err != http.ErrServerClosed {
			a.log.Error("agent HTTP listener stopped", "error", err)
		}
	})
	return srv
}
