package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
	manifest "github.com/etcdlet/etcdlet/daemon/staticpod"
)

// SpecFor is the spec the local member runs with under a decision, and
// false when the decision runs no member. A member keeps (and restarts
// with) the initial-cluster values it was first started with, so its
// static-pod manifest stays byte-identical and the kubelet does not
// restart etcd; etcd ignores them once it has a WAL anyway.
func SpecFor(cfg *config.Config, self identity.Member, d localmember.Decision, st state.State) (runtime.Spec, bool) {
	initial, clusterState := d.InitialCluster, d.ClusterState
	switch d.Kind {
	case localmember.Keep, localmember.Restart:
		if st.InitialCluster != "" {
			initial, clusterState = st.InitialCluster, st.InitialClusterState
		} else if d.Kind == localmember.Keep {
			// Started by an etcdlet that did not record them.
			initial, clusterState = identity.InitialCluster([]identity.Member{self}), runtime.StateExisting
		}
	case localmember.Bootstrap, localmember.Join:
	default:
		return runtime.Spec{}, false
	}
	return runtime.BuildSpec(cfg, self, initial, clusterState), true
}

// Preview returns, read-only, the spec the local member would run with now:
// it reads the state dir and the data dir and observes the cluster, as a
// reconcile pass does, but changes nothing.
func Preview(ctx context.Context, cfg *config.Config) (runtime.Spec, error) {
	st, err := state.Store{Dir: cfg.Agent.StateDir}.Load()
	if err != nil {
		return runtime.Spec{}, err
	}
	addrs, errs := cfg.DesiredMembers()
	if len(errs) > 0 {
		return runtime.Spec{}, fmt.Errorf("member list:\n%w", errs)
	}
	ip, _, err := NodeAddress(cfg, addrs, st)
	if err != nil {
		return runtime.Spec{}, err
	}
	scheme := identity.SchemeFrom(cfg)
	self, desired := scheme.For(ip), scheme.ForAll(addrs)
	pool, err := etcdclient.NewPool(cfg.ClientTLS(), cfg.Agent.CallTimeout)
	if err != nil {
		return runtime.Spec{}, err
	}
	defer pool.Close()
	observer := &membership.Observer{Pool: pool, Timeout: cfg.Agent.CallTimeout, Scheme: scheme}
	view := observer.Observe(ctx, membership.Endpoints(desired, nil, self.ClientURL))
	hasData, err := datadir.HasWAL(cfg.Etcd.DataDir)
	if err != nil {
		return runtime.Spec{}, err
	}
	// A static pod runs while its manifest is in place; an embedded member
	// runs if the cluster hears from it.
	var running bool
	if cfg.Etcd.Runtime == config.RuntimeStaticPod {
		_, err := os.Stat(filepath.Join(cfg.StaticPod.ManifestDir, manifest.ManifestFile))
		running = err == nil
	} else {
		_, running = view.Answering(self.PeerURL)
	}
	d := localmember.Decide(localmember.Inputs{
		Cluster: cfg.Cluster.Name, Self: self, Desired: desired, InList: slices.Contains(addrs, ip),
		Running: running, HasData: hasData, LocalID: parseID(st.MemberID),
		KnownClusterID: parseID(st.ClusterID), WasMember: st.WasMember, View: view,
	})
	spec, ok := SpecFor(cfg, self, d, st)
	if !ok {
		return runtime.Spec{}, fmt.Errorf("no member runs on this node now: %s: %s", d.Kind, d.Reason)
	}
	return spec, nil
}
