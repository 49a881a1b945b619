package daemon

import (
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// takeRestored returns the restore or recovery that etcdlet restore or
// recover recorded in st and no agent reported yet, and marks it
// reported. It is marked before it is reported: an agent that dies in
// between loses an Event, never repeats one at every start.
func takeRestored(store state.Store, st *state.State, log *slog.Logger) state.Restored {
	r := st.Restored
	if r == nil || r.Reported {
		return state.Restored{}
	}
	taken := *r
	r.Reported = true
	if err := store.Save(*st); err != nil {
		log.Warn("cannot record that the restore was reported; the next start reports it again", "error", err)
	}
	return taken
}

// reportRestored says, once, that this agent starts on a cluster a
// restore or a recovery made here: a Warning Event, the log, and
// etcdlet_recovery_steps_total.
func (a *Agent) reportRestored() {
	r := a.restored
	if r.Kind == "" {
		return
	}
	step, reason, what := metrics.RecoveryRestored, kube.ReasonClusterRestored, "etcdlet restore restored the cluster from snapshots"
	if r.Kind == state.RecoveredFromData {
		step, reason, what = metrics.RecoveryRecovered, kube.ReasonClusterRecovered, "etcdlet recover recovered the cluster from this node's data"
	}
	msg := fmt.Sprintf("%s on this node at %s: new cluster %s, this node its only member, at revision %d (marked compacted); the other listed nodes join it as new members",
		what, r.At.UTC().Format(time.RFC3339), r.ClusterID, r.Revision)
	if r.MovedAside != "" {
		msg += "; the data dir it replaced is kept at " + r.MovedAside
	}
	a.log.Warn("starting on a cluster restored on this node", "kind", r.Kind, "at", r.At.UTC().Format(time.RFC3339), "clusterID", r.ClusterID,
		"revision", r.Revision, "movedAside", r.MovedAside)
	a.metrics.RecoverySteps.WithLabelValues(step).Inc()
	a.report.Events().Eventf(corev1.EventTypeWarning, reason, "%s", msg)
}
