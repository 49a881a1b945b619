package test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// A members file that breaks the address-list rules is rejected with its
// reasons and changes nothing, on every agent; so is a configuration file
// edited into one that is invalid or needs a restart, which the agent
// reloads on its own and etcdlet status reports. A later valid list is
// acted on again.
func TestBadReloadChangesNothing(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netBadReload, 3, func(o *harness.Options) { o.Replicas = 3 })
	w := c.StartWriter(cli)
	c.Start(4) // not listed: must stay out through every bad list
	agents := seq(1, 4)

	bad := []struct{ name, content, reason string }{
		{"duplicate", fmt.Sprintf("%s\n%s\n%s\n", c.IP(1), c.IP(2), c.IP(2)), "duplicate of members.file line 2"},
		{"not canonical", fmt.Sprintf("%s\n%s\n127.0.%d.04\n", c.IP(1), c.IP(2), netBadReload), "must be an IPv4 or IPv6 address"},
		{"length differs from replicas", fmt.Sprintf("%s\n%s\n%s\n%s\n", c.IP(1), c.IP(2), c.IP(3), c.IP(4)), "must have exactly cluster.replicas (3) entries"},
		{"empty", "# nothing\n", "must have exactly cluster.replicas (3) entries"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			before := rejections(c, agents)
			c.WriteMembersRaw(b.content)
			harness.Eventually(t, 10*time.Second, "every agent rejects the list", func() error {
				for _, n := range agents {
					if got := c.Agent(n).CountLog("member list rejected; the last good list stays in force", nil); got <= before[n] {
						return errorf("agent %d has not rejected it", n)
					}
				}
				return nil
			})
			for _, n := range agents {
				if !lastRejectionMentions(c.Agent(n), b.reason) {
					t.Errorf("agent %d's rejection does not say %q", n, b.reason)
				}
			}
			waitPasses(t, c, agents, 2)
			if err := c.Expect(cli, 1, 2, 3); err != nil {
				t.Fatalf("membership changed after a rejected list: %v", err)
			}
		})
	}

	t.Run("the configuration file edited", func(t *testing.T) {
		cfg := c.ConfigPath(1)
		orig, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.WriteFile(cfg, orig, 0o600); err != nil {
				t.Errorf("restore %s: %v", cfg, err)
			}
		}()
		const (
			rejected = "configuration reload rejected; the running configuration stays in force"
			refused  = "configuration reload refused"
			reloaded = "configuration reloaded"
		)
		// edit writes the file and waits until the agent, on its own
		// (no signal), logged the verdict once more.
		edit := func(content []byte, verdict string) {
			t.Helper()
			before := c.Agent(1).CountLog(verdict, nil)
			if err := os.WriteFile(cfg, content, 0o600); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, 10*time.Second, "the agent reloads the edited file on its own: "+verdict, func() error {
				if c.Agent(1).CountLog(verdict, nil) <= before {
					return errorf("agent 1 has not logged %q again", verdict)
				}
				return nil
			})
		}
		invalid := append(slices.Clone(orig), []byte("bogus: true\n")...)
		edit(invalid, rejected)
		// A change that needs a restart is refused, and etcdlet status
		// says that the file is not the configuration in force, and why.
		needsRestart := []byte(strings.Replace(string(orig), fmt.Sprintf("clientPort: %d", c.Ports.Client), "clientPort: 1", 1))
		edit(needsRestart, refused)
		if out, _, _ := etcdlet(t, "status", "--config", cfg); !strings.Contains(out, "CONFIGURATION NOT IN FORCE") || !strings.Contains(out, "reload refused: etcd.clientPort changed") {
			t.Errorf("etcdlet status with a refused file on disk does not say so:\n%s", out)
		}
		// etcdlet reload (the unit's ExecReload) sends SIGHUP and reports
		// the agent's verdict; an invalid file is not sent at all.
		pid := strconv.Itoa(c.Agent(1).PID())
		if _, stderr, code := etcdlet(t, "reload", "--config", cfg, "--pid", pid); code != 1 || !strings.Contains(stderr, "reload refused: etcd.clientPort changed") {
			t.Errorf("etcdlet reload of a configuration that needs a restart: exit %d, %q; want 1 naming etcd.clientPort", code, stderr)
		}
		edit(invalid, rejected)
		rejections := c.Agent(1).CountLog(rejected, nil)
		if _, stderr, code := etcdlet(t, "reload", "--config", cfg, "--pid", pid); code != 1 || !strings.Contains(stderr, "reload not sent") || !strings.Contains(stderr, "bogus") {
			t.Errorf("etcdlet reload of an invalid file: exit %d, %q; want 1, not sent, naming the field", code, stderr)
		}
		waitPasses(t, c, []int{1}, 2)
		if !c.Agent(1).Running() {
			t.Fatal("agent 1 exited on a bad reload")
		}
		if got := c.Agent(1).CountLog(rejected, nil); got != rejections {
			t.Errorf("etcdlet reload signalled the agent with an invalid file, or the unchanged file was reloaded again (%d rejections, %d before)", got, rejections)
		}
		// The file put back is in force again, on its own.
		edit(orig, reloaded)
		if out, _, _ := etcdlet(t, "status", "--config", cfg); strings.Contains(out, "CONFIGURATION NOT IN FORCE") {
			t.Errorf("etcdlet status says the file in force is not:\n%s", out)
		}
		if stdout, stderr, code := etcdlet(t, "reload", "--config", cfg, "--pid", pid); code != 0 || !strings.Contains(stdout, "configuration reloaded") {
			t.Errorf("etcdlet reload of the running file: exit %d, %q %q; want 0, reloaded", code, stdout, stderr)
		}
		if err := c.Expect(cli, 1, 2, 3); err != nil {
			t.Fatalf("membership changed after a refused reload: %v", err)
		}
	})

	// The last good list stayed in force; a new good one is acted on.
	c.WriteMembers(1, 2, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 4)
	checkWrites(t, w)
}

