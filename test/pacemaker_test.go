package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdlet/etcdlet/test/harness"
)

// fixture is a CIB generated with the real pacemaker tools (see
// daemon/pacemaker/testdata/generate.sh).
func fixture(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(harness.RepoRoot(), "daemon", "pacemaker", "testdata", "cib", name+".xml")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func requireCrmMon(t *testing.T) {
	t.Helper()
	requireTools(t, map[string]string{"crm_mon": "pacemaker-cli-utils"})
}

// `etcdlet pacemaker status --cib-file` prints the object etcdlet would
// write, from the real crm_mon, without any running cluster.
func TestPacemakerStatusCommand(t *testing.T) {
	t.Parallel()
	requireCrmMon(t)
	_, err := exec.Command(binary, "pacemaker", "status", "--config", filepath.Join(t.TempDir(), "absent.yaml"),
		"--cib-file", fixture(t, "failed-monitor"), "-o", "json").Output()
	if err == nil {
		t.Fatal("an explicitly named configuration file that does not exist must be an error")
	}
	out, err := exec.Command(binary, "pacemaker", "status", "--cib-file", fixture(t, "failed-monitor"), "-o", "json").Output()
	if err != nil {
		t.Fatalf("pacemaker status: %v\n%s", err, out)
	}
	var pc etcdv1.PacemakerCluster
	if err := json.Unmarshal(out, &pc); err != nil {
		t.Fatalf("output is not a PacemakerCluster: %v\n%s", err, out)
	}
	if pc.Name != "cluster" || pc.Kind != "PacemakerCluster" || pc.APIVersion != "etcd.openshift.io/v1" {
		t.Errorf("object %s %s/%s", pc.APIVersion, pc.Kind, pc.Name)
	}
	if got := etcdCondition(t, &pc, "master-1", "Operational"); got.Status != metav1.ConditionFalse || got.Reason != "Failed" {
		t.Errorf("master-1 Etcd Operational = %s/%s (%s), want False/Failed", got.Status, got.Reason, got.Message)
	}
	if got := etcdCondition(t, &pc, "master-0", "Operational"); got.Status != metav1.ConditionTrue {
		t.Errorf("master-0 Etcd Operational = %s (%s)", got.Status, got.Message)
	}

	if out, err := exec.Command(binary, "pacemaker", "status", "--cib-file", filepath.Join(t.TempDir(), "none.xml")).CombinedOutput(); err == nil {
		t.Errorf("an unreadable CIB must exit non-zero, got:\n%s", out)
	}
}

// An agent with pacemaker.enabled polls at its interval and serves the
// health model: a change in the cluster shows in the next poll, and only
// the conditions whose status changed get a new lastTransitionTime.
func TestAgentPollsPacemaker(t *testing.T) {
	t.Parallel()
	requireCrmMon(t)
	cib := filepath.Join(t.TempDir(), "cib.xml")
	copyFile(t, fixture(t, "failed-monitor"), cib)
	c, _ := startCluster(t, netPacemaker, 1, func(o *harness.Options) {
		o.Extra = fmt.Sprintf("pacemaker:\n  enabled: true\n  interval: 1s\n  cibFile: %s\n", cib)
	})
	a := c.Agent(1)
	failedAt, _ := waitEtcdOperational(t, a, metav1.ConditionFalse)
	const operational = `etcdlet_pacemaker_condition{node="master-1",resource="Etcd",type="Operational"}`
	waitMetric(t, a, operational, "0 (False)", equals(0))

	copyFile(t, fixture(t, "healthy"), cib)
	// The same object for both conditions: one poll's status.
	healthy, pc := waitEtcdOperational(t, a, metav1.ConditionTrue)
	if !healthy.LastTransitionTime.After(failedAt.LastTransitionTime.Time) {
		t.Errorf("Operational changed status but kept lastTransitionTime %s", healthy.LastTransitionTime)
	}
	online := nodeCondition(t, pc, "master-0", "Online")
	if !online.LastTransitionTime.Before(&healthy.LastTransitionTime) {
		t.Errorf("master-0 Online did not change status, yet its lastTransitionTime moved to %s", online.LastTransitionTime)
	}
	waitMetric(t, a, operational, "1 (True) after recovery", equals(1))
	waitMetric(t, a, "etcdlet_pacemaker_known", "1", equals(1))

	// A CIB crm_mon cannot read makes the state unknown, never a stale
	// "healthy". (An empty <cib/> is a cluster without nodes: unhealthy.)
	if err := os.WriteFile(cib, []byte("not xml"), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "unknown pacemaker state is served as unavailable", func() error {
		code, body, err := a.Get("/pacemaker")
		if err != nil {
			return err
		}
		if code != 503 {
			return fmt.Errorf("GET /pacemaker = %d %s", code, body)
		}
		return nil
	})
	waitMetric(t, a, "etcdlet_pacemaker_known", "0 after an unreadable CIB", equals(0))
}

// waitEtcdOperational waits until master-1's Etcd Operational has the
// wanted status and returns it with the object it was read from.
func waitEtcdOperational(t *testing.T, a *harness.Agent, want metav1.ConditionStatus) (metav1.Condition, *etcdv1.PacemakerCluster) {
	t.Helper()
	var (
		got metav1.Condition
		pc  etcdv1.PacemakerCluster
	)
	harness.Eventually(t, 30*time.Second, "master-1's Etcd Operational is "+string(want), func() error {
		code, body, err := a.Get("/pacemaker")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /pacemaker = %d %s %v", code, body, err)
		}
		pc = etcdv1.PacemakerCluster{}
		if err := json.Unmarshal(body, &pc); err != nil {
			return err
		}
		got = etcdCondition(t, &pc, "master-1", "Operational")
		if got.Status != want {
			return fmt.Errorf("is %s", got.Status)
		}
		return nil
	})
	return got, &pc
}

func nodeStatus(t *testing.T, pc *etcdv1.PacemakerCluster, node string) etcdv1.PacemakerClusterNodeStatus {
	t.Helper()
	if pc.Status.Nodes == nil {
		t.Fatal("status has no nodes")
	}
	for _, n := range *pc.Status.Nodes {
		if n.NodeName == node {
			return n
		}
	}
	t.Fatalf("node %s not in status", node)
	return etcdv1.PacemakerClusterNodeStatus{}
}

func nodeCondition(t *testing.T, pc *etcdv1.PacemakerCluster, node, typ string) metav1.Condition {
	t.Helper()
	for _, c := range nodeStatus(t, pc, node).Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("node %s has no %s condition", node, typ)
	return metav1.Condition{}
}

func etcdCondition(t *testing.T, pc *etcdv1.PacemakerCluster, node, typ string) metav1.Condition {
	t.Helper()
	for _, r := range nodeStatus(t, pc, node).Resources {
		if r.Name != "Etcd" {
			continue
		}
		for _, c := range r.Conditions {
			if c.Type == typ {
				return c
			}
		}
	}
	t.Fatalf("node %s has no Etcd %s condition", node, typ)
	return metav1.Condition{}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}
