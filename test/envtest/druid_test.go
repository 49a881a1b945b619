package envtest

import (
	"context"
	"strings"
	"testing"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkDruidEtcd checks that Start installed the CEL variant of druid's Etcd
// CRD, through the rule etcdlet relies on: externally managed member
// addresses must match the replica count.
func checkDruidEtcd(t *testing.T, env *Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()

	etcd := func(name string, addrs ...string) *druidv1alpha1.Etcd {
		return &druidv1alpha1.Etcd{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: druidv1alpha1.EtcdSpec{
				Labels:                           map[string]string{"app": "etcd"},
				Replicas:                         3,
				ExternallyManagedMemberAddresses: addrs,
			},
		}
	}
	ok := etcd("etcd-main", "192.0.2.1", "192.0.2.2", "192.0.2.3")
	if err := env.Client.Create(ctx, ok); err != nil {
		t.Fatalf("create Etcd with 3 replicas and 3 member addresses: %v", err)
	}
	got := &druidv1alpha1.Etcd{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ok), got); err != nil {
		t.Fatalf("get Etcd: %v", err)
	}
	if len(got.Spec.ExternallyManagedMemberAddresses) != 3 {
		t.Errorf("stored Etcd has member addresses %v, want the 3 written", got.Spec.ExternallyManagedMemberAddresses)
	}

	const mismatch = "externallyManagedMemberAddresses length must equal"
	err := env.Client.Create(ctx, etcd("etcd-short", "192.0.2.1", "192.0.2.2"))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), mismatch) {
		t.Errorf("create Etcd with 3 replicas and 2 member addresses: %v, want Invalid containing %q", err, mismatch)
	}
}
