package test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// kubeadm's etcd image of Kubernetes 1.33 and before, and the releases the
// version-change test names: only the 3.5 ones run (etcd 3.5.21, built by
// hack/etcd35.sh, stands for both), the others must never start.
const (
	image3521 = "registry.k8s.io/etcd:3.5.21-0"
	image3526 = "registry.k8s.io/etcd:3.5.26-0"
	image3616 = "registry.k8s.io/etcd:3.6.16-0"
	image373  = "registry.k8s.io/etcd:3.7.3-0"
)

// A new staticPod.image on a running host is a version change, and the
// agent lets it through only as far as etcd's rules allow against the
// running cluster. Three members run etcd 3.5.21 in static pods. Node 3's
// configuration names etcd 3.6: every 3.5 member must be at 3.5.26 before
// the first 3.6 starts (the patch floor), so the change waits, and the
// member keeps running 3.5.21, its manifest untouched and the cluster
// whole, while status says why. etcd 3.7, a skipped minor, waits too. A
// patch change (3.5.26) goes through: the kubelet restarts the member on
// the new manifest, and it comes back a voter.
func TestStaticPodVersionChangeIsChecked(t *testing.T) {
	t.Parallel()
	etcd35 := harness.Etcd35Binary(t)
	var mu sync.Mutex
	images := map[int]string{1: image3521, 2: image3521, 3: image3521}
	imageOf := func(n int) string { mu.Lock(); defer mu.Unlock(); return images[n] }
	c, cli := startCluster(t, netVersionChange, 3, func(o *harness.Options) {
		o.StaticPod = harness.EtcdBinary(t)
		o.StaticPodImage = imageOf
		o.EtcdForImage = func(image string) string {
			switch image {
			case image3521, image3526:
				return etcd35
			}
			t.Errorf("the kubelet was asked to run %s", image)
			return ""
		}
	})
	waitVersions := func(what string, want ...string) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, what, func() error {
			r, out, _ := statusJSON(t, c, 1)
			var got []string
			for _, m := range r.Members {
				got = append(got, m.Version)
			}
			if slices.Sort(got); !slices.Equal(got, want) {
				return errorf("members run %v, want %v\n%s", got, want, out)
			}
			return nil
		})
	}
	waitVersions("the members run etcd 3.5.21", "3.5.21", "3.5.21", "3.5.21")

	change := func(image string) {
		t.Helper()
		mu.Lock()
		images[3] = image
		mu.Unlock()
		c.Agent(3).Stop()
		c.WriteConfig(3)
		c.Agent(3).Restart()
	}
	for _, tt := range []struct {
		image string
		says  []string
	}{
		{image3616, []string{"keeping the local member on etcd 3.5, not restarting it on 3.6: etcd 3.6 does not start beside member etcd-main-",
			"which runs etcd 3.5.21: a rolling upgrade to 3.6 needs every 3.5 member at 3.5.26 or later first"}},
		{image373, []string{"keeping the local member on etcd 3.5, not restarting it on 3.7 (the lowest etcd version of the cluster's members is 3.5)"}},
	} {
		starts := c.Kubelet(3).Starts()
		change(tt.image)
		harness.Eventually(t, 30*time.Second, "node 3 holds the change to "+tt.image, func() error {
			out, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(3))
			for _, says := range tt.says {
				if !strings.Contains(out, says) {
					return errorf("status on node 3 does not say %q:\n%s", says, out)
				}
			}
			return nil
		})
		if data, err := os.ReadFile(manifestPath(c, 3)); err != nil || !strings.Contains(string(data), "image: "+image3521) {
			t.Errorf("node 3's manifest, with the change to %s held (%v):\n%s", tt.image, err, data)
		}
		if got := c.Kubelet(3).Starts(); got != starts {
			t.Errorf("with the change to %s held, the kubelet restarted node 3's member (%d starts, %d before)", tt.image, got, starts)
		}
		c.Wait(cli, convergeTimeout, 1, 2, 3)
		if _, err := cli.Put(t.Context(), "held-"+tt.image, "ok"); err != nil {
			t.Errorf("a write with the change to %s held: %v", tt.image, err)
		}
	}

	starts := c.Kubelet(3).Starts()
	change(image3526)
	harness.Eventually(t, 30*time.Second, "node 3's manifest names etcd 3.5.26", func() error {
		if data, _ := os.ReadFile(manifestPath(c, 3)); !strings.Contains(string(data), "image: "+image3526) {
			return errorf("node 3's manifest:\n%s", data)
		}
		return nil
	})
	harness.Eventually(t, 30*time.Second, "the kubelet restarts node 3's member", func() error {
		if got := c.Kubelet(3).Starts(); got == starts {
			return errorf("%d starts", got)
		}
		return nil
	})
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	waitVersions("the members run etcd 3.5.21 again", "3.5.21", "3.5.21", "3.5.21")
}