func rejections(c *harness.Cluster, ns []int) map[int]int {
	m := map[int]int{}
	for _, n := range ns {
		m[n] = c.Agent(n).CountLog("member list rejected; the last good list stays in force", nil)
	}
	return m
}

func lastRejectionMentions(a *harness.Agent, reason string) bool {
	var last string
	for _, e := range a.LogEntries() {
		if e["msg"] == "member list rejected; the last good list stays in force" {
			last = fmt.Sprint(e["problems"])
		}
	}
	return strings.Contains(last, reason)
}

// waitPasses waits until every agent finished k more reconcile passes, so
// an assertion that "nothing changed" follows passes that could have.
func waitPasses(t *testing.T, c *harness.Cluster, ns []int, k float64) {
	t.Helper()
	start := map[int]float64{}
	harness.Eventually(t, 30*time.Second, "the pass counters read", func() error {
		for _, n := range ns {
			v, err := c.Agent(n).Metric("etcdlet_reconcile_passes_total")
			if err != nil {
				return err
			}
			start[n] = v
		}
		return nil
	})
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("%v more passes", k), func() error {
		for _, n := range ns {
			v, err := c.Agent(n).Metric("etcdlet_reconcile_passes_total")
			if err != nil {
				return err
			}
			if v < start[n]+k {
				return errorf("agent %d at %v passes, want %v", n, v, start[n]+k)
			}
		}
		return nil
	})
}

// The whole cluster stopped (SIGTERM) and later killed (SIGKILL) at once
// comes back on its data: same cluster, same members, nothing moved aside.
func TestWholeClusterRestarts(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netRestartAll, 3)
	before, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, stop := range []func(*harness.Agent){(*harness.Agent).Stop, (*harness.Agent).Kill} {
		for _, n := range seq(1, 3) {
			go stop(c.Agent(n))
		}
		harness.Eventually(t, 40*time.Second, "all agents stopped", func() error {
			for _, n := range seq(1, 3) {
				if c.Agent(n).Running() {
					return errorf("agent %d still runs", n)
				}
			}
			return nil
		})
		for _, n := range seq(1, 3) {
			c.Agent(n).Restart()
		}
		c.Wait(cli, convergeTimeout, 1, 2, 3)
	}
	after, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for _, m := range before {
		ids[m.ID] = true
	}
	for _, m := range after {
		if !ids[m.ID] {
			t.Errorf("member %s has a new ID %x after the restart: the cluster was rebuilt, not restarted", m.Name, m.ID)
		}
	}
	for _, n := range seq(1, 3) {
		if dirs := movedAside(t, c, n); len(dirs) > 0 {
			t.Errorf("agent %d moved data aside on a plain restart: %v", n, dirs)
		}
	}
}

// An upgrade restarts the agents one node at a time (docs/operations.md,
// "Upgrade"): each node goes only once `etcdlet status --wait` on the node
// before it said the cluster matches the list with every member healthy,
// and that node's /readyz says ready at once.
// The writer never sees quorum lost, every member keeps its ID and its
// data, and the agent's new process serves the same member.
func TestRollingRestartKeepsQuorum(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netRollingRestart, 3)
	w := c.StartWriter(cli)
	ids := map[int]uint64{}
	for _, n := range seq(1, 3) {
		ids[n] = memberIDOf(t, c, cli, n)
	}
	for _, n := range seq(1, 3) {
		c.Agent(n).Stop()
		c.Agent(n).Restart()
		out, err := exec.Command(binary, "status", "--config", c.ConfigPath(n), "--wait", "60s").CombinedOutput()
		if err != nil {
			t.Fatalf("etcdlet status --wait after restarting agent %d: %v\n%s", n, err, out)
		}
		// /readyz agrees at once: it must not lag status by a pass.
		if code, body, err := c.Agent(n).Get("/readyz"); err != nil || code != http.StatusOK {
			t.Errorf("agent %d: /readyz right after etcdlet status --wait returned 0: %d %q %v; want 200", n, code, strings.TrimSpace(string(body)), err)
		}
	}
	checkWrites(t, w)
	for _, n := range seq(1, 3) {
		if id := memberIDOf(t, c, cli, n); id != ids[n] {
			t.Errorf("agent %d's member changed ID from %x to %x: it rejoined instead of restarting", n, ids[n], id)
		}
		if dirs := movedAside(t, c, n); len(dirs) > 0 {
			t.Errorf("agent %d moved data aside during a restart: %v", n, dirs)
		}
	}
}
