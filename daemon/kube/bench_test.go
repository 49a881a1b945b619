package kube_test

// make bench runs these against a real kube-apiserver (KUBEBUILDER_ASSETS):
//
//	go test -run '^$' -bench PacemakerChange -benchtime 50x ./daemon/kube/
//	go test -run '^$' -bench SteadyState -benchtime 1x ./daemon/kube/

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/kube/druid"
	"github.com/etcdlet/etcdlet/daemon/kube/pacemakercluster"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	"github.com/etcdlet/etcdlet/test/envtest"
)

var discard = slog.New(slog.DiscardHandler)

func init() { kube.SetLogger(discard) }

func clients(b *testing.B, env *envtest.Env, k config.Kubernetes) *kube.Clients {
	c, err := kube.NewClientsFor(env.Config, k)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func pacemakerClusters(b *testing.B, c *kube.Clients) kube.API {
	r, err := c.PacemakerClusters(status.VersionV1)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// A pacemaker change reaching the API server: the CIB changes (healthy
// and standby fixtures in turn, so crm_mon's output differs every time),
// then one poll (the real crm_mon), the build and one write by the DC's
// writer, until the API server stored the new status. The floor is
// crm_mon's own run time in the same loop: the ratio is what etcdlet adds
// to the tool it cannot avoid.
func BenchmarkPacemakerChangeToAPIServer(b *testing.B) {
	env := envtest.Start(b, envtest.Options{PacemakerCluster: envtest.PacemakerV1})
	var fixtures [2][]byte
	for i, name := range []string{"healthy", "standby"} {
		data, err := os.ReadFile(filepath.Join("..", "pacemaker", "testdata", "cib", name+".xml"))
		if err != nil {
			b.Fatal(err)
		}
		fixtures[i] = data
	}
	cib := filepath.Join(b.TempDir(), "cib.xml")
	opts := config.DefaultPacemaker()
	opts.Enabled, opts.CIBFile = true, cib
	collector, err := pacemaker.NewCollector(opts, discard)
	if err != nil {
		b.Fatal(err)
	}
	// Without the client's rate limit: the agent makes one change per poll
	// (15s), which never reaches it; a tight loop would measure the limit.
	c := clients(b, env, config.Kubernetes{QPS: 1000, Burst: 1000})
	w, err := pacemakercluster.New(pacemakercluster.Options{Client: pacemakerClusters(b, c), Version: status.VersionV1, NodeName: "master-0",
		Tracker: kube.NewTracker("PacemakerCluster", nil, nil), Log: discard})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	// The first write creates the singleton and claims it: not a change.
	var prev status.Object
	if err := os.WriteFile(cib, fixtures[1], 0o600); err != nil {
		b.Fatal(err)
	}
	if prev, err = collector.Build(collector.Poll(ctx), nil, time.Now()); err != nil {
		b.Fatal(err)
	}
	if _, err := w.SyncOnce(ctx, pacemakercluster.Input{Built: prev, IsDC: true}); err != nil {
		b.Fatal(err)
	}
	var crmMon time.Duration
	b.ResetTimer()
	for i := range b.N {
		if err := os.WriteFile(cib, fixtures[i%2], 0o600); err != nil {
			b.Fatal(err)
		}
		snap := collector.Poll(ctx)
		crmMon += snap.Duration
		built, err := collector.Build(snap, prev, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if result, err := w.SyncOnce(ctx, pacemakercluster.Input{Built: built, IsDC: true}); err != nil || result != kube.ResultWritten {
			b.Fatalf("change %d: %s, %v; want it written", i, result, err)
		}
		prev = built
	}
	b.StopTimer()
	total := b.Elapsed()
	b.ReportMetric(float64(crmMon.Nanoseconds())/float64(b.N), "crm_mon-ns/op")
	b.ReportMetric(float64(total)/float64(crmMon), "x-crm_mon")
}

// API calls per minute of one agent at steady state, with the default
// intervals: the member Lease (heartbeat 10s), the Etcd resource's list and
// watch, and the PacemakerCluster status as its writer and as standby
// (refresh 30s), each counted at the client's transport over a window of
// real time (ETCDLET_BENCH_WINDOW, default 1m) after a warm-up.
func BenchmarkSteadyStateAPICalls(b *testing.B) {
	window := time.Minute
	if v := os.Getenv("ETCDLET_BENCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("ETCDLET_BENCH_WINDOW=%q: %v", v, err)
		}
		window = d
	}
	env := envtest.Start(b, envtest.Options{PacemakerCluster: envtest.PacemakerV1, DruidEtcd: true})
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "default"},
		Spec: druidv1alpha1.EtcdSpec{Labels: map[string]string{"app": "etcd"}, Replicas: 1, ExternallyManagedMemberAddresses: []string{"192.0.2.1"}}}
	if err := env.Client.Create(ctx, etcd); err != nil {
		b.Fatal(err)
	}
	built := healthyStatus(b)

	measure := map[string]func(*kube.Clients) func(context.Context){
		"lease": func(c *kube.Clients) func(context.Context) {
			r := &druid.LeaseRenewer{Leases: c.Leases, Namespace: "default", EtcdName: "etcd-main", CallTimeout: 10 * time.Second,
				Tracker: kube.NewTracker("lease", nil, nil), Log: discard, Now: time.Now,
				Local: func(context.Context) (druid.LocalMember, error) {
					return druid.LocalMember{IP: netip.MustParseAddr("192.0.2.1"), MemberID: 0x5fc4137847488191, ClusterID: 0x4f3833aed765c9b9}, nil
				}}
			w := &druid.EtcdWatcher{Etcds: c.Etcds, Key: types.NamespacedName{Namespace: "default", Name: "etcd-main"}, CallTimeout: 10 * time.Second,
				Tracker: kube.NewTracker("etcd", nil, nil), Log: discard, Now: time.Now, OnEtcd: r.OnEtcd}
			return func(ctx context.Context) {
				go w.Run(ctx)
				r.Run(ctx)
			}
		},
		"pacemakercluster-writer":  writerLoop(built, true),
		"pacemakercluster-standby": writerLoop(built, false),
	}
	for _, name := range []string{"lease", "pacemakercluster-writer", "pacemakercluster-standby"} {
		c := clients(b, env, config.Kubernetes{QPS: config.DefaultKubernetesQPS, Burst: config.DefaultKubernetesBurst})
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); measure[name](c)(runCtx) }()
		time.Sleep(2 * time.Second) // warm-up: the first list, create and claim are not steady state
		before := c.Calls()
		time.Sleep(window)
		calls := c.Calls() - before
		stop()
		<-done
		b.ReportMetric(float64(calls)/window.Minutes(), name+"-calls/min")
	}
}

