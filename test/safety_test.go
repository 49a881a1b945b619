package test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/test/harness"
)

// The list grows from one member to three while the member's host is
// down. The two new nodes are fresh and a quorum of the list on their own,
// yet they must not bootstrap a cluster beside the real one: a listed node
// that does not answer is no consent. Once the member's host is back, all
// three converge into the original cluster, with its data.
func TestGrowWhileTheOnlyMemberIsDown(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netGrowDown, 1)
	clusterID := put(t, cli, "/safety/before", "kept")
	c.Agent(1).Stop()

	c.WriteMembers(1, 2, 3)
	c.Start(2)
	c.Start(3)
	harness.Eventually(t, convergeTimeout, "agents 2 and 3 wait for node 1, saying so", func() error {
		for _, n := range []int{2, 3} {
			failIfBootstrapped(t, c, n)
			if !waitsFor(c.Agent(n), c.IP(1)) {
				return errorf("agent %d has not logged waiting for %s", n, c.IP(1))
			}
		}
		return nil
	})
	waitPasses(t, c, []int{2, 3}, 3)
	for _, n := range []int{2, 3} {
		failIfBootstrapped(t, c, n)
		if entries, _ := os.ReadDir(c.DataDir(n)); len(entries) > 0 {
			t.Fatalf("agent %d created a data dir while it had to wait", n)
		}
	}

	c.Agent(1).Restart()
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	if got := get(t, cli, "/safety/before"); got != "kept" {
		t.Errorf("the original cluster's data is gone: %q", got)
	}
	if now := put(t, cli, "/safety/after", "x"); now != clusterID {
		t.Errorf("the cluster ID changed from %x to %x: a new cluster was formed", clusterID, now)
	}
	for _, n := range []int{2, 3} {
		failIfBootstrapped(t, c, n)
	}
}

// A listed address answers for another cluster (a node of another etcd
// cluster, or the list pointing at the wrong host). The real cluster keeps
// running: no member stops, nothing is moved aside, no learner is added
// for the foreign address, and the agents report what they see.
func TestForeignClusterOnAListedAddress(t *testing.T) {
	t.Parallel()
	c, _ := startCluster(t, netForeign, 3)
	// Clients of each cluster's own addresses: address 4 answers for the
	// other one.
	cli := c.ClientOf(1, 2, 3)
	w := c.StartWriter(cli)
	// A one-member cluster of its own on address 4, on the same ports,
	// with certificates from the same CA: the case TLS does not catch (a
	// CA shared by several clusters); with another CA the handshake fails.
	foreign := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netForeign, Ports: &c.Ports, TLS: c.Opts.TLS})
	foreign.WriteMembers(4)
	foreign.Start(4)
	fcli := foreign.ClientOf(4)
	foreign.Wait(fcli, convergeTimeout, 4)
	foreignID := put(t, fcli, "/foreign", "x")

	c.WriteMembers(1, 2, 3, 4)
	harness.Eventually(t, convergeTimeout, "the agents report the foreign cluster", func() error {
		for _, n := range seq(1, 3) {
			if c.Agent(n).CountLog("a listed address answers for another cluster", map[string]string{"address": c.IP(4)}) == 0 {
				return errorf("agent %d has not reported it", n)
			}
		}
		return nil
	})
	waitPasses(t, c, seq(1, 3), 3)
	if err := c.Expect(cli, 1, 2, 3); err != nil {
		t.Errorf("the real cluster changed: %v", err)
	}
	for _, n := range seq(1, 3) {
		if !c.Agent(n).Running() {
			t.Errorf("agent %d stopped", n)
		}
		if dirs := movedAside(t, c, n); len(dirs) > 0 {
			t.Errorf("agent %d moved its data aside: %v", n, dirs)
		}
	}
	if err := foreign.Expect(fcli, 4); err != nil {
		t.Errorf("the foreign cluster was changed: %v", err)
	}
	report := statusOf(t, c, 1)
	if !strings.Contains(strings.Join(report.Foreign, "\n"), hexID(foreignID)) {
		t.Errorf("etcdlet status does not name the foreign cluster %x: %v", foreignID, report.Foreign)
	}
	checkWrites(t, w)
}

