package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// pacemakerHealth polls pacemaker in its own goroutine (a slow or hung
// crm_mon never delays membership) and keeps the latest health model: the
// snapshot and the PacemakerCluster status built from it, which carries
// lastTransitionTime from one poll to the next.
type pacemakerHealth struct {
	collector *pacemaker.Collector

	mu       sync.Mutex
	snapshot pacemaker.Snapshot
	built    status.Object
	buildErr error
}

// Latest returns the last snapshot and the status built from it (nil, with
// the reason, when pacemaker's state is unknown or nothing was polled yet).
func (p *pacemakerHealth) Latest() (pacemaker.Snapshot, status.Object, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshot, p.built, p.buildErr
}

func (a *Agent) runPacemaker(ctx context.Context) {
	p := a.pacemaker
	interval := a.cfg.Pacemaker.Interval
	for {
		snap := p.collector.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		prev := p.built
		p.mu.Unlock()
		built, err := p.collector.Build(snap, prev, time.Now())
		if err != nil && !errors.Is(err, pacemaker.ErrUnknown) {
			a.log.Error("pacemaker status not built", "error", err)
		}
		// Metrics first, then /pacemaker: whoever sees the new object
		// finds the metrics already agreeing with it.
		a.recordPacemaker(snap, built, err)
		if err != nil {
			built = nil
		}
		a.report.offerPacemaker(snap, built, a.node.Self().IP)
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
		case <-time.After(interval):
		}
	}
}

func (a *Agent) recordPacemaker(snap pacemaker.Snapshot, obj status.Object, err error) {
	m := a.metrics
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

// servePacemaker is GET /pacemaker: the PacemakerCluster object as etcdlet
// would write it, or 503 with the reason.
func (a *Agent) servePacemaker(w http.ResponseWriter, _ *http.Request) {
	if a.pacemaker == nil {
		http.Error(w, "pacemaker polling is off (pacemaker.enabled: false)", http.StatusNotFound)
		return
	}
	snap, obj, err := a.pacemaker.Latest()
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
