package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/test/campaign"
	"github.com/etcdlet/etcdlet/test/harness"
)

// The images of the rolling upgrade: etcd 3.6.16 (built by hack/etcd36.sh)
// and 3.7.0, the etcd hack/envtest.sh builds.
const (
	upgradeFrom = "registry.k8s.io/etcd:3.6.16-0"
	upgradeTo   = "registry.k8s.io/etcd:3.7.0-0"
)

// A rolling etcd upgrade of a static-pod cluster, 3.6.16 to 3.7.0, and
// the downgrade back through etcd's API (etcdlet etcd downgrade enable
// 3.6), on real etcd releases, the way configuration management does it:
// the new staticPod.image reaches every host at once. Each agent holds the
// change and restarts its member through a member-restart task under the
// cluster-wide task lock, so the members restart one at a time (the
// tasks' windows never overlap), each after its database was saved, and
// the lock goes on only once the member is back as a caught-up voter of
// the new version. A writer never sees the cluster refuse writes for
// longer than an election; node 2's agent, killed while its task waits
// for its member, resumes the task; and the cluster version follows (3.6,
// 3.7, then 3.6 once every member runs it and etcd ends the downgrade).
// Clients beside the writer check that what they saw is linearizable per
// key and that no revision went backwards, as the fault campaign checks.
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
		harness.Eventually(t, 3*time.Minute, what, func() error {
			r, out, _ := statusJSON(t, c, 1)
			var got []string
			for _, m := range r.Members {
				if m.Health == "healthy" && (m.Role == "voter" || m.Role == "leader") {
					got = append(got, m.Version)
				}
			}
			if slices.Sort(got); !slices.Equal(got, want) || r.ClusterVersion != cluster {
				return errorf("healthy voters run %v, cluster version %q; want %v, %s\n%s", got, r.ClusterVersion, want, cluster, out)
			}
			return nil
		})
	}
	versions("the members run etcd 3.6.16", "3.6.0", "3.6.16", "3.6.16", "3.6.16")

	// push gives every host the image at once, restarting the agents
	// that read it; with killNode, that node's agent is killed once its
	// task stopped the member and the new manifest is written, and
	// started again.
	push := func(image string, killNode int) {
		t.Helper()
		mu.Lock()
		for n := range images {
			images[n] = image
		}
		mu.Unlock()
		for _, n := range seq(1, 3) {
			c.Agent(n).Stop()
			c.WriteConfig(n)
			c.Agent(n).Restart()
		}
		if killNode == 0 {
			return
		}
		harness.Eventually(t, 3*time.Minute, "the agent writes the new manifest", func() error {
			if data, _ := os.ReadFile(manifestPath(c, killNode)); !strings.Contains(string(data), "image: "+image) {
				return errorf("node %d's manifest names another image", killNode)
			}
			return nil
		})
		c.Agent(killNode).Kill()
		c.Agent(killNode).Restart()
	}

	w := c.StartWriter(cli)
	var clis []*clientv3.Client
	for range 3 {
		clis = append(clis, c.ClientOf(1, 2, 3))
	}
	clients := campaign.StartClients(clis, uint64(time.Now().UnixNano()))
	push(upgradeTo, 2)
	versions("every member runs etcd 3.7.0", "3.7.0", "3.7.0", "3.7.0", "3.7.0")
	upgrades := restartsOneAtATime(t, c, "3.7")

	if out, stderr, code := etcdlet(t, "etcd", "downgrade", "enable", "3.6", "--config", cfg); code != 0 {
		t.Fatalf("etcdlet etcd downgrade enable 3.6: exit %d\n%s%s", code, out, stderr)
	}
	versions("the downgrade lowers the cluster version", "3.6.0", "3.7.0", "3.7.0", "3.7.0")
	push(upgradeFrom, 0)
	versions("every member runs etcd 3.6.16 again", "3.6.0", "3.6.16", "3.6.16", "3.6.16")
	harness.Eventually(t, time.Minute, "etcd ends the downgrade once every member runs 3.6", func() error {
		if r, out, _ := statusJSON(t, c, 1); r.Downgrade != "" {
			return errorf("a downgrade to %s is still enabled:\n%s", r.Downgrade, out)
		}
		return nil
	})
	downgrades := restartsOneAtATime(t, c, "3.6")
	checkWrites(t, w)
	summary, violations := clients.Check(cli, 5*time.Minute)
	for _, v := range violations {
		t.Errorf("violation: %s", v)
	}
	t.Logf("upgrade: %s; downgrade: %s; clients: %s", upgrades, downgrades, summary)
}

