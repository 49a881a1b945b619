package campaign

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// The list sources a campaign draws from: the members file of each host,
// or etcd-druid's Etcd on a real kube-apiserver.
const (
	SourceFile     = "file"
	SourceResource = "etcd-resource"
)

// The Etcd the agents read, and the identity they read it with: the
// Etcd's own ServiceAccount, bound by the shipped RBAC manifest.
const (
	etcdNamespace = "kube-system"
	etcdName      = "etcd-main"
	agentIdentity = "system:serviceaccount:kube-system:etcd-main"
)

// kube is the Kubernetes side of a campaign whose list is the Etcd's
// spec.externallyManagedMemberAddresses. druid's CEL rules allow that list
// to grow (with spec.replicas) or to be edited in place, never to shrink
// (replicas may not go down but to 0) nor to hold an address twice: the
// campaign's list changes keep to that, as an operator must.
type kube struct {
	env *envtest.Env
	key client.ObjectKey
}

// startKube starts a kube-apiserver with druid's CRDs, applies the shipped
// RBAC for the agents, creates the Etcd listing hosts list, and makes the
// API server reachable inside every host's namespace at the address of its
// kubeconfig (its loopback): the path from a host to its API server is not
// what the network faults cut; the API server's restarts are a fault of
// their own. It returns the agents' kubernetes section.
func (cp *campaign) startKube(dir string, list []int) (*kube, string) {
	t := cp.t
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	env.Apply(t, filepath.Join(harness.RepoRoot(), "deploy/rbac/etcd-druid.yaml"))
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(dir, "kubeconfig"), agentIdentity)
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= hosts; n++ {
		harness.ForwardFromNetns(t, cp.ns(n), u.Host, u.Host)
	}
	k := &kube{env: env, key: client.ObjectKey{Namespace: etcdNamespace, Name: etcdName}}
	etcd := &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: etcdName, Namespace: etcdNamespace},
		Spec: druidv1alpha1.EtcdSpec{Labels: map[string]string{"app": "etcd"}, Replicas: int32(len(list)),
			ExternallyManagedMemberAddresses: addrs(list)},
	}
	if err := env.Client.Create(t.Context(), etcd); err != nil {
		t.Fatalf("create the Etcd: %v", err)
	}
	section := fmt.Sprintf("kubernetes:\n  kubeconfig: %s\n  callTimeout: 3s\n  etcd: {namespace: %s, name: %s, heartbeatInterval: 2s}\n",
		kubeconfig, etcdNamespace, etcdName)
	return k, section
}

// setList writes addresses into the Etcd, as an operator or a machine
// controller would; it says whether the API server took it (a list it
// refuses by validation is a refusal too).
func (k *kube) setList(addresses []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var etcd druidv1alpha1.Etcd
		if err := k.env.Client.Get(ctx, k.key, &etcd); err != nil {
			return err
		}
		etcd.Spec.ExternallyManagedMemberAddresses = addresses
		etcd.Spec.Replicas = int32(len(addresses))
		return k.env.Client.Update(ctx, &etcd)
	})
}

// switchToResource restarts every agent, one at a time, reading its list
// from the Etcd: the cluster forms from files first, since a node that
// reads the Etcd never bootstraps (the API server that serves the list
// runs on the cluster it lists), as docs/kubernetes.md has it.
func (cp *campaign) switchToResource() {
	cp.c.Opts.Members = "members:\n  source: etcd-resource\n"
	for n := 1; n <= hosts; n++ {
		cp.c.WriteConfig(n)
		cp.setStopped(n, "restarted with the Etcd as its source")
		cp.c.Agent(n).Stop()
		cp.c.Agent(n).Restart()
		cp.setStopped(n, "")
		if _, err := cp.converge(cp.cli); err != nil {
			cp.t.Fatalf("the agents did not converge after host %d switched to the Etcd: %v", n, err)
		}
	}
}

// restartAPIServer stops the API server for d, then starts it again; the
// agents keep their last good list meanwhile.
func (k *kube) restartAPIServer(t *testing.T, d time.Duration) {
	k.env.StopAPIServer(t)
	time.Sleep(d)
	k.env.StartAPIServer(t)
}

func addrs(list []int) []string {
	out := make([]string, len(list))
	for i, n := range list {
		out[i] = hostAddr(n)
	}
	return out
}
