package test

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// The images of the rolling upgrade: etcd 3.6.16 (built by hack/etcd36.sh)
// and 3.7.0, the etcd hack/envtest.sh builds.
const (
	upgradeFrom = "registry.k8s.io/etcd:3.6.16-0"
	upgradeTo   = "registry.k8s.io/etcd:3.7.0-0"
)

// A rolling etcd upgrade of a static-pod cluster, 3.6.16 to 3.7.0, as
// docs/operations.md does it (a new staticPod.image, one host at a time,
// the next once the member is back), and the downgrade back through etcd's
// API (etcdlet etcd downgrade enable 3.6, then the old image one host at a
// time), on real etcd releases, under a writer that never sees the cluster
// refuse writes for longer than an election: each changed member comes
// back a voter of the new version, node 2's agent killed as soon as it
// wrote the new manifest resumes, and the cluster version follows (3.6,
// 3.7, then 3.6 once every member runs it and etcd ends the downgrade).
func TestRollingUpgradeAndDowngradeOnStaticPods(t *testing.T) {
	t.Parallel()
	etcd36, etcd37 := harness.Etcd36Binary(t), harness.EtcdBinary(t)
	var mu sync.Mutex
	images := map[int]string{1: upgradeFrom, 2: upgradeFrom, 3: upgradeFrom}
	c, cli := startCluster(t, netRollingUpgrade, 3, func(o *harness.Options) {
		o.StaticPod = etcd37
		o.StaticPodImage = func(n int) string { mu.Lock(); defer mu.Unlock(); return images[n] }
		o.EtcdForImage = func(image string) string {
			switch image {
			case upgradeFrom:
				return etcd36
			case upgradeTo:
				return etcd37
			}
			t.Errorf("the kubelet was asked to run %s", image)
			return ""
		}
	})
	cfg := c.ConfigPath(1)
	versions := func(what, cluster string, want ...string) {
		t.Helper()
		harness.Eventually(t, time.Minute, what, func() error {
			r, out, _ := statusJSON(t, c, 1)
			var got []string
			for _, m := range r.Members {
				got = append(got, m.Version)
			}
			if slices.Sort(got); !slices.Equal(got, want) || r.ClusterVersion != cluster {
				return errorf("members run %v, cluster version %q; want %v, %s\n%s", got, r.ClusterVersion, want, cluster, out)
			}
			return nil
		})
	}
	versions("the members run etcd 3.6.16", "3.6.0", "3.6.16", "3.6.16", "3.6.16")

	// roll changes node n's image, restarts its agent and waits until its
	// member runs version; with kill, the agent is killed as soon as it
	// wrote the new manifest, and started again.
	roll := func(n int, image, version string, kill bool) {
		t.Helper()
		mu.Lock()
		images[n] = image
		mu.Unlock()
		c.Agent(n).Stop()
		c.WriteConfig(n)
		c.Agent(n).Restart()
		if kill {
			harness.Eventually(t, 30*time.Second, "node 2's agent writes the new manifest", func() error {
				if data, _ := os.ReadFile(manifestPath(c, n)); !strings.Contains(string(data), "image: "+image) {
					return errorf("node %d's manifest names another image", n)
				}
				return nil
			})
			c.Agent(n).Kill()
			c.Agent(n).Restart()
		}
		harness.Eventually(t, time.Minute, "node's member runs "+version, func() error {
			r, out, _ := statusJSON(t, c, 1)
			for _, m := range r.Members {
				if m.Name == c.Name(n) && m.Version == version && m.Health == "healthy" && (m.Role == "voter" || m.Role == "leader") {
					return nil
				}
			}
			return errorf("node %d's member is no healthy voter on %s:\n%s", n, version, out)
		})
		c.Wait(cli, convergeTimeout, 1, 2, 3)
	}

	w := c.StartWriter(cli)
	for _, n := range seq(1, 3) {
		roll(n, upgradeTo, "3.7.0", n == 2)
	}
	versions("every member runs etcd 3.7.0", "3.7.0", "3.7.0", "3.7.0", "3.7.0")

	if out, stderr, code := etcdlet(t, "etcd", "downgrade", "enable", "3.6", "--config", cfg); code != 0 {
		t.Fatalf("etcdlet etcd downgrade enable 3.6: exit %d\n%s%s", code, out, stderr)
	}
	versions("the downgrade lowers the cluster version", "3.6.0", "3.7.0", "3.7.0", "3.7.0")
	for _, n := range seq(1, 3) {
		roll(n, upgradeFrom, "3.6.16", false)
	}
	versions("every member runs etcd 3.6.16 again", "3.6.0", "3.6.16", "3.6.16", "3.6.16")
	harness.Eventually(t, time.Minute, "etcd ends the downgrade once every member runs 3.6", func() error {
		if r, out, _ := statusJSON(t, c, 1); r.Downgrade != "" {
			return errorf("a downgrade to %s is still enabled:\n%s", r.Downgrade, out)
		}
		return nil
	})
	checkWrites(t, w)
}
