package pacemaker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// Health polls pacemaker in its own goroutine (a slow or hung crm_mon
// never delays membership) and keeps the latest health model: the
// snapshot and the PacemakerCluster status built from it, which carries
// lastTransitionTime from one poll to the next. It keeps the pacemaker
// metrics current and serves the latest status (ServeHTTP).
type Health struct {
	collector *Collector
	interval  time.Duration
	metrics   *metrics.Metrics
	log       *slog.Logger

	mu       sync.Mutex
	snapshot Snapshot
	built    status.Object
	buildErr error
}

// Latest returns the last snapshot and the status built from it (nil, with
// the reason, when pacemaker's state is unknown or nothing was polled yet).
func (p *Health) Latest() (Snapshot, status.Object, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshot, p.built, p.buildErr
}

// NewHealth polls through collector every interval once it runs.
func NewHealth(collector *Collector, interval time.Duration, m *metrics.Metrics, log *slog.Logger) *Health {
	return &Health{collector: collector, interval: interval, metrics: m, log: log}
}

// Run polls until ctx ends. After each poll it hands the snapshot, and
// the status built from it (nil while pacemaker's state is unknown), to
// offer, which must not block.
func (p *Health) Run(ctx context.Context, offer func(Snapshot, status.Object)) {
	for {
		snap := p.collector.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		prev := p.built
		p.mu.Unlock()
		built, err := p.collector.Build(snap, prev, time.Now())
		if err != nil && !errors.Is(err, ErrUnknown) {
			p.log.Error("pacemaker status not built", "error", err)
		}
		// Metrics first, then /pacemaker: whoever sees the new object
		// finds the metrics already agreeing with it.
		p.record(snap, built, err)
		if err != nil {
			built = nil
		}
		offer(snap, built)
		p.mu.Lock()
		p.snapshot = snap
		if err == nil {
			p.built, p.buildErr = built, nil
		} else {
			// Keep the last good status for lastTransitionTime, but do not
			// serve it as current.
			p.buildErr = err
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.interval):
		}
	}
}

// record sets the pacemaker metrics from a poll.
func (p *Health) record(snap Snapshot, obj status.Object, err error) {
	m := p.metrics
	result := "known"
	if !snap.Known {
		result = "unknown"
	}
	m.PacemakerPolls.WithLabelValues(result).Inc()
	m.PacemakerPollDuration.Observe(snap.Duration.Seconds())
	m.PacemakerKnown.Set(map[bool]float64{true: 1, false: 0}[snap.Known && err == nil])
	m.PacemakerCondition.Reset()
	if err != nil {
		return
	}
	st, _, err := status.FromObject(obj)
	if err != nil {
		return
	}
	set := func(node, resource string, conds []metav1.Condition) {
		for _, c := range conds {
			v := -1.0
			switch c.Status {
			case metav1.ConditionTrue:
				v = 1
			case metav1.ConditionFalse:
				v = 0
			}
			m.PacemakerCondition.WithLabelValues(node, resource, c.Type).Set(v)
		}
	}
	set("", "", st.Conditions)
	for _, n := range st.Nodes {
		set(n.Name, "", n.Conditions)
		for _, r := range n.Resources {
			set(n.Name, r.Name, r.Conditions)
		}
		for _, f := range n.FencingAgents {
			set(n.Name, f.Name, f.Conditions)
		}
	}
}

// ServeHTTP is the agent's GET /pacemaker: the PacemakerCluster object as
// etcdlet would write it, or 503 with the reason.
func (p *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	snap, obj, err := p.Latest()
	switch {
	case snap.Time.IsZero():
		http.Error(w, "pacemaker not polled yet", http.StatusServiceUnavailable)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(obj)
	}
}