// restartsOneAtATime checks that each node ran one member-restart task
// to etcd version, that no two of these tasks held the cluster-wide lock
// at the same time, and that each saved the member's database first; it
// returns the tasks' durations.
func restartsOneAtATime(t *testing.T, c *harness.Cluster, version string) string {
	t.Helper()
	type window struct {
		node     int
		from, to time.Time
	}
	var windows []window
	for _, n := range seq(1, 3) {
		// A task its agent resumed after a kill may still wait for the
		// lock a moment after its member runs the new version.
		var succeeded []task.Task
		harness.Eventually(t, time.Minute, fmt.Sprintf("node %d's member-restart task to etcd %s succeeds", n, version), func() error {
			succeeded = nil
			for _, tk := range nodeTasks(t, c, n) {
				if tk.Type == "member-restart" && tk.Params["version"] == version && tk.Phase == "Succeeded" {
					succeeded = append(succeeded, tk)
				}
			}
			if len(succeeded) != 1 {
				return errorf("node %d ran %d succeeded member-restart tasks to etcd %s, want 1", n, len(succeeded), version)
			}
			return nil
		})
		tk := succeeded[0]
		var out struct{ Version, Saved string }
		if err := json.Unmarshal(tk.Output, &out); err != nil || !strings.HasPrefix(out.Version, version+".") {
			t.Errorf("node %d: task %s output %s: want version %s.x", n, tk.ID, tk.Output, version)
		}
		if fi, err := os.Stat(out.Saved); err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 ||
			filepath.Dir(out.Saved) != filepath.Join(c.StateDir(n), "version-changes") {
			t.Errorf("node %d: the database saved before the change, %q: %v %v", n, out.Saved, fi, err)
		}
		windows = append(windows, window{n, *tk.StartedAt, tk.LastTransitionTime})
	}
	slices.SortFunc(windows, func(a, b window) int { return a.from.Compare(b.from) })
	var took []string
	for i, w := range windows {
		if i > 0 && w.from.Before(windows[i-1].to) {
			t.Errorf("node %d's restart began at %s, before node %d's ended at %s", w.node, w.from.Format(time.StampMilli), windows[i-1].node, windows[i-1].to.Format(time.StampMilli))
		}
		took = append(took, fmt.Sprintf("node %d %s", w.node, w.to.Sub(w.from).Round(100*time.Millisecond)))
	}
	return strings.Join(took, ", ")
}

// nodeTasks are node n's recent tasks in full, as etcdlet task list and
// task status show them.
func nodeTasks(t *testing.T, c *harness.Cluster, n int) []task.Task {
	t.Helper()
	list, stderr, code := etcdlet(t, "task", "list", "--config", c.ConfigPath(n))
	if code != 0 {
		t.Fatalf("etcdlet task list on node %d: exit %d\n%s", n, code, stderr)
	}
	var tasks []task.Task
	for _, line := range strings.Split(list, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "member-restart" {
			continue
		}
		out, stderr, code := etcdlet(t, "task", "status", f[0], "--config", c.ConfigPath(n))
		var tk task.Task
		if code != 0 || json.Unmarshal([]byte(out), &tk) != nil {
			t.Fatalf("etcdlet task status %s on node %d: exit %d\n%s%s", f[0], n, code, out, stderr)
		}
		tasks = append(tasks, tk)
	}
	return tasks
}
