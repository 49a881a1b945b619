package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// statusReporting runs `etcdlet status -o json` for agent n and returns its
// reporting section.
func statusReporting(t *testing.T, c *harness.Cluster, n int) ([]map[string]any, error) {
	out, err := exec.CommandContext(t.Context(), binary, "status", "--config", c.ConfigPath(n), "-o", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("etcdlet status: %w", err)
	}
	var report struct {
		Reporting []map[string]any `json:"reporting"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return nil, err
	}
	return report.Reporting, nil
}

// The API server runs on the cluster etcdlet manages and may be away for
// long: while it is stopped, a member still joins (membership never waits
// for reporting) and `etcdlet status` shows the failing Lease; once it is
// back, every Lease is renewed again, including the new member's, which
// the agent creates itself (no etcd-druid runs here to create it).
func TestReportingCatchesUpAfterAPIServerOutage(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	applyManifest(t, env, "deploy/rbac/etcd-druid.yaml")
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), druidIdentity)
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netAPIOutage, Extra: kubernetesSection(kubeconfig, "")})
	if err := env.Client.Create(t.Context(), newEtcd(c, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	c.WriteMembers(1, 2)
	c.Start(1)
	c.Start(2)
	cli := c.ClientOf(1, 2, 3)
	c.Wait(cli, 60*time.Second, 1, 2)
	renewed := func(since time.Time, ns ...int) func() error {
		return func() error {
			want, err := holderIdentities(t, c, cli, ns...)
			if err != nil {
				return err
			}
			return leasesSay(t.Context(), env, want, since)
		}
	}
	harness.Eventually(t, 30*time.Second, "leases created and renewed", renewed(time.Time{}, 1, 2))

	env.StopAPIServer(t)
	c.WriteMembers(1, 2, 3)
	c.Start(3)
	c.Wait(cli, 60*time.Second, 1, 2, 3)
	harness.Eventually(t, 30*time.Second, "etcdlet status shows the failing lease", func() error {
		states, err := statusReporting(t, c, 1)
		if err != nil {
			return err
		}
		for _, s := range states {
			if strings.HasPrefix(fmt.Sprint(s["target"]), "Lease ") && s["lastError"] != nil {
				return nil
			}
		}
		return fmt.Errorf("reporting: %v", states)
	})

	back := time.Now()
	env.StartAPIServer(t)
	// Backoff is capped at a minute; the outage here is shorter, so the
	// next attempt comes well within it.
	harness.Eventually(t, 90*time.Second, "every lease renewed after the API server returned", renewed(back, 1, 2, 3))
}

// The Etcd's druid.gardener.cloud/disable-etcd-component-protection
// annotation switches etcdlet's protection of its manifest off, as it does
// druid's webhook, and back on when removed; both, and the revert of the
// edit made meanwhile, are reported as Events.
func TestEtcdAnnotationSwitchesProtection(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	applyManifest(t, env, "deploy/rbac/etcd-druid.yaml")
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), druidIdentity)
	etcd := harness.EtcdBinary(t)
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netProtectionSwitch, StaticPod: etcd,
		Extra: "protection:\n  interval: 1s\n" + kubernetesSection(kubeconfig, "")})
	if err := env.Client.Create(t.Context(), newEtcd(c, 1)); err != nil {
		t.Fatal(err)
	}
	c.WriteMembers(1)
	a := c.Start(1)
	c.Wait(c.Client(), 60*time.Second, 1)
	path := manifestPath(c, 1)
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(original), "imagePullPolicy: IfNotPresent", "imagePullPolicy: Always", 1)
	annotate := func(on bool) {
		t.Helper()
		e := &druidv1alpha1.Etcd{}
		key := client.ObjectKey{Namespace: druidNamespace, Name: "etcd-main"}
		if err := env.Client.Get(t.Context(), key, e); err != nil {
			t.Fatal(err)
		}
		if on {
			e.Annotations = map[string]string{druidv1alpha1.DisableEtcdComponentProtectionAnnotation: ""}
		} else {
			delete(e.Annotations, druidv1alpha1.DisableEtcdComponentProtectionAnnotation)
		}
		if err := env.Client.Update(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	events := func(reason string, want int) func() error {
		return func() error {
			var l corev1.EventList
			if err := env.Client.List(t.Context(), &l, client.InNamespace(druidNamespace)); err != nil {
				return err
			}
			n := 0
			for _, e := range l.Items {
				if e.Reason == reason {
					n += int(max(e.Count, 1))
				}
			}
			if n < want {
				return fmt.Errorf("%d %s events, want %d", n, reason, want)
			}
			return nil
		}
	}

	annotate(true)
	harness.Eventually(t, 20*time.Second, "protection switched off (Event)", events("ProtectionSwitched", 1))
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	path1 := fmt.Sprintf(`etcdlet_protected_file_changes_total{action="allowed",file=%q}`, path)
	waitMetric(t, a, path1, ">= 1", atLeast(1))
	if got, _ := os.ReadFile(path); string(got) != edited {
		t.Fatal("with the Etcd's opt-out annotation an edit of the manifest was reverted")
	}

	annotate(false)
	harness.Eventually(t, 20*time.Second, "the edit reverted once the annotation is gone", func() error {
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if string(got) != string(original) {
			return fmt.Errorf("manifest still edited")
		}
		return nil
	})
	harness.Eventually(t, 20*time.Second, "protection switched on (Event)", events("ProtectionSwitched", 2))
	harness.Eventually(t, 20*time.Second, "the revert reported (Event)", events("ProtectionReverted", 1))
}
