package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/test/harness"
)

// A cluster that lost its quorum for good comes back from the member data
// that survived, with every acknowledged write a survivor holds and a
// revision that never goes backwards. Three members; member 3 stops and
// falls behind while 1 and 2 write on; then 1 and 2 stop, and host 2 is
// gone for good (its data destroyed). `etcdlet recover` on node 3 refuses
// and names node 1, whose log goes further; on node 1 it recovers, with
// node 2 named gone for good, once node 3 promised not to start its old
// member again; a second recovery on node 3 is refused, and node 3's
// member stays stopped. A new host 4 replaces 2 in the list; node 1
// starts the recovered cluster, node 3 moves its data aside and joins on
// its own, and all three form the recovered cluster.
func TestRecoverFromTheSurvivorsData(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netRecover, 3)
	putKeys(t, cli, "data/before/", 100)
	oldCluster := clusterID(t, cli)

	c.Agent(3).Stop()
	var seen int64
	for i := range 50 {
		resp, err := cli.Put(t.Context(), fmt.Sprintf("data/after/%d", i), "acknowledged")
		if err != nil {
			t.Fatal(err)
		}
		seen = resp.Header.Revision
	}
	want := readPrefix(t, cli, "data/")
	// A client that watches from the last revision it saw, as an informer
	// does, must get a compaction error from the recovered cluster.
	watchCtx, cancelWatch := context.WithCancel(t.Context())
	defer cancelWatch()
	watch := cli.Watch(watchCtx, "data/", clientv3.WithPrefix(), clientv3.WithRev(seen+1), clientv3.WithCreatedNotify())
	if created := <-watch; !created.Created {
		t.Fatalf("the watch was not created: %+v", created)
	}
	c.Agent(1).Stop()
	c.Agent(2).Stop()
	// Host 2 is "gone for good": its data out of reach, until it comes
	// back below, unexpectedly, with its data.
	hidden := c.DataDir(2) + ".out-of-reach"
	if err := os.Rename(c.DataDir(2), hidden); err != nil {
		t.Fatal(err)
	}

	recoverOn := func(n int, args ...string) (string, int) {
		t.Helper()
		out, stderr, code := etcdlet(t, append([]string{"recover", "--yes", "--config", c.ConfigPath(n)}, args...)...)
		return out + stderr, code
	}
	// A listed node that does not answer may hold a further log: it is
	// waited for unless the operator names it gone for good.
	if out, code := recoverOn(3); code == 0 || !strings.Contains(out, "not heard from "+c.IP(1)+", "+c.IP(2)) || !strings.Contains(out, "--gone") {
		t.Fatalf("recover on node 3 with nodes 1 and 2 silent: exit %d\n%s", code, out)
	}
	// Status says what would recover the cluster.
	if out, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(3)); !strings.Contains(out,
		fmt.Sprintf("recovery: if %s, %s are gone for good, on %s (the furthest log of the nodes that answer): etcdlet recover --gone %[1]s,%[2]s", c.IP(1), c.IP(2), c.IP(3))) {
		t.Errorf("status with nodes 1 and 2 silent does not say what recovers the cluster:\n%s", out)
	}
	gone := "--gone=" + c.IP(2)
	// Node 1 back (its member runs without quorum, its agent reports its
	// data); recovering on node 3 would lose the writes only 1 holds.
	c.Agent(1).Restart()
	harness.Eventually(t, 30*time.Second, "recover on node 3 refuses and names node 1", func() error {
		out, code := recoverOn(3, gone)
		if code == 0 || !strings.Contains(out, c.IP(1)+" holds a further log") || !strings.Contains(out, "--reason") {
			return errorf("recover on node 3: exit %d\n%s", code, out)
		}
		return nil
	})
	requireUntouched(t, c, 3)
	c.Agent(3).Restart()
	c.Agent(1).Stop()
	var out string
	harness.Eventually(t, 30*time.Second, "recover on node 1 (node 3's agent answering)", func() error {
		var code int
		out, code = recoverOn(1, gone)
		if code != 0 {
			return errorf("exit %d\n%s", code, out)
		}
		return nil
	})
	for _, w := range []string{"recovered at revision", c.IP(2) + " is gone for good", "marked compacted",
		c.IP(3) + " promised not to start their members of cluster " + fmt.Sprintf("%x", oldCluster) + " again"} {
		if !strings.Contains(out, w) {
			t.Errorf("recover's output lacks %q:\n%s", w, out)
		}
	}
	requireKeptData(t, movedAside(t, c, 1))

	// Node 3 promised node 1, for good, not to start its member of the
	// old cluster again: were host 2 to come back with its data, the two
	// would make that cluster's quorum beside the recovered one. Its
	// agent stopped the member and keeps the data; a second recovery,
	// there, is refused; a restart of its agent changes nothing.
	promised := "this node promised " + c.IP(1) + " not to start its member of cluster " + fmt.Sprintf("%x", oldCluster) + " again"
	harness.Eventually(t, 30*time.Second, "a second recovery, on node 3, is refused", func() error {
		out, code := recoverOn(3, gone)
		if code == 0 || !strings.Contains(out, promised) {
			return errorf("recover on node 3 after node 1 recovered: exit %d\n%s", code, out)
		}
		return nil
	})
	requireUntouched(t, c, 3)
	c.Agent(3).Stop()
	c.Agent(3).Restart()
	harness.Eventually(t, 30*time.Second, "node 3 waits for the recovered cluster, its member stopped", func() error {
		out, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(3))
		for _, w := range []string{"promised " + c.IP(1) + " not to start its member", "promised " + c.IP(1) + " not to start again",
			"a recovery runs on " + c.IP(1)} {
			if !strings.Contains(out, w) {
				return errorf("status on node 3 lacks %q:\n%s", w, out)
			}
		}
		return nil
	})
	requireUntouched(t, c, 3)

	// Host 2, named gone, comes back with its data before the recovered
	// cluster runs: its member restarts, and with node 3's member it would
	// make the old cluster's quorum (2 of 3) beside the recovered one.
	// Node 3's promise keeps its member stopped: no quorum.
	if err := os.Rename(hidden, c.DataDir(2)); err != nil {
		t.Fatal(err)
	}
	c.Agent(2).Restart()
	harness.Eventually(t, 30*time.Second, "node 2's member runs again, node 3's stays stopped", func() error {
		out, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(2))
		rows := map[int]string{}
		for _, line := range strings.Split(out, "\n") {
			for n := 2; n <= 3; n++ {
				if f := strings.Fields(line); len(f) > 0 && f[0] == c.IP(n) {
					rows[n] = line
				}
			}
		}
		if !strings.Contains(rows[2], "running") || !strings.Contains(rows[3], "stopped, promised "+c.IP(1)) {
			return errorf("status on node 2:\n%s", out)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_, err := c.ClientOf(2, 3).Get(ctx, "data/before/0")
	cancel()
	if err == nil {
		t.Fatal("the old cluster answers with quorum beside the recovery: node 3 started its member although it promised not to")
	}
	c.Agent(2).Stop()
	if err := os.RemoveAll(c.DataDir(2)); err != nil { // now gone for good
		t.Fatal(err)
	}

	// Host 4 replaces the lost host 2 in the list; then the recovered
	// node starts, and node 3 moves its data aside and joins on its own.
	c.WriteMembers(1, 3, 4)
	c.WriteConfig(4)
	c.Agent(1).Restart()
	c.Start(4)
	cli2 := c.ClientOf(1, 3, 4)
	c.Wait(cli2, convergeTimeout, 1, 3, 4)

	if got := readPrefix(t, cli2, "data/"); !mapsEqual(got, want) {
		t.Fatalf("the recovered cluster holds %d keys under data/, want the %d acknowledged before the loss", len(got), len(want))
	}
	if id := clusterID(t, cli2); id == oldCluster {
		t.Errorf("the recovered cluster has the old cluster ID %x", id)
	}
	resp, err := cli2.Put(t.Context(), "data/after-the-recovery", "1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Revision <= seen+1_000_000_000 {
		t.Errorf("the recovered cluster writes at revision %d; want past %d, the highest seen plus the bump", resp.Header.Revision, seen)
	}
	requireCompactionError(t, watch)
	requireKeptData(t, movedAside(t, c, 3))
	if _, err := os.Stat(filepath.Join(c.StateDir(3), "retired.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node 3 still holds its promise after it joined the recovered cluster: %v", err)
	}

	// Node 1's agent reported the recovery at its start (a Warning Event,
	// the log, etcdlet_recovery_steps_total), and node 3's that it left
	// the old cluster; a restart of node 1's agent does not report the
	// recovery again.
	waitMetric(t, c.Agent(1), `etcdlet_recovery_steps_total{step="recovered"}`, "1", equals(1))
	waitMetric(t, c.Agent(3), `etcdlet_recovery_steps_total{step="left"}`, "1", equals(1))
	c.Agent(1).Stop()
	c.Agent(1).Restart()
	c.Wait(cli2, convergeTimeout, 1, 3, 4)
	waitMetric(t, c.Agent(1), `etcdlet_recovery_steps_total{step="recovered"}`, "0 after a restart", equals(0))
	if n := c.Agent(1).CountLog("starting on a cluster restored on this node", map[string]string{"kind": "recover"}); n != 1 {
		t.Errorf("node 1's agent reported the recovery %d times, want once", n)
	}
}

// requireUntouched asserts that a refused recovery changed nothing: the
// node's data dir is where it was, nothing moved aside.
func requireUntouched(t *testing.T, c *harness.Cluster, n int) {
	t.Helper()
	if moved := movedAside(t, c, n); len(moved) > 0 {
		t.Errorf("a refused recovery moved node %d's data aside: %v", n, moved)
	}
	if _, err := os.Stat(c.DataDir(n) + "/member/wal"); err != nil {
		t.Errorf("node %d's data after a refused recovery: %v", n, err)
	}
}