func writerLoop(built status.Object, dc bool) func(*kube.Clients) func(context.Context) {
	return func(c *kube.Clients) func(context.Context) {
		node := "master-1"
		if dc {
			node = "master-0"
		}
		pcs, err := c.PacemakerClusters(status.VersionV1)
		if err != nil {
			panic(err)
		}
		w, err := pacemakercluster.New(pacemakercluster.Options{Client: pcs, Version: status.VersionV1, NodeName: node,
			Tracker: kube.NewTracker("PacemakerCluster", nil, nil), Log: discard})
		if err != nil {
			panic(err)
		}
		return func(ctx context.Context) {
			// The agent offers every poll (15s); the writer decides when to
			// call the API.
			go w.Run(ctx)
			for {
				w.Offer(pacemakercluster.Input{Built: built, IsDC: dc})
				select {
				case <-ctx.Done():
					return
				case <-time.After(config.DefaultPacemakerInterval):
				}
			}
		}
	}
}

// healthyStatus builds the status of the healthy fixture with the real
// crm_mon.
func healthyStatus(b *testing.B) status.Object {
	opts := config.DefaultPacemaker()
	cib, err := filepath.Abs(filepath.Join("..", "pacemaker", "testdata", "cib", "healthy.xml"))
	if err != nil {
		b.Fatal(err)
	}
	opts.Enabled, opts.CIBFile = true, cib
	collector, err := pacemaker.NewCollector(opts, discard)
	if err != nil {
		b.Fatal(err)
	}
	built, err := collector.Build(collector.Poll(b.Context()), nil, time.Now())
	if err != nil {
		b.Fatal(fmt.Errorf("build the healthy fixture's status: %w", err))
	}
	return built
}
