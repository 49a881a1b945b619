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
