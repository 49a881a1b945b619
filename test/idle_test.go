package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// An idle agent costs little, and still misses nothing: once membership
// matches the list and every member is a healthy voter, passes slow from
// agent.reconcileInterval to agent.idleInterval; a quorum lost behind an
// agent's back (the other two members stopped: no event reaches it) reads
// as not ready on its /readyz well within the idle interval (a "ready"
// older than the reconcile interval is checked by a fresh pass); and a
// node added to the list joins well within it (the list change wakes
// every agent at once).
func TestIdleAgentsSlowDown(t *testing.T) {
	t.Parallel()
	const idle = 20 * time.Second
	etcd := harness.EtcdBinary(t)
	c, cli := startCluster(t, netIdle, 3, func(o *harness.Options) {
		o.StaticPod = etcd
		o.ReconcileInterval = time.Second
		o.IdleInterval = idle
	})
	awaitIdlePace(t, c, idle/2, 1, 2, 3)
	// Settling, each agent said so and gave back the pages of its
	// executable that starting touched.
	for _, n := range seq(1, 3) {
		if released := settledReleases(c.Agent(n)); len(released) == 0 || released[0] <= 0 {
			t.Errorf("agent %d settled; its log says it gave back %v KiB of its executable's pages, want some", n, released)
		}
	}

	// Right after agent 3's pass: its next one is an idle interval away.
	a := c.Agent(3)
	awaitPass(t, a, idle+10*time.Second)
	c.Kubelet(1).Pause()
	c.Kubelet(2).Pause()
	harness.Eventually(t, idle/2, "agent 3's /readyz says it is not ready without quorum, within half the idle interval", func() error {
		code, body, err := a.Get("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable {
			return errorf("/readyz answered %d %q", code, strings.TrimSpace(string(body)))
		}
		t.Logf("agent 3 /readyz: %d %s", code, strings.TrimSpace(string(body)))
		return nil
	})
	c.Kubelet(1).Resume()
	c.Kubelet(2).Resume()
	for _, n := range seq(1, 3) {
		waitReadyz(t, c.Agent(n), http.StatusOK, "ready: local member "+c.Name(n)+" healthy voter")
	}
	awaitIdlePace(t, c, idle/2, 1, 2, 3)

	c.WriteMembers(1, 2, 3, 4)
	c.WriteConfig(4)
	c.Start(4)
	c.Wait(cli, idle/2, 1, 2, 3, 4)
}

// settledReleases are the KiB given back by each settling the agent
// logged.
func settledReleases(a *harness.Agent) []float64 {
	var kib []float64
	for _, e := range a.LogEntries() {
		if e["msg"] == "node settled: a pass every agent.idleInterval until something changes" {
			v, _ := e["releasedKiB"].(float64)
			kib = append(kib, v)
		}
	}
	return kib
}

// awaitIdlePace waits until each agent runs at most one pass in a window
// (half the idle interval: at the reconcile interval it would run many).
func awaitIdlePace(t *testing.T, c *harness.Cluster, window time.Duration, agents ...int) {
	t.Helper()
	for _, n := range agents {
		a := c.Agent(n)
		harness.Eventually(t, time.Minute, fmt.Sprintf("agent %d passes at most once in %s", n, window), func() error {
			before, err := a.Metric("etcdlet_reconcile_passes_total")
			if err != nil {
				return err
			}
			time.Sleep(window)
			after, err := a.Metric("etcdlet_reconcile_passes_total")
			if err != nil {
				return err
			}
			if passes := after - before; passes > 1 {
				return errorf("%v passes in %s", passes, window)
			}
			return nil
		})
	}
}

// awaitPass waits until the agent finishes its next pass.
func awaitPass(t *testing.T, a *harness.Agent, within time.Duration) {
	t.Helper()
	before, err := a.Metric("etcdlet_reconcile_passes_total")
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, within, fmt.Sprintf("agent %d's next pass", a.N), func() error {
		now, err := a.Metric("etcdlet_reconcile_passes_total")
		if err != nil {
			return err
		}
		if now == before {
			return errorf("%v passes, as before", now)
		}
		return nil
	})
}
