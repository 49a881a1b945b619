package envtest

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/etcdlet/etcdlet/daemon/kube"
)

// NewScheme is the agent's own scheme (kube.NewScheme): client-go's types,
// OpenShift's etcd.openshift.io v1 and v1alpha1 (PacemakerCluster) and
// etcd-druid's druid.gardener.cloud v1alpha1 (Etcd, EtcdOpsTask, ...). Both
// PacemakerCluster versions are registered even though a control plane
// serves only one of them, so a test can pick the version at run time.
func NewScheme() (*runtime.Scheme, error) { return kube.NewScheme() }
