package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/test/harness"
)

// A new cluster forms only when someone says so (cluster.bootstrap
// explicit, etcdlet's default). Three fresh nodes started together, each
// reading the same list, stay without a cluster: each says why and what to
// do, in its log and in `etcdlet status`, and starts no member. `etcdlet
// bootstrap --approve` on one of them is the act: that node founds a
// one-member cluster, and the others join it as learners, one at a time.
func TestANewClusterWaitsForTheOperatorsAct(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netExplicit, Bootstrap: "explicit"})
	c.WriteMembers(1, 2, 3)
	for _, n := range seq(1, 3) {
		c.Start(n)
	}
	harness.Eventually(t, convergeTimeout, "the three wait for the operator's act and say so", func() error {
		for _, n := range seq(1, 3) {
			if !waitsForTheAct(c.Agent(n)) {
				return errorf("agent %d has not logged waiting for 'etcdlet bootstrap --approve'", n)
			}
		}
		return nil
	})
	waitPasses(t, c, seq(1, 3), 3)
	for _, n := range seq(1, 3) {
		if started := startedMembers(c.Agent(n)); len(started) > 0 {
			t.Fatalf("agent %d started a member without the operator's act: %v", n, started)
		}
		if _, err := os.Stat(filepath.Join(c.DataDir(n), "member")); err == nil {
			t.Fatalf("agent %d's data dir holds a member without the operator's act", n)
		}
		if v, err := c.Agent(n).Metric(`etcdlet_refusals_total{reason="bootstrap-not-approved"}`); err != nil || v != 1 {
			t.Errorf("agent %d: etcdlet_refusals_total{reason=\"bootstrap-not-approved\"} = %v (%v), want 1", n, v, err)
		}
	}

	// `etcdlet status` says that there is no cluster yet, and what to do.
	stdout, stderr, code := etcdlet(t, "status", "--config", c.ConfigPath(1), "-o", "json")
	var report statusreport.Report
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, stdout)
	}
	if code != 4 || !strings.Contains(stderr, "no cluster yet: run 'etcdlet bootstrap --approve' on one node") ||
		report.Local == nil || report.Local.Decision != "wait" || report.Local.Refusal != "bootstrap-not-approved" ||
		!strings.Contains(report.Local.Reason, "run 'etcdlet bootstrap --approve' on one node") {
		t.Errorf("status before the act: exit %d, stderr %q, local %+v; want exit 4, and the wait for the operator's act with what to do", code, stderr, report.Local)
	}
	out, _, code := etcdlet(t, "bootstrap", "--config", c.ConfigPath(2))
	if code != 0 || !strings.Contains(out, "cluster.bootstrap explicit: a new cluster forms only on an operator's act") ||
		!slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
			f := strings.Fields(line)
			return len(f) > 2 && f[0] == c.IP(1) && f[1] == "explicit" && f[2] == "yes"
		}) || !strings.Contains(out, "this node's decision: wait: no cluster yet") {
		t.Errorf("etcdlet bootstrap before the act: exit %d\n%s", code, out)
	}

	// The act, on node 2.
	out, stderr, code = etcdlet(t, "bootstrap", "--config", c.ConfigPath(2), "--approve")
	if code != 0 || !strings.Contains(out, "approved: this node founds a new one-member cluster of itself") {
		t.Fatalf("etcdlet bootstrap --approve: exit %d\n%s%s", code, out, stderr)
	}
	cli := c.Client()
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	for _, n := range seq(1, 3) {
		a := c.Agent(n)
		founds, joins, boots := a.CountLog("local member", map[string]string{"decision": "found"}),
			a.CountLog("local member", map[string]string{"decision": "join"}), a.CountLog("local member", map[string]string{"decision": "bootstrap"})
		switch {
		case boots > 0:
			t.Errorf("agent %d bootstrapped by consent %d times", n, boots)
		case n == 2 && (founds != 1 || joins != 0):
			t.Errorf("the approved agent founded %d times and joined %d times; want one founding", founds, joins)
		case n != 2 && (founds != 0 || joins != 1):
			t.Errorf("agent %d founded %d times and joined %d times; want one join", n, founds, joins)
		}
	}
	if _, stderr, code := etcdlet(t, "bootstrap", "--config", c.ConfigPath(1), "--approve"); code == 0 || !strings.Contains(stderr, "a listed etcd answers") {
		t.Errorf("a second approval with the cluster running: exit %d, %s", code, stderr)
	}
}

