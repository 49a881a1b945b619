package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/restore"
)

// bootIDFile is the kernel's random ID of the current boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// wireTwoNode gives the node controller what the two-node failover needs
// (daemon/twonode): pacemaker's latest view, the host's boot ID, and the
// forced recovery of the stopped member's data dir.
func (a *Agent) wireTwoNode(deps *node.Deps, events kube.Recorder) {
	cfg, log := a.cfg, a.log
	deps.Pacemaker = func() (*model.Cluster, string) {
		if a.pacemaker == nil {
			return nil, "pacemaker is not polled"
		}
		snap, _, _ := a.pacemaker.Latest()
		// A poll older than two intervals and a command timeout is no
		// view of now: the poller is stuck, or the agent just started.
		stale := 2*cfg.Pacemaker.Interval + cfg.Pacemaker.CommandTimeout
		switch {
		case snap.Time.IsZero():
			return nil, "not polled yet"
		case !snap.Known:
			return nil, snap.Reason
		case time.Since(snap.Time) > stale:
			return nil, fmt.Sprintf("the last poll is %s old", time.Since(snap.Time).Round(time.Second))
		}
		return snap.Cluster, ""
	}
	deps.BootID = bootID
	deps.ForceAlone = func(ctx context.Context, name string) (string, uint64, error) {
		return restore.ForceAlone(ctx, cfg.Etcd.DataDir, name, log, time.Now())
	}
	deps.OnForcedAlone = func(reason string) {
		events.Eventf(corev1.EventTypeWarning, kube.ReasonMemberForcedAlone, "this node's member runs alone, from its own data: %s", reason)
	}
}

// inspectTwoNode lets etcdlet status say what the two-node failover would
// do: pacemaker is polled once per look, and the failover itself is
// refused (the inspector changes nothing).
func inspectTwoNode(cfg *config.Config, deps *node.Deps, log *slog.Logger) error {
	collector, err := pacemaker.NewCollector(cfg.Pacemaker, log)
	if err != nil {
		return err
	}
	deps.Pacemaker = func() (*model.Cluster, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*cfg.Pacemaker.CommandTimeout)
		defer cancel()
		snap := collector.Poll(ctx)
		if !snap.Known {
			return nil, snap.Reason
		}
		return snap.Cluster, ""
	}
	deps.BootID = bootID
	deps.ForceAlone = func(context.Context, string) (string, uint64, error) {
		return "", 0, errors.New("read-only: the inspector fails nothing over")
	}
	return nil
}

// bootID is the host's boot ID; "" when it cannot be read, which is never
// the one a witness recorded.
func bootID() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
