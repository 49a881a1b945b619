package kube

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/etcdlet/etcdlet/config"
)

// UserAgent names etcdlet in the API server's audit log.
const UserAgent = "etcdlet"

// Clients reach the API server with the configured kubeconfig, one
// Resource per kind of object etcdlet reads or writes. They share one
// HTTP client and one rate limiter (k.QPS, k.Burst).
type Clients struct {
	// Leases are coordination.k8s.io/v1 leases: the member Leases druid
	// reads.
	Leases Resource
	// Etcds are etcd-druid's druid.gardener.cloud/v1alpha1 Etcd resources.
	Etcds Resource
	// Events are v1 events.
	Events Resource
	// Scheme has the types of these resources and nothing else.
	Scheme            *runtime.Scheme
	pacemakerClusters map[string]Resource
	calls             *atomic.Int64
}

// PacemakerClusters returns OpenShift's etcd.openshift.io PacemakerCluster
// resource of version (status.VersionV1 or VersionV1alpha1): a control
// plane serves one of them, kubernetes.pacemaker.apiVersion says which.
func (c *Clients) PacemakerClusters(version string) (Resource, error) {
	r, ok := c.pacemakerClusters[version]
	if !ok {
		return Resource{}, fmt.Errorf("unknown PacemakerCluster API version %q (want v1 or v1alpha1)", version)
	}
	return r, nil
}

// Calls returns how many HTTP requests the clients sent to the API server
// (for the benchmark's API calls per minute, and metrics).
func (c *Clients) Calls() int64 { return c.calls.Load() }

// NewScheme has the types etcdlet reads and writes, and only those:
// v1 (Events), coordination.k8s.io/v1 (Leases), etcd-druid's
// druid.gardener.cloud/v1alpha1 and OpenShift's etcd.openshift.io v1 and
// v1alpha1. client-go's scheme of every built-in API group is not linked:
// registering it alone cost the agent megabytes at start, configured or
// not.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []struct {
		name    string
		install func(*runtime.Scheme) error
	}{
		{"v1", corev1.AddToScheme},
		{"coordination.k8s.io/v1", coordinationv1.AddToScheme},
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
	rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(k.QPS, k.Burst)
	rc.UserAgent = UserAgent
	calls := &atomic.Int64{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, calls: calls} })
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	b := resourceBuilder{rc: rc, http: httpClient, codecs: serializer.NewCodecFactory(scheme), params: runtime.NewParameterCodec(scheme)}
	c := &Clients{Scheme: scheme, calls: calls, pacemakerClusters: map[string]Resource{}}
	for _, r := range []struct {
		into       *Resource
		gv         schema.GroupVersion
		name       string
		namespaced bool
	}{
		{&c.Leases, coordinationv1.SchemeGroupVersion, "leases", true},
		{&c.Etcds, druidv1alpha1.SchemeGroupVersion, "etcds", true},
		{&c.Events, corev1.SchemeGroupVersion, "events", true},
	} {
		if *r.into, err = b.resource(r.gv, r.name, r.namespaced); err != nil {
			return nil, err
		}
	}
	for _, gv := range []schema.GroupVersion{etcdv1.GroupVersion, etcdv1alpha1.GroupVersion} {
		if c.pacemakerClusters[gv.Version], err = b.resource(gv, "pacemakerclusters", false); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// resourceBuilder makes the REST client of each group-version over one
// HTTP client and rate limiter.
type resourceBuilder struct {
	rc     *rest.Config
	http   *http.Client
	codecs serializer.CodecFactory
	params runtime.ParameterCodec
}

func (b resourceBuilder) resource(gv schema.GroupVersion, name string, namespaced bool) (Resource, error) {
	rc := rest.CopyConfig(b.rc)
	rc.GroupVersion = &gv
	rc.APIPath = "/apis"
	if gv.Group == "" {
		rc.APIPath = "/api"
	}
	rc.NegotiatedSerializer = b.codecs.WithoutConversion()
	rc.ContentType = runtime.ContentTypeJSON
	client, err := rest.RESTClientForConfigAndClient(rc, b.http)
	if err != nil {
		return Resource{}, fmt.Errorf("kubernetes client for %s %s: %w", gv, name, err)
	}
	return Resource{client: client, codec: b.params, name: name, namespaced: namespaced}, nil
}

type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.calls.Add(1)
	return t.next.RoundTrip(r)
}

// SetLogger sends the log output of client-go (klog) to log.
func SetLogger(log *slog.Logger) { klog.SetSlogLogger(log) }
