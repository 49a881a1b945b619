package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	etcdversion "go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/storage/schema"

	"github.com/etcdlet/etcdlet/test/harness"
)

// A member is never started with an embedded etcd below the cluster
// version its data records: etcd would stop at once ("invalid downgrade;
// server version is lower than determined cluster version"), in a crash
// loop that says little. The agent refuses with the rule named, touches
// nothing, and starts the member once the data's version allows it.
func TestAnEtcdBelowTheClusterVersionIsNotStarted(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netVersion, 3)
	var major, minor int
	if _, err := fmt.Sscanf(etcdversion.Version, "%d.%d", &major, &minor); err != nil {
		t.Fatal(err)
	}
	own, later := fmt.Sprintf("%d.%d.0", major, minor), fmt.Sprintf("%d.%d.0", major, minor+1)

	c.Agent(3).Stop()
	recordClusterVersion(t, c.DataDir(3), later)
	c.Agent(3).Restart()
	want := fmt.Sprintf("etcd %d.%d cannot run a member of a cluster at version %d.%d", major, minor, major, minor+1)
	harness.Eventually(t, 30*time.Second, "node 3 refuses to start its member", func() error {
		out, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(3))
		if !strings.Contains(out, want) {
			return errorf("status on node 3 does not say %q:\n%s", want, out)
		}
		return nil
	})
	requireUntouched(t, c, 3)

	c.Agent(3).Stop()
	recordClusterVersion(t, c.DataDir(3), own)
	c.Agent(3).Restart()
	c.Wait(cli, convergeTimeout, 1, 2, 3)
}

// recordClusterVersion writes version as the cluster version into the
// backend of a stopped member's data dir, where etcd keeps it.
func recordClusterVersion(t *testing.T, dataDir, version string) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dataDir, "member", "snap", "db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(schema.Cluster.Name())
		if err != nil {
			return err
		}
		return b.Put(schema.ClusterClusterVersionKeyName, []byte(version))
	}); err != nil {
		t.Fatal(err)
	}
}

// etcdlet etcd downgrade drives etcd's downgrade API and refuses, naming
// the rule, what would strand the cluster: a skipped minor, a member down
// while the members are to be restarted one by one, a second downgrade.
// etcdlet status shows the cluster version etcd moves down and back up.
// The members here all run the etcd etcdlet links, so the downgrade is
// enabled and cancelled, never finished.
func TestEtcdDowngradeCommands(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netDowngrade, 3)
	cfg := c.ConfigPath(1)
	var major, minor int
	if _, err := fmt.Sscanf(etcdversion.Version, "%d.%d", &major, &minor); err != nil {
		t.Fatal(err)
	}
	own, lower, skipped := fmt.Sprintf("%d.%d", major, minor), fmt.Sprintf("%d.%d", major, minor-1), fmt.Sprintf("%d.%d", major, minor-2)
	downgrade := func(args ...string) (string, string, int) {
		return etcdlet(t, append(append([]string{"etcd", "downgrade"}, args...), "--config", cfg)...)
	}
	expectDowngradeRefused := func(rule string, args ...string) {
		t.Helper()
		if _, stderr, code := downgrade(args...); code != 1 || !strings.Contains(stderr, rule) {
			t.Errorf("etcd downgrade %s: exit %d, stderr %q; want it refused: %q", strings.Join(args, " "), code, stderr, rule)
		}
		if r, _, _ := statusJSON(t, c, 1); r.Downgrade != "" {
			t.Errorf("a refused downgrade %s left a downgrade to %s enabled", strings.Join(args, " "), r.Downgrade)
		}
	}

	// clusterVersion waits until status shows the cluster version want
	// (etcd's leader moves it a few seconds after a change).
	clusterVersion := func(want string) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, "status shows cluster version "+want, func() error {
			if r, _, _ := statusJSON(t, c, 1); r.ClusterVersion != want+".0" {
				return errorf("cluster version %q", r.ClusterVersion)
			}
			return nil
		})
	}
	clusterVersion(own)

	expectDowngradeRefused(fmt.Sprintf("the cluster runs etcd %s, and etcd downgrades one minor at a time: the target must be %s", own, lower), "validate", skipped)
	expectDowngradeRefused("want a version MAJOR.MINOR", "enable", "latest")
	if out, stderr, code := downgrade("validate", lower); code != 0 || !strings.Contains(out, fmt.Sprintf("etcd accepts a downgrade of the cluster from version %s to %s", own, lower)) {
		t.Errorf("validate %s: exit %d: %s%s", lower, code, out, stderr)
	}

	// A member down: the first restart of the downgrade would cost quorum.
	c.Agent(3).Stop()
	waitQuorum(t, cli)
	expectDowngradeRefused(c.Name(3)+" ", "enable", lower)
	c.Agent(3).Restart()
	c.Wait(cli, convergeTimeout, 1, 2, 3)

	if out, stderr, code := downgrade("enable", lower); code != 0 || !strings.Contains(out, "downgrade to "+lower+" enabled") {
		t.Fatalf("enable %s: exit %d: %s%s", lower, code, out, stderr)
	}
	// Every member reports it, and status says so.
	harness.Eventually(t, 30*time.Second, "status shows the downgrade", func() error {
		table, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(2))
		if !strings.Contains(table, "downgrade: enabled, to "+lower) {
			return errorf("status does not show the downgrade:\n%s", table)
		}
		return nil
	})
	clusterVersion(lower)
	if _, stderr, code := downgrade("enable", lower); code != 1 || !strings.Contains(stderr, "a downgrade to "+lower+" is enabled already") {
		t.Errorf("a second enable: exit %d, stderr %q; want it refused", code, stderr)
	}

	if out, stderr, code := downgrade("cancel"); code != 0 || !strings.Contains(out, "downgrade to "+lower+" cancelled") {
		t.Fatalf("cancel: exit %d: %s%s", code, out, stderr)
	}
	if r, _, _ := statusJSON(t, c, 1); r.Downgrade != "" {
		t.Errorf("status after the cancel still shows a downgrade to %s", r.Downgrade)
	}
	if out, stderr, code := downgrade("cancel"); code != 0 || !strings.Contains(out, "no downgrade is enabled") {
		t.Errorf("a cancel with none enabled: exit %d: %s%s", code, out, stderr)
	}
	// Every member runs the newer minor: etcd moves the version back.
	clusterVersion(own)
	// The cluster goes on: writes work, every member is still there.
	if err := c.Expect(cli, 1, 2, 3); err != nil {
		t.Error(err)
	}
}
