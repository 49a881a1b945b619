package envtest

import (
	"context"
	"fmt"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// warmUp waits until every object and type a test is likely to touch first
// is served, retrying each request until ctx ends.
//
// Why: envtest returns once the CRDs are Established, but the first request
// to a fresh CR type can take a second or more on the server and fail in
// the client while discovery catches up; and kube-system and the
// system-node-critical priority class (which static pods use) are created by
// kube-apiserver's post-start hooks, not necessarily before envtest returns.
func warmUp(ctx context.Context, c client.Client, opts Options) error {
	type check struct {
		what string
		do   func(context.Context) error
	}
	checks := []check{
		{"namespace kube-system", func(ctx context.Context) error {
			return c.Get(ctx, client.ObjectKey{Name: "kube-system"}, &corev1.Namespace{})
		}},
		{"priority class system-node-critical", func(ctx context.Context) error {
			return c.Get(ctx, client.ObjectKey{Name: "system-node-critical"}, &schedulingv1.PriorityClass{})
		}},
	}
	switch opts.PacemakerCluster {
	case PacemakerV1:
		checks = append(checks, check{"list etcd.openshift.io/v1 PacemakerClusters", func(ctx context.Context) error {
			return c.List(ctx, &etcdv1.PacemakerClusterList{})
		}})
	case PacemakerV1alpha1:
		checks = append(checks, check{"list etcd.openshift.io/v1alpha1 PacemakerClusters", func(ctx context.Context) error {
			return c.List(ctx, &etcdv1alpha1.PacemakerClusterList{})
		}})
	}
	if opts.DruidEtcd {
		checks = append(checks, check{"list druid.gardener.cloud/v1alpha1 Etcds", func(ctx context.Context) error {
			return c.List(ctx, &druidv1alpha1.EtcdList{})
		}})
	}

	for _, ch := range checks {
		var last error
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			last = ch.do(ctx)
			return last == nil, nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w (last error: %v)", ch.what, err, last)
		}
	}
	return nil
}
