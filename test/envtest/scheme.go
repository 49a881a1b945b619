package envtest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/etcdlet/etcdlet/daemon/kube"
)

// NewScheme is the tests' scheme: the agent's own (kube.NewScheme:
// Events, Leases, OpenShift's etcd.openshift.io v1 and v1alpha1
// PacemakerCluster, etcd-druid's druid.gardener.cloud v1alpha1) plus
// client-go's built-in types, which tests create (namespaces, pods, RBAC)
// and the agent does not link. Both PacemakerCluster versions are
// registered even though a control plane serves only one of them, so a
// test can pick the version at run time.
func NewScheme() (*runtime.Scheme, error) {
	s, err := kube.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add client-go's types to the scheme: %w", err)
	}
	return s, nil
}
