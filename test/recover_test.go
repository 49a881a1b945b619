package test

import (
	"context"
	"fmt"
	"os"
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
// node 2 named gone for good; a second recovery on node 3 is refused. Node
// 3 rejoins (etcdlet restore --rejoin), a new host 4 replaces 2 in the
// list, and all three form the recovered cluster.
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
	if err := os.RemoveAll(c.DataDir(2)); err != nil { // host 2 is gone for good
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
	for _, w := range []string{"recovered at revision", c.IP(2) + " is gone for good", "marked compacted"} {
		if !strings.Contains(out, w) {
			t.Errorf("recover's output lacks %q:\n%s", w, out)
		}
	}
	requireKeptData(t, movedAside(t, c, 1))

	// The recovered cluster runs on node 1: a second recovery, on a
	// survivor that has not rejoined, would start a third cluster.
	c.Agent(1).Restart()
	c.Agent(3).Stop()
	harness.Eventually(t, 30*time.Second, "a second recovery, on node 3, is refused", func() error {
		out, code := recoverOn(3, gone)
		if code == 0 || !strings.Contains(out, "if a recovery or restore already ran there, this node joins it (etcdlet restore --rejoin)") {
			return errorf("recover on node 3 after node 1 recovered: exit %d\n%s", code, out)
		}
		return nil
	})
	requireUntouched(t, c, 3)

	// Node 3 rejoins; host 4 replaces the lost host 2 in the list.
	if o, stderr, code := etcdlet(t, "restore", "--rejoin", "--yes", "--config", c.ConfigPath(3)); code != 0 {
		t.Fatalf("restore --rejoin on node 3: exit %d\n%s%s", code, o, stderr)
	}
	c.WriteMembers(1, 3, 4)
	c.WriteConfig(4)
	c.Agent(3).Restart()
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
