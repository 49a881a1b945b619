package kube

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	"github.com/go-logr/logr"
	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcdlet/etcdlet/config"
)

// UserAgent names etcdlet in the API server's audit log.
const UserAgent = "etcdlet"

// Clients reach the API server with the configured kubeconfig.
type Clients struct {
	// Client reads and writes Leases, the Etcd resource and the
	// PacemakerCluster (its scheme has those types), and watches.
	Client client.WithWatch
	// Core sends Events (client-go's event recorder needs a clientset).
	Core kubernetes.Interface
	// Scheme is Client's.
	Scheme *runtime.Scheme
	calls  *atomic.Int64
}

// Calls returns how many HTTP requests the clients sent to the API server
// (for the benchmark's API calls per minute, and metrics).
func (c *Clients) Calls() int64 { return c.calls.Load() }

// NewScheme has the types etcdlet reads and writes: client-go's built-in
// ones, etcd-druid's druid.gardener.cloud/v1alpha1 and OpenShift's
// etcd.openshift.io v1 and v1alpha1.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []struct {
		name    string
		install func(*runtime.Scheme) error
	}{
		{"client-go", clientgoscheme.AddToScheme},
		{"druid.gardener.cloud/v1alpha1", druidv1alpha1.AddToScheme},
		{"etcd.openshift.io/v1", etcdv1.Install},
		{"etcd.openshift.io/v1alpha1", etcdv1alpha1.Install},
	} {
		if err := add.install(s); err != nil {
			return nil, fmt.Errorf("add %s types to the scheme: %w", add.name, err)
		}
	}
	return s, nil
}

// NewClients loads the kubeconfig of k (LoadKubeconfig: refused when it
// would run or trust what someone other than root can change) and builds
// the clients, rate limited by k.QPS and k.Burst. No request is sent here:
// the API server may well be away when the agent starts. Per-call timeouts
// are set by the callers' contexts (kubernetes.callTimeout), not on the
// transport, which would also cut the long-running watch of the Etcd
// resource.
func NewClients(k config.Kubernetes) (*Clients, error) {
	kc, err := LoadKubeconfig(k.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig refused:\n%w", err)
	}
	rc, err := restConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", k.Kubeconfig, err)
	}
	return NewClientsFor(rc, k)
}

// NewClientsFor builds the clients from a rest config (tests).
func NewClientsFor(rc *rest.Config, k config.Kubernetes) (*Clients, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = k.QPS, k.Burst
	rc.UserAgent = UserAgent
	calls := &atomic.Int64{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, calls: calls} })
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes clientset: %w", err)
	}
	return &Clients{Client: c, Core: core, Scheme: scheme, calls: calls}, nil
}

type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.calls.Add(1)
	return t.next.RoundTrip(r)
}

// SetLogger sends the log output of the libraries underneath (client-go's
// klog, controller-runtime's logr) to log. Without it controller-runtime
// prints a warning with a stack trace to stderr after 30 seconds.
func SetLogger(log *slog.Logger) {
	klog.SetSlogLogger(log)
	crlog.SetLogger(logr.FromSlogHandler(log.Handler()))
}
