package kube_test

import (
	"testing"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	etcdv1 "github.com/openshift/api/etcd/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	"github.com/etcdlet/etcdlet/test/envtest"
)

// A real API server answers 404 both for an object that does not exist
// and for a resource it does not serve (a CRD not installed); the agent
// tells an operator which one it is.
func TestAMissingResourceIsToldFromAMissingObject(t *testing.T) {
	env := envtest.Start(t, envtest.Options{})
	c := env.AgentClients(t)
	key := types.NamespacedName{Namespace: "kube-system", Name: "etcd-main"}

	err := c.Leases.Get(t.Context(), key, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) || kube.IsResourceMissing(err) {
		t.Errorf("a Lease that does not exist: %v (resource missing: %v), want an object not found", err, kube.IsResourceMissing(err))
	}
	if err := c.Etcds.Get(t.Context(), key, &druidv1alpha1.Etcd{}); !kube.IsResourceMissing(err) {
		t.Errorf("an Etcd without etcd-druid's CRD: %v, want the resource missing", err)
	}
	pcs, err := c.PacemakerClusters(status.VersionV1)
	if err != nil {
		t.Fatal(err)
	}
	if err := pcs.Get(t.Context(), types.NamespacedName{Name: status.ObjectName}, &etcdv1.PacemakerCluster{}); !kube.IsResourceMissing(err) {
		t.Errorf("a PacemakerCluster without its CRD: %v, want the resource missing", err)
	}
}
