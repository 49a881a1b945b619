package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// pacemakerIdentity is the subject of deploy/rbac/pacemakercluster.yaml.
const pacemakerIdentity = "system:serviceaccount:openshift-etcd:etcdlet"

// Two agents poll the same two-node pacemaker cluster (the healthy
// fixture, where master-0 is the DC) and may both write the
// PacemakerCluster, with exactly the permissions of
// deploy/rbac/pacemakercluster.yaml: only master-0's agent writes. When
// master-0 goes away, pacemaker makes master-1 the DC and its agent takes
// over.
func TestPacemakerClusterHasOneWriter(t *testing.T) {
	t.Parallel()
	requireCrmMon(t)
	env := envtest.Start(t, envtest.Options{PacemakerCluster: envtest.PacemakerV1})
	applyManifest(t, env, "deploy/rbac/pacemakercluster.yaml")
	allowed, denied := pacemakerAccess()
	checkAccess(t, env, pacemakerIdentity, allowed, denied)
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), pacemakerIdentity)

	healthy, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "daemon/pacemaker/testdata/cib/healthy.xml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cib := func(n int) string { return filepath.Join(dir, fmt.Sprintf("cib-%d.xml", n)) }
	writeCIB := func(n int, content string) {
		t.Helper()
		if err := os.WriteFile(cib(n)+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cib(n)+".tmp", cib(n)); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n <= 2; n++ {
		writeCIB(n, string(healthy))
	}
	c, _ := startCluster(t, netPacemakerWriter, 2, func(o *harness.Options) {
		o.ExtraFor = func(n int) string {
			return fmt.Sprintf("pacemaker:\n  enabled: true\n  interval: 1s\n  cibFile: %s\n"+
				"kubernetes:\n  kubeconfig: %s\n  callTimeout: 3s\n  pacemakerCluster: {refreshInterval: 2s, staleAfter: 6s, nodeName: master-%d}\n",
				cib(n), kubeconfig, n-1)
		}
	})

	writer := func(want string) func() error {
		return func() error {
			pc := &etcdv1.PacemakerCluster{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "cluster"}, pc); err != nil {
				return err
			}
			if got := pc.Annotations["etcdlet.io/status-writer"]; got != want {
				return fmt.Errorf("writer %q, want %q", got, want)
			}
			if age := time.Since(pc.Status.LastUpdated.Time); age > 10*time.Second {
				return fmt.Errorf("status last updated %s ago", age.Round(time.Second))
			}
			if !conditionTrue(pc.Status.Conditions, "Healthy") {
				return fmt.Errorf("cluster condition Healthy is not True: %+v", pc.Status.Conditions)
			}
			return nil
		}
	}
	harness.Eventually(t, 60*time.Second, "master-0's agent writes the status", writer("master-0"))
	waitMetric(t, c.Agent(2), `etcdlet_report_writes_total{result="standby",target="pacemakercluster"}`, ">= 1", atLeast(1))
	if v, err := c.Agent(2).Metric(`etcdlet_report_writes_total{result="written",target="pacemakercluster"}`); err == nil && v > 0 {
		t.Errorf("master-1's agent wrote %v times while master-0's agent was the writer", v)
	}

	// master-0 goes away: its agent stops, and pacemaker on master-1 elects
	// master-1 as the DC.
	c.Agent(1).Stop()
	writeCIB(2, strings.Replace(string(healthy), `dc-uuid="1"`, `dc-uuid="2"`, 1))
	harness.Eventually(t, 30*time.Second, "master-1's agent takes over", writer("master-1"))
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
