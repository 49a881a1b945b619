package envtest

import (
	"fmt"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme returns a scheme with client-go's built-in types, OpenShift's
// etcd.openshift.io v1 and v1alpha1 (PacemakerCluster) and etcd-druid's
// druid.gardener.cloud v1alpha1 (Etcd, EtcdOpsTask, ...). Both PacemakerCluster
// versions are registered even though a control plane serves only one of
// them, so a test can pick the version at run time.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []struct {
		name    string
		install func(*runtime.Scheme) error
	}{
		{"client-go", clientgoscheme.AddToScheme},
		{"etcd.openshift.io/v1", etcdv1.Install},
		{"etcd.openshift.io/v1alpha1", etcdv1alpha1.Install},
		{"druid.gardener.cloud/v1alpha1", druidv1alpha1.AddToScheme},
	} {
		if err := add.install(s); err != nil {
			return nil, fmt.Errorf("add %s types to the scheme: %w", add.name, err)
		}
	}
	return s, nil
}
