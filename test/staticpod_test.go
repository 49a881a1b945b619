package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod/manifest"
	"github.com/etcdlet/etcdlet/test/harness"
)

func staticPodCluster(t *testing.T, net, n int, extra string) *harness.Cluster {
	t.Helper()
	etcd := harness.EtcdBinary(t)
	c, _ := startCluster(t, net, n, func(o *harness.Options) {
		o.StaticPod = etcd
		o.Extra = extra
	})
	return c
}

func manifestPath(c *harness.Cluster, n int) string {
	return filepath.Join(c.ManifestDir(n), config.DefaultPodName+".yaml")
}

// Three agents in static-pod mode form a cluster through the manifests
// the "kubelet" runs; a member joins and one leaves through rewritten
// manifests, without restarting the members that stay.
func TestStaticPodMembership(t *testing.T) {
	t.Parallel()
	c := staticPodCluster(t, netStaticPod, 3, "")
	cli := c.Client()
	for _, n := range seq(1, 3) {
		fi, err := os.Stat(manifestPath(c, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("manifest %d has mode %v, want 0600", n, fi.Mode().Perm())
		}
		data, _ := os.ReadFile(manifestPath(c, n))
		if _, err := manifest.Unmarshal(data); err != nil {
			t.Errorf("manifest %d does not decode strictly: %v", n, err)
		}
	}
	// The dry run renders exactly what the agent wrote.
	rendered, err := exec.Command(binary, "render", "--config", c.ConfigPath(1)).Output()
	if err != nil {
		t.Fatalf("etcdlet render: %v", err)
	}
	if onDisk, _ := os.ReadFile(manifestPath(c, 1)); string(rendered) != string(onDisk) {
		t.Errorf("etcdlet render differs from the manifest the agent wrote:\n%s", rendered)
	}
	starts := map[int]int{}
	for _, n := range seq(1, 3) {
		starts[n] = c.Kubelet(n).Starts()
	}

	w := c.StartWriter(cli)
	c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	c.WriteMembers(1, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 3, 4)
	checkWrites(t, w)

	// The removed member's manifest left the kubelet's dir and was kept.
	harness.Eventually(t, 30*time.Second, "member 2's manifest taken away and its data moved aside", func() error {
		if _, err := os.Stat(manifestPath(c, 2)); err == nil {
			return errorf("manifest still in place")
		}
		if len(movedAside(t, c, 2)) == 0 {
			return errorf("data not moved aside yet")
		}
		return nil
	})
	kept, _ := filepath.Glob(filepath.Join(c.Dir, "n2", "state", "manifests", "etcd.yaml.stopped-*"))
	if len(kept) != 1 {
		t.Errorf("the removed member's manifest was not kept in the state dir: %v", kept)
	}
	requireKeptData(t, movedAside(t, c, 2))
	if out, err := exec.Command(binary, "render", "--config", c.ConfigPath(2)).CombinedOutput(); err == nil || !strings.Contains(string(out), "not in the member list") {
		t.Errorf("render for a node that runs no member must fail and say why, got %v:\n%s", err, out)
	}
	for _, n := range []int{1, 3} {
		if got := c.Kubelet(n).Starts(); got != starts[n] {
			t.Errorf("member %d was restarted %d times by membership changes of others: its manifest changed", n, got-starts[n])
		}
	}
}

// An edit or a deletion of the manifest behind etcdlet's back is reverted
// and reported; a manifest carrying etcdlet.io/disable-protection is left
// to the operator until the annotation goes.
func TestStaticPodManifestProtection(t *testing.T) {
	t.Parallel()
	c := staticPodCluster(t, netProtection, 1, "protection:\n  interval: 1s\n")
	path := manifestPath(c, 1)
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Agent(1)
	counted := func(action string) {
		t.Helper()
		waitMetric(t, a, fmt.Sprintf(`etcdlet_protected_file_changes_total{action=%q,file=%q}`, action, path), ">= 1", atLeast(1))
	}
	waitContent := func(what string, want []byte) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, what, func() error {
			got, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if string(got) != string(want) {
				return errorf("manifest differs")
			}
			return nil
		})
	}

	edited := strings.Replace(string(original), "imagePullPolicy: IfNotPresent", "imagePullPolicy: Always", 1)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	waitContent("an edited manifest is reverted", original)
	counted("reverted")
	harness.Eventually(t, 30*time.Second, "the revert logged with a diff naming the edit", func() error {
		if !logMentions(a, "imagePullPolicy: Always") {
			return errorf("not logged yet")
		}
		return nil
	})
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("reverted manifest has mode %v", fi.Mode().Perm())
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitContent("a deleted manifest is restored", original)
	counted("restored")

	optedOut := strings.Replace(edited, "  annotations:\n", "  annotations:\n    "+manifest.DisableProtectionAnnotation+": \"\"\n", 1)
	if err := os.WriteFile(path, []byte(optedOut), 0o600); err != nil {
		t.Fatal(err)
	}
	waitPasses(t, c, []int{1}, 3)
	if got, _ := os.ReadFile(path); string(got) != optedOut {
		t.Fatal("a manifest carrying the opt-out annotation was changed")
	}
	counted("allowed")
	// Taking the annotation away hands the file back to etcdlet.
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	waitContent("without the annotation the manifest is etcdlet's again", original)
}

// With protection.enabled false, an edit stays.
func TestStaticPodProtectionOff(t *testing.T) {
	t.Parallel()
	c := staticPodCluster(t, netProtectionOff, 1, "protection:\n  enabled: false\n  interval: 1s\n")
	path := manifestPath(c, 1)
	original, _ := os.ReadFile(path)
	edited := strings.Replace(string(original), "imagePullPolicy: IfNotPresent", "imagePullPolicy: Always", 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	waitPasses(t, c, []int{1}, 3)
	if got, _ := os.ReadFile(path); string(got) != edited {
		t.Error("with protection off an edit was reverted")
	}
}

func logMentions(a *harness.Agent, s string) bool {
	for _, e := range a.LogEntries() {
		if strings.Contains(fmt.Sprint(e), s) {
			return true
		}
	}
	return false
}