// cluster.founder in every host's configuration is the act instead: the
// node it names founds the cluster once every other listed node confirms
// it holds no data, and never again. Its data lost (its state kept), it
// refuses to found while the others are down, and rejoins the cluster once
// they are back. Its data and state lost (a replaced disk), it is fresh,
// and waits for the others' answers, which are the cluster's.
func TestTheFounderFoundsOnce(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netFounder, Bootstrap: "explicit", Founder: 1})
	c.WriteMembers(1, 2, 3)
	for _, n := range seq(1, 3) {
		c.Start(n)
	}
	cli := c.Client()
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	if f := c.Agent(1).CountLog("local member", map[string]string{"decision": "found"}); f != 1 {
		t.Fatalf("the founder founded %d times, want once", f)
	}
	clusterID := put(t, cli, "/founded", "once")

	for _, lost := range []struct{ what, dirs string }{{"data", "data"}, {"data and state", "data state"}} {
		stopAll(t, c, 1, 2, 3)
		for _, dir := range strings.Fields(lost.dirs) {
			if err := os.RemoveAll(filepath.Join(c.Dir, "n1", dir)); err != nil {
				t.Fatal(err)
			}
		}
		c.Agent(1).Restart()
		harness.Eventually(t, convergeTimeout, "the founder, its "+lost.what+" lost, holds back", func() error {
			for _, e := range c.Agent(1).LogEntries() {
				reason, _ := e["reason"].(string)
				switch {
				case e["msg"] != "local member":
				case lost.what == "data" && e["decision"] == "refuse" && strings.Contains(reason, "was a member before"):
					return nil
				case lost.what != "data" && e["decision"] == "wait" && strings.Contains(reason, "no answer from "+c.IP(2)):
					return nil
				}
			}
			return errorf("agent 1 has not logged holding back")
		})
		waitPasses(t, c, []int{1}, 3)
		if f := c.Agent(1).CountLog("local member", map[string]string{"decision": "found"}); f != 1 {
			t.Fatalf("the founder, its %s lost, founded again (%d foundings)", lost.what, f)
		}
		c.Agent(2).Restart()
		c.Agent(3).Restart()
		c.Wait(cli, convergeTimeout, 1, 2, 3)
		if id := put(t, cli, "/after-"+strings.ReplaceAll(lost.what, " ", "-"), "x"); id != clusterID {
			t.Fatalf("after the founder lost its %s the cluster is %x, not %x", lost.what, id, clusterID)
		}
	}
	if f := c.Agent(1).CountLog("local member", map[string]string{"decision": "found"}); f != 1 {
		t.Errorf("the founder founded %d times, want once", f)
	}
}

