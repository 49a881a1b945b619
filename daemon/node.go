package daemon

import (
	"log/slog"
	"net/netip"
	"slices"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/nodeaddr"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod"
	"github.com/etcdlet/etcdlet/daemon/state"
	manifest "github.com/etcdlet/etcdlet/daemon/staticpod"
)

// NodeAddress is this host's member IP: node.address, or the one local
// address among the listed ones and the one used before a restart (so a
// node that left the list still knows its member). detected says it was
// found through netlink.
func NodeAddress(cfg *config.Config, listed []netip.Addr, st state.State) (ip netip.Addr, detected bool, err error) {
	if cfg.Node.Address != "" {
		return netip.MustParseAddr(cfg.Node.Address), false, nil // validated
	}
	candidates := slices.Clone(listed)
	if prev, err := netip.ParseAddr(st.SelfAddress); err == nil && !slices.Contains(candidates, prev) {
		candidates = append(candidates, prev)
	}
	ip, err = nodeaddr.Detect(candidates)
	return ip, err == nil, err
}

// newRuntime builds the configured runtime; the static-pod runtime writes
// through a protection guard, which the agent runs.
func newRuntime(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (runtime.Runtime, *protect.Guard) {
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
		},
	})
	return staticpod.New(cfg.StaticPod, cfg.Agent.StateDir, guard, log), guard
}
