package daemon

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/manifest"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod"
)

// newRuntime builds the configured runtime; the static-pod runtime writes
// through a protection guard, which the agent runs.
func newRuntime(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, events kube.Recorder) (runtime.Runtime, *protect.Guard) {
	if cfg.Etcd.Runtime != config.RuntimeStaticPod {
		return embedded.New(log), nil
	}
	guard := protect.New(protect.Options{
		Enabled:  cfg.Protection.On(),
		Interval: cfg.Protection.Interval,
		Log:      log.With("component", "protection"),
		OptOut:   func(_ string, onDisk []byte) bool { return manifest.OptsOut(onDisk) },
		OnChange: func(c protect.Change) {
			m.ProtectedFileChanges.WithLabelValues(c.Path, string(c.Action)).Inc()
			if c.Action != protect.Allowed {
				events.Eventf(corev1.EventTypeWarning, kube.ReasonProtectionReverted, "%s: a change made by someone else was %s", c.Path, c.Action)
			}
		},
	})
	return staticpod.New(cfg.StaticPod, cfg.Agent.StateDir, guard, log), guard
}
