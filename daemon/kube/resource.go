package kube

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// API is what etcdlet asks of the API server about one resource (Leases,
// the Etcd resource, the PacemakerCluster, Events): the calls it makes,
// typed by the objects passed in. Resource implements it on the wire;
// tests wrap one to inject failures.
type API interface {
	// Get reads the object key names into into.
	Get(ctx context.Context, key types.NamespacedName, into runtime.Object) error
	// Create creates obj in namespace ("" for a cluster-scoped resource)
	// as fieldManager, and reads what the server stored back into obj.
	Create(ctx context.Context, namespace string, obj runtime.Object, fieldManager string) error
	// Update replaces the object key names with obj (optimistic: obj's
	// resourceVersion must be current) and reads the result back into obj.
	Update(ctx context.Context, key types.NamespacedName, obj runtime.Object, fieldManager string) error
	// UpdateStatus is Update on the status subresource.
	UpdateStatus(ctx context.Context, key types.NamespacedName, obj runtime.Object, fieldManager string) error
	// Patch sends data as a patch of type pt and reads the result into
	// into.
	Patch(ctx context.Context, key types.NamespacedName, pt types.PatchType, data []byte, fieldManager string, into runtime.Object) error
	// List reads the objects opts select in namespace into into (a list
	// type).
	List(ctx context.Context, namespace string, opts metav1.ListOptions, into runtime.Object) error
	// Watch watches the objects opts select in namespace.
	Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// Resource is one resource of one API group and version, reached through
// a REST client for that group-version, with etcdlet's own scheme: only
// the types it reads and writes are registered, so nothing else of
// client-go's API groups is linked or registered at start.
type Resource struct {
	client     rest.Interface
	codec      runtime.ParameterCodec
	name       string // plural, lower-case: "leases"
	namespaced bool
}

var _ API = Resource{}

// collection is a request of verb to the resource in namespace.
func (r Resource) collection(verb func() *rest.Request, namespace string) *rest.Request {
	return verb().NamespaceIfScoped(namespace, r.namespaced).Resource(r.name)
}

// request is a request of verb to the object key names.
func (r Resource) request(verb func() *rest.Request, key types.NamespacedName) *rest.Request {
	return r.collection(verb, key.Namespace).Name(key.Name)
}

// Get implements API.
func (r Resource) Get(ctx context.Context, key types.NamespacedName, into runtime.Object) error {
	return r.request(r.client.Get, key).Do(ctx).Into(into)
}

// Create implements API.
func (r Resource) Create(ctx context.Context, namespace string, obj runtime.Object, fieldManager string) error {
	return r.collection(r.client.Post, namespace).
		VersionedParams(&metav1.CreateOptions{FieldManager: fieldManager}, r.codec).
		Body(obj).Do(ctx).Into(obj)
}

// Update implements API.
func (r Resource) Update(ctx context.Context, key types.NamespacedName, obj runtime.Object, fieldManager string) error {
	return r.request(r.client.Put, key).VersionedParams(&metav1.UpdateOptions{FieldManager: fieldManager}, r.codec).
		Body(obj).Do(ctx).Into(obj)
}

// UpdateStatus implements API.
func (r Resource) UpdateStatus(ctx context.Context, key types.NamespacedName, obj runtime.Object, fieldManager string) error {
	return r.request(r.client.Put, key).SubResource("status").
		VersionedParams(&metav1.UpdateOptions{FieldManager: fieldManager}, r.codec).
		Body(obj).Do(ctx).Into(obj)
}

// Patch implements API.
func (r Resource) Patch(ctx context.Context, key types.NamespacedName, pt types.PatchType, data []byte, fieldManager string, into runtime.Object) error {
	return r.request(func() *rest.Request { return r.client.Patch(pt) }, key).
		VersionedParams(&metav1.PatchOptions{FieldManager: fieldManager}, r.codec).
		Body(data).Do(ctx).Into(into)
}

// List implements API.
func (r Resource) List(ctx context.Context, namespace string, opts metav1.ListOptions, into runtime.Object) error {
	return r.collection(r.client.Get, namespace).VersionedParams(&opts, r.codec).Do(ctx).Into(into)
}

// Watch implements API.
func (r Resource) Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.collection(r.client.Get, namespace).VersionedParams(&opts, r.codec).Watch(ctx)
}

// IsResourceMissing reports whether err says the API server does not
// serve the resource at all (its CRD is not installed), not that the
// object is missing. For an object the server answers with a Status
// naming it; for a resource it does not serve, with a bare 404 page, which
// client-go reports as an unexpected response (or a Status naming no
// object).
func IsResourceMissing(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	if d == nil || d.Name == "" {
		return true
	}
	for _, c := range d.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return true
		}
	}
	return false
}
