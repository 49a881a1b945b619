package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// The metrics an operator alerts on move with a real membership change,
// scraped from the agents' /metrics: a node listed before its agent runs
// is added as a learner (and stays one: the writer waits to promote it,
// LearnerNotStarted, and tries no promote that must fail), is promoted once its agent
// starts it, and a node taken off the list is removed. The list, member
// and learner gauges follow, the time of the last successful pass
// advances, and every node ends ready: the members as healthy voters, the
// removed node as idle.
func TestMetricsDuringMembershipChange(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netMetrics, 3)
	a := c.Agent(1)
	waitMetric(t, a, "etcdlet_desired_members", "3", equals(3))
	waitMetric(t, a, `etcdlet_members{role="voter"}`, "3", equals(3))
	waitMetric(t, a, `etcdlet_members{role="learner"}`, "0", equals(0))
	waitMetric(t, a, "etcdlet_reconcile_last_success_timestamp_seconds", "> 0", atLeast(1))
	first, _ := a.Metric("etcdlet_reconcile_last_success_timestamp_seconds")
	if now := float64(time.Now().UnixNano()) / 1e9; first > now || now-first > 60 {
		t.Errorf("the last successful pass is at %.3f, %.1fs from now: not a recent unix time", first, now-first)
	}

	// Node 4 is listed while its agent is down: the writer adds it as a
	// learner, which nothing can promote until the agent starts it.
	c.WriteMembers(1, 2, 3, 4)
	waitMetric(t, a, "etcdlet_desired_members", "4", equals(4))
	waitSum(t, c, seq(1, 3), `etcdlet_membership_changes_total{action="add-learner",outcome="done"}`, 1)
	// The writer waits to promote the learner it added until its server
	// runs (a promote before that can only fail), and says why.
	waitSum(t, c, seq(1, 3), `etcdlet_plan_waiting{reason="LearnerNotStarted"}`, 1)
	waitMetric(t, a, `etcdlet_members{role="learner"}`, "1", equals(1))
	if n := sum(t, c, seq(1, 3), `etcdlet_etcd_call_errors_total{op="promote",outcome="retry"}`); n != 0 {
		t.Errorf("the writers tried %v promotes of a learner whose server does not run; want none", n)
	}
	c.Start(4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	waitSum(t, c, seq(1, 4), `etcdlet_membership_changes_total{action="promote",outcome="done"}`, 1)
	waitMetric(t, a, `etcdlet_members{role="voter"}`, "4", equals(4))
	waitMetric(t, a, `etcdlet_members{role="learner"}`, "0", equals(0))

	c.WriteMembers(1, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 3, 4)
	waitSum(t, c, seq(1, 4), `etcdlet_membership_changes_total{action="remove",outcome="done"}`, 1)
	waitMetric(t, a, "etcdlet_desired_members", "3", equals(3))
	waitMetric(t, a, `etcdlet_members{role="voter"}`, "3", equals(3))
	waitMetric(t, a, "etcdlet_reconcile_last_success_timestamp_seconds", fmt.Sprintf("> %.3f", first), func(v float64) bool { return v > first })
	for _, n := range []int{1, 3, 4} {
		waitReadyz(t, c.Agent(n), http.StatusOK, "ready: local member "+c.Name(n)+" healthy voter")
	}
	waitReadyz(t, c.Agent(2), http.StatusOK, "ready: this node is not listed; idle")
}

// /readyz follows the local member: 200 while it is a healthy voter in
// the list, 503 with the reason while its etcd is stopped (the static
// pod's process, with the manifest in place), 200 again once it runs,
// while /healthz (the loop is alive) stays 200 all along. A node that is
// not listed is ready as idle.
func TestReadyzFollowsTheLocalMember(t *testing.T) {
	t.Parallel()
	c := staticPodCluster(t, netReadyz, 3, "")
	a := c.Agent(3)
	waitReadyz(t, a, http.StatusOK, "ready: local member "+c.Name(3)+" healthy voter")

	c.Kubelet(3).Pause()
	waitReadyz(t, a, http.StatusServiceUnavailable, "not ready: local member "+c.Name(3)+" is unhealthy: ")
	if code, body, err := a.Get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz answered %d %q (%v) while only the member is down; the loop is alive", code, body, err)
	}
	waitReadyz(t, c.Agent(1), http.StatusOK, "ready: local member "+c.Name(1)+" healthy voter")

	c.Kubelet(3).Resume()
	waitReadyz(t, a, http.StatusOK, "ready: local member "+c.Name(3)+" healthy voter")

	c.Start(4)
	waitReadyz(t, c.Agent(4), http.StatusOK, "ready: this node is not listed; idle")
}

// waitReadyz waits until the agent's /readyz answers code with a body
// that contains want.
func waitReadyz(t *testing.T, a *harness.Agent, code int, want string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("agent %d /readyz %d %q", a.N, code, want), func() error {
		got, body, err := a.Get("/readyz")
		if err != nil {
			return err
		}
		if got != code || !strings.Contains(string(body), want) {
			return errorf("/readyz answered %d %q", got, strings.TrimSpace(string(body)))
		}
		t.Logf("agent %d /readyz: %d %s", a.N, got, strings.TrimSpace(string(body)))
		return nil
	})
}

// waitSum waits until a counter summed over the given agents reaches at
// least min: whichever agent held the writer lock made the change. A
// counter an agent has not touched yet is absent from its /metrics.
func waitSum(t *testing.T, c *harness.Cluster, agents []int, name string, min float64) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("%s summed over agents %v >= %v", name, agents, min), func() error {
		sum, err := sumMetric(c, agents, name)
		if err != nil {
			return err
		}
		if sum < min {
			return errorf("%s sums to %v", name, sum)
		}
		return nil
	})
}

// sum is a metric summed over agents, a series no agent has yet as 0.
func sum(t *testing.T, c *harness.Cluster, agents []int, name string) float64 {
	t.Helper()
	v, err := sumMetric(c, agents, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sumMetric(c *harness.Cluster, agents []int, name string) (float64, error) {
	sum := 0.0
	for _, n := range agents {
		if v, err := c.Agent(n).Metric(name); err == nil {
			sum += v
		} else if !strings.Contains(err.Error(), "not found") {
			return 0, err
		}
	}
	return sum, nil
}