// With members.source etcd-resource a node never bootstraps: the API server
// that serves the list runs on the cluster, so the cluster exists, and a
// node that found none must not make one. Three fresh agents that read the
// Etcd's list (the copy they keep while the API server is away) wait for
// the cluster, say so, and refuse the operator's approval; validation
// refuses a setting that would bootstrap.
func TestTheEtcdResourceNeverBootstraps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// An API server that is away: nothing listens on port 1.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: away, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: etcdlet, user: {token: t}}]
contexts: [{name: away, context: {cluster: away, user: etcdlet}}]
current-context: away
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := harness.NewCluster(t, binary, filepath.Join(dir, "c"), harness.Options{Net: netNeverBootstrap,
		Members: "members:\n  source: etcd-resource\n", Extra: kubernetesSection(kubeconfig, "")})
	for _, n := range seq(1, 3) {
		state := filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "state")
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		kept := fmt.Sprintf("# The member list of Etcd %s/etcd-main, kept by etcdlet\n%s\n%s\n%s\n", druidNamespace, c.IP(1), c.IP(2), c.IP(3))
		if err := os.WriteFile(filepath.Join(state, "etcd-resource-members"), []byte(kept), 0o600); err != nil {
			t.Fatal(err)
		}
		c.Start(n)
	}
	harness.Eventually(t, convergeTimeout, "the three wait for the cluster", func() error {
		for _, n := range seq(1, 3) {
			if c.Agent(n).CountLog("local member", map[string]string{"decision": "wait"}) == 0 || !neverBootstraps(c.Agent(n)) {
				return errorf("agent %d has not logged that it never bootstraps", n)
			}
		}
		return nil
	})
	waitPasses(t, c, seq(1, 3), 3)
	for _, n := range seq(1, 3) {
		if started := startedMembers(c.Agent(n)); len(started) > 0 {
			t.Fatalf("agent %d, reading the Etcd's list, started a member with no cluster: %v", n, started)
		}
	}
	if _, stderr, code := etcdlet(t, "bootstrap", "--config", c.ConfigPath(1), "--approve"); code == 0 ||
		!strings.Contains(stderr, "never bootstraps (members.source etcd-resource") {
		t.Errorf("etcdlet bootstrap --approve with members.source etcd-resource: exit %d, %s", code, stderr)
	}

	body, err := os.ReadFile(c.ConfigPath(1))
	if err != nil {
		t.Fatal(err)
	}
	consent := filepath.Join(dir, "consent.yaml")
	if err := os.WriteFile(consent, []byte(strings.Replace(string(body), "  name: etcd-main\n", "  name: etcd-main\n  bootstrap: consent\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := etcdlet(t, "validate", "--config", consent); code != 1 ||
		!strings.Contains(stdout+stderr, `cluster.bootstrap: "consent": must be never (or left out) with members.source etcd-resource`) {
		t.Errorf("validate of an etcd-resource configuration that would bootstrap: exit %d, %s%s", code, stdout, stderr)
	}
}

// waitsForTheAct reports whether the agent logged that it waits for the
// operator's act, and said what the act is.
func waitsForTheAct(a *harness.Agent) bool {
	for _, e := range a.LogEntries() {
		if reason, _ := e["reason"].(string); e["msg"] == "local member" && e["decision"] == "wait" &&
			strings.Contains(reason, "no cluster yet") && strings.Contains(reason, "run 'etcdlet bootstrap --approve' on one node") {
			return true
		}
	}
	return false
}

func neverBootstraps(a *harness.Agent) bool {
	for _, e := range a.LogEntries() {
		if reason, _ := e["reason"].(string); e["msg"] == "local member" && strings.Contains(reason, "never founds a cluster") {
			return true
		}
	}
	return false
}

// startedMembers lists the decisions under which the agent started its
// member.
func startedMembers(a *harness.Agent) []string {
	var started []string
	for _, e := range a.LogEntries() {
		if e["msg"] == "starting local member" {
			started = append(started, fmt.Sprint(e["initialClusterState"], " ", e["initialCluster"]))
		}
	}
	return started
}

// stopAll stops the agents together (each stops its embedded member) and
// waits until none runs: one after the other, the last member, without
// quorum, takes long to stop.
func stopAll(t *testing.T, c *harness.Cluster, ns ...int) {
	t.Helper()
	for _, n := range ns {
		go c.Agent(n).Stop()
	}
	harness.Eventually(t, 40*time.Second, "the agents stopped", func() error {
		for _, n := range ns {
			if c.Agent(n).Running() {
				return errorf("agent %d still runs", n)
			}
		}
		return nil
	})
}
