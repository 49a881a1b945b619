package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/test/harness"
)

// members.source cluster, as an operator uses it: the list lives in etcd,
// one command changes it from any host, and every agent follows the same
// list. The first host founds the cluster with `etcdlet bootstrap
// --approve` (its first list is itself); the others are installed with
// only members.seeds and are added with `etcdlet members add`, run on a
// host that is not a member yet. A second change while the first is in
// flight is refused; a host that never comes up is taken back; a removal
// takes a member out and its data is moved aside; every agent's copy is
// the stored list.
func TestMembersKeptInTheCluster(t *testing.T) {
	t.Parallel()
	seed := fmt.Sprintf("127.0.%d.1", netClusterList)
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netClusterList, Bootstrap: "explicit",
		Members: fmt.Sprintf("members:\n  source: cluster\n  seeds: [%s]\n", seed)})
	c.Start(1)
	c.Start(3)
	members := func(n int, args ...string) (string, string, int) {
		return etcdlet(t, append(append([]string{"members"}, args...), "--config", c.ConfigPath(n))...)
	}

	out, stderr, code := etcdlet(t, "bootstrap", "--config", c.ConfigPath(1), "--approve")
	if code != 0 {
		t.Fatalf("etcdlet bootstrap --approve: exit %d\n%s%s", code, out, stderr)
	}
	cli := c.Client()
	c.Wait(cli, convergeTimeout, 1)
	harness.Eventually(t, 30*time.Second, "host 3, not a member, reads the founder's list through its seed", func() error {
		out, stderr, code := members(3, "show")
		if code != 0 || !strings.Contains(out, "\n  "+c.IP(1)+"\n") || !strings.Contains(out, "in flight: nothing") {
			return errorf("members show: exit %d\n%s%s", code, out, stderr)
		}
		return nil
	})

	if out, stderr, code := members(3, "add", c.IP(2)); code != 0 || !strings.Contains(out, "stored: every agent carries it out") {
		t.Fatalf("members add %s: exit %d\n%s%s", c.IP(2), code, out, stderr)
	}
	// Host 2 is not up: its join stays in flight, and another change waits.
	_, stderr, code = members(3, "add", c.IP(3))
	if code != 1 || !strings.Contains(stderr, "a change of the member list is in flight") || !strings.Contains(stderr, c.IP(2)+": ") {
		t.Fatalf("members add while a join is in flight: exit %d\n%s", code, stderr)
	}
	c.Start(2)
	c.Wait(cli, convergeTimeout, 1, 2)
	if out, stderr, code := members(1, "add", c.IP(3)); code != 0 {
		t.Fatalf("members add %s: exit %d\n%s%s", c.IP(3), code, out, stderr)
	}
	c.Wait(cli, convergeTimeout, 1, 2, 3)

	// A host that never comes up: its join is taken back, although it is
	// in flight.
	if out, stderr, code := members(2, "add", c.IP(4)); code != 0 {
		t.Fatalf("members add %s: exit %d\n%s%s", c.IP(4), code, out, stderr)
	}
	if _, stderr, code := members(2, "add", c.IP(5)); code != 1 || !strings.Contains(stderr, "in flight") {
		t.Fatalf("a second add in flight: exit %d\n%s", code, stderr)
	}
	if out, stderr, code := members(2, "remove", c.IP(4)); code != 0 {
		t.Fatalf("taking back the join of %s: exit %d\n%s%s", c.IP(4), code, out, stderr)
	}
	c.Wait(cli, convergeTimeout, 1, 2, 3)

	if out, stderr, code := members(3, "remove", c.IP(2)); code != 0 {
		t.Fatalf("members remove %s: exit %d\n%s%s", c.IP(2), code, out, stderr)
	}
	c.Wait(cli, convergeTimeout, 1, 3)
	harness.Eventually(t, 30*time.Second, "the removed member's data moved aside", func() error {
		if len(movedAside(t, c, 2)) == 0 {
			return errorf("nothing moved aside yet")
		}
		return nil
	})
	requireKeptData(t, movedAside(t, c, 2))
	want := c.IP(1) + " " + c.IP(3)
	harness.Eventually(t, 30*time.Second, "every agent keeps the stored list", func() error {
		for _, n := range seq(1, 3) {
			if got := keptList(t, c, n); got != want {
				return errorf("agent %d keeps %q, want %q", n, got, want)
			}
		}
		return nil
	})
	out, stderr, code = members(1, "show")
	if code != 0 || !strings.Contains(out, "last change: remove "+c.IP(2)+", by ") || !strings.Contains(out, "in flight: nothing") {
		t.Errorf("members show at the end: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code := etcdlet(t, "validate", "--config", c.ConfigPath(2)); code != 0 || !strings.Contains(out, "2 listed members in this node's copy of the cluster's list") {
		t.Errorf("validate on the removed host: exit %d\n%s", code, out)
	}
	out, stderr, code = etcdlet(t, "status", "--config", c.ConfigPath(3), "--wait", "30s")
	if code != 0 || !strings.Contains(out, "member list: kept in cluster ") || !strings.Contains(out, "(last change: remove "+c.IP(2)+", by ") ||
		!strings.Contains(out, "; this node's copy holds it\n") {
		t.Errorf("status --wait after the changes: exit %d\n%s%s", code, out, stderr)
	}
}

// keptList is agent n's copy of the cluster's list, its addresses in
// order.
func keptList(t *testing.T, c *harness.Cluster, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "state", config.ClusterMembersFile))
	if err != nil {
		return err.Error()
	}
	var addrs []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			addrs = append(addrs, line)
		}
	}
	return strings.Join(addrs, " ")
}
