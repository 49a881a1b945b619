package envtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Objects live in envtest's etcd, which a kube-apiserver restart leaves
// alone; clients and kubeconfigs made before the stop work after the start,
// restart after restart; the kept certificates go with the control plane.
func TestAPIServerRestartKeepsObjects(t *testing.T) {
	t.Parallel()
	// Registered before Start, so it runs after Start's cleanup has stopped
	// the control plane.
	var keptDir string
	t.Cleanup(func() {
		if keptDir == "" {
			return
		}
		if _, err := os.Stat(keptDir); !os.IsNotExist(err) {
			t.Errorf("kept certificate directory %s after the control plane stopped: %v", keptDir, err)
		}
	})
	env := Start(t, Options{DruidEtcd: true})
	ns := createNamespace(t, env, "restart")

	// A separate process's identity, written while kube-apiserver runs.
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "agent.kubeconfig"), "agent", "system:masters")
	if fi, err := os.Stat(kubeconfig); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig %s: %v, mode %v, want 0600", kubeconfig, err, fi.Mode().Perm())
	}
	agentCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load the kubeconfig: %v", err)
	}
	agent, err := client.New(agentCfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatalf("client from the kubeconfig: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns},
		Data:       map[string]string{"k": "v"},
	}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	etcd := &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns},
		Spec:       druidv1alpha1.EtcdSpec{Labels: map[string]string{"app": "etcd"}, Replicas: 1},
	}
	if err := agent.Create(ctx, etcd); err != nil {
		t.Fatalf("create Etcd through the kubeconfig's client: %v", err)
	}

	for round := 1; round <= 2; round++ {
		env.StopAPIServer(t)
		if k, ok := env.Environment.ControlPlane.APIServer.Authn.(*keptCertDir); ok {
			keptDir = k.dir
		}
		if err := env.stopAPIServer(); err == nil || !strings.Contains(err.Error(), "already stopped") {
			t.Errorf("round %d: a second stop: %v, want an error saying it is already stopped", round, err)
		}

		down, cancel := context.WithTimeout(t.Context(), callTimeout)
		err := env.Client.Get(down, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		cancel()
		if err == nil {
			t.Fatalf("round %d: Get succeeded with kube-apiserver stopped", round)
		}
		t.Logf("round %d: Get with kube-apiserver stopped: %v", round, err)

		env.StartAPIServer(t)
		if err := env.startAPIServer(t.Context()); err == nil || !strings.Contains(err.Error(), "is running") {
			t.Errorf("round %d: a second start: %v, want an error saying it is running", round, err)
		}

		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		got := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
			t.Fatalf("round %d: get the ConfigMap with the old client after the restart: %v", round, err)
		}
		if got.Data["k"] != "v" || got.UID != cm.UID {
			t.Errorf("round %d: ConfigMap after the restart: uid %s data %v, want uid %s data %v", round, got.UID, got.Data, cm.UID, cm.Data)
		}
		// The kubeconfig written before the first stop, and the custom
		// resource, whose CRD must be served again.
		gotEtcd := &druidv1alpha1.Etcd{}
		if err := agent.Get(ctx, client.ObjectKeyFromObject(etcd), gotEtcd); err != nil {
			t.Fatalf("round %d: get the Etcd through the old kubeconfig after the restart: %v", round, err)
		}
		if gotEtcd.UID != etcd.UID {
			t.Errorf("round %d: Etcd uid %s after the restart, want %s", round, gotEtcd.UID, etcd.UID)
		}
		// Writes work too, and so does a user added after the restart.
		got.Data["round"] = string(rune('0' + round))
		if err := env.Client.Update(ctx, got); err != nil {
			t.Errorf("round %d: update the ConfigMap after the restart: %v", round, err)
		}
		cancel()
	}

	later := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "later.kubeconfig"), "later", "system:masters")
	laterCfg, err := clientcmd.BuildConfigFromFlags("", later)
	if err != nil {
		t.Fatalf("load the kubeconfig written after the restarts: %v", err)
	}
	laterClient, err := client.New(laterCfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := laterClient.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Errorf("get through a kubeconfig written after the restarts: %v", err)
	}
	if keptDir == "" {
		t.Error("StopAPIServer kept no certificate directory")
	}
}