// One member raised a NOSPACE alarm (its own backend over its quota). The
// alarm marks that member, not every member: the other two stay healthy,
// the cluster keeps quorum for membership changes, and a new member joins.
func TestAnAlarmMarksOnlyItsMember(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netAlarm, 3, func(o *harness.Options) {
		o.EtcdArgs = func(n int) map[string]string {
			if n == 1 {
				return map[string]string{"quota-backend-bytes": "4194304"} // 4 MiB
			}
			return nil
		}
	})
	// Fill member 1's backend through its own endpoint until it refuses.
	one := c.ClientOf(1)
	value := strings.Repeat("x", 256<<10)
	harness.Eventually(t, convergeTimeout, "member 1 raises NOSPACE", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := one.Put(ctx, "/fill/"+time.Now().String(), value)
		if rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace) {
			return nil
		}
		return errorf("put: %v", err)
	})

	c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	report := statusOf(t, c, 2)
	for _, m := range report.Members {
		alarmed := strings.Contains(m.Problem, "NOSPACE")
		if (m.Name == c.Name(1)) != alarmed {
			t.Errorf("member %s: health %s, problem %q; only %s raised the alarm", m.Name, m.Health, m.Problem, c.Name(1))
		}
	}
}

// A listed node whose data dir holds a backend database but no
// write-ahead log (an interrupted start, a copy gone wrong) has data all
// the same: it is moved aside, kept, before the node joins.
func TestDataWithoutAWALIsMovedAsideBeforeAJoin(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netSnapOnly, 3)
	db := filepath.Join(c.DataDir(4), "member", "snap", "db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, []byte("a backend left behind"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	moved := movedAside(t, c, 4)
	if len(moved) != 1 {
		t.Fatalf("data dirs moved aside: %v, want the one with the left-behind backend", moved)
	}
	if b, err := os.ReadFile(filepath.Join(moved[0], "member", "snap", "db")); err != nil || string(b) != "a backend left behind" {
		t.Errorf("the moved-aside backend was not kept: %q, %v", b, err)
	}
}

// A new list that shares no address with the current voters would orphan
// the cluster: it is refused, the last good list stays in force, and no
// membership change is made.
func TestAListThatWouldOrphanTheClusterIsRefused(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netOrphan, 3)
	c.WriteMembers(4, 5, 6)
	harness.Eventually(t, convergeTimeout, "the agents refuse the list", func() error {
		for _, n := range seq(1, 3) {
			if c.Agent(n).CountLog("member list refused: it would orphan the cluster", nil) == 0 {
				return errorf("agent %d has not refused it", n)
			}
		}
		return nil
	})
	waitPasses(t, c, seq(1, 3), 3)
	if err := c.Expect(cli, 1, 2, 3); err != nil {
		t.Errorf("membership changed after an orphaning list: %v", err)
	}
	if n := countAll(c, seq(1, 3), "membership change", nil); n != 0 {
		t.Errorf("%d membership changes after an orphaning list", n)
	}
	// A list in steps (one new address at a time) is accepted.
	c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
}

func failIfBootstrapped(t *testing.T, c *harness.Cluster, n int) {
	t.Helper()
	if c.Agent(n).CountLog("local member", map[string]string{"decision": "bootstrap"}) > 0 {
		t.Fatalf("agent %d bootstrapped a new cluster while a listed member was down", n)
	}
}

// waitsFor reports whether the agent logged waiting, naming addr.
func waitsFor(a *harness.Agent, addr string) bool {
	for _, e := range a.LogEntries() {
		if e["msg"] == "local member" && e["decision"] == "wait" && strings.Contains(e["reason"].(string), addr) {
			return true
		}
	}
	return false
}

// put writes a key and returns the ID of the cluster that took it.
func put(t *testing.T, cli *clientv3.Client, key, value string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, key, value)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.ClusterId
}

func get(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// statusOf runs `etcdlet status -o json` with agent n's configuration.
func statusOf(t *testing.T, c *harness.Cluster, n int) statusreport.Report {
	t.Helper()
	out, err := exec.Command(binary, "status", "--config", c.ConfigPath(n), "-o", "json").Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("etcdlet status: %v", err)
	}
	var r statusreport.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("etcdlet status: %v\n%s", err, out)
	}
	return r
}

func hexID(id uint64) string { return strconv.FormatUint(id, 16) }
