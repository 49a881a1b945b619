package test

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/etcdlet/etcdlet/test/envtest"
)

// access is one request an identity may or may not make.
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	return a.verb + " " + r + " " + a.namespace + "/" + a.name
}

// checkAccess asks the API server's authorizer, as an administrator,
// whether user may make each request: the shipped RBAC must allow exactly
// what the agent does and refuse what it must never do.
func checkAccess(t *testing.T, env *envtest.Env, user string, allowed, denied []access) {
	t.Helper()
	ask := func(a access) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource,
				Subresource: a.subresource, Namespace: a.namespace, Name: a.name},
		}}
		if err := env.Client.Create(t.Context(), sar); err != nil {
			t.Fatalf("SubjectAccessReview %s: %v", a, err)
		}
		return sar.Status.Allowed
	}
	for _, a := range allowed {
		if !ask(a) {
			t.Errorf("%s may not %s, but the agent needs it", user, a)
		}
	}
	for _, a := range denied {
		if ask(a) {
			t.Errorf("%s may %s: more than the agent needs", user, a)
		}
	}
}

// The permissions of deploy/rbac/etcd-druid.yaml: the agent's calls, and
// nothing of what it must never do (Etcd.status is druid's, other Etcds
// are not its business, secrets and pods not at all). The Etcd is only
// listed and watched by name (druid.EtcdWatcher), never got; of the
// Leases only the two snapshot Leases are read, by name. Patch and
// create on Leases cannot be limited by name in RBAC: which Leases the
// agent may write is the admission policies' business
// (rbac_policy_test.go). The Etcd's ServiceAccount also gets druid's own
// Role once druid reconciles the Etcd; this checks the shipped Role alone.
func druidAccess(ns string) (allowed, denied []access) {
	const druid, coord = "druid.gardener.cloud", "coordination.k8s.io"
	allowed = []access{
		{"list", druid, "etcds", "", ns, "etcd-main"},
		{"watch", druid, "etcds", "", ns, "etcd-main"},
		{"patch", coord, "leases", "", ns, "etcd-main-192.0.2.1"},
		{"create", coord, "leases", "", ns, ""},
		{"get", coord, "leases", "", ns, "etcd-main-full-snap"},
		{"get", coord, "leases", "", ns, "etcd-main-delta-snap"},
		{"create", "", "events", "", ns, ""},
		{"patch", "", "events", "", ns, "x"},
	}
	denied = []access{
		{"get", druid, "etcds", "", ns, "etcd-main"},
		{"update", druid, "etcds", "status", ns, "etcd-main"},
		{"patch", druid, "etcds", "status", ns, "etcd-main"},
		{"update", druid, "etcds", "", ns, "etcd-main"},
		{"patch", druid, "etcds", "", ns, "etcd-main"},
		{"delete", druid, "etcds", "", ns, "etcd-main"},
		{"get", druid, "etcds", "", ns, "etcd-events"},
		{"list", druid, "etcds", "", ns, ""},
		{"delete", coord, "leases", "", ns, "etcd-main-192.0.2.1"},
		{"get", coord, "leases", "", ns, "etcd-main-192.0.2.1"},
		{"get", coord, "leases", "", ns, "kube-controller-manager"},
		{"list", coord, "leases", "", ns, ""},
		{"update", coord, "leases", "", ns, "kube-controller-manager"},
		{"get", coord, "leases", "", "default", "etcd-main-192.0.2.1"},
		{"get", "", "secrets", "", ns, "etcd-ca"},
		{"list", "", "secrets", "", ns, ""},
		{"create", "", "pods", "", ns, ""},
		{"delete", "", "events", "", ns, "x"},
		{"create", druid, "etcdopstasks", "", ns, ""},
	}
	return allowed, denied
}

// The permissions of deploy/rbac/pacemakercluster.yaml.
func pacemakerAccess() (allowed, denied []access) {
	const group = "etcd.openshift.io"
	allowed = []access{
		{"get", group, "pacemakerclusters", "", "", "cluster"},
		{"create", group, "pacemakerclusters", "", "", ""},
		{"update", group, "pacemakerclusters", "status", "", "cluster"},
		{"patch", group, "pacemakerclusters", "", "", "cluster"},
		{"create", "", "events", "", "default", ""},
		{"patch", "", "events", "", "default", "x"},
	}
	denied = []access{
		{"update", group, "pacemakerclusters", "", "", "cluster"},
		{"patch", group, "pacemakerclusters", "", "", "other"},
		{"delete", group, "pacemakerclusters", "", "", "cluster"},
		{"update", group, "pacemakerclusters", "status", "", "other"},
		{"list", group, "pacemakerclusters", "", "", ""},
		{"get", "", "secrets", "", "openshift-etcd", "x"},
		{"create", "", "events", "", "openshift-etcd", ""},
		{"get", "druid.gardener.cloud", "etcds", "", "kube-system", "etcd-main"},
	}
	return allowed, denied
}
