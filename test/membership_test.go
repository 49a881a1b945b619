package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/test/harness"
)

// Three agents started together with the same list bootstrap one cluster.
// An agent whose first look comes after the other two formed the cluster
// (with its member in the initial cluster, not started yet) joins it
// instead: that is the same cluster, and never a second bootstrap.
func TestBootstrapThree(t *testing.T) {
	t.Parallel()
	c, _ := startCluster(t, netBootstrap, 3)
	bootstrapped := 0
	for _, n := range seq(1, 3) {
		if dirs := movedAside(t, c, n); len(dirs) > 0 {
			t.Errorf("agent %d moved data aside during a plain bootstrap: %v", n, dirs)
		}
		a := c.Agent(n)
		boots, joins := a.CountLog("local member", map[string]string{"decision": "bootstrap"}), a.CountLog("local member", map[string]string{"decision": "join"})
		if boots+joins != 1 {
			t.Errorf("agent %d decided bootstrap %d times and join %d times; want exactly one start", n, boots, joins)
		}
		bootstrapped += boots
	}
	if bootstrapped < 2 {
		t.Errorf("%d agents bootstrapped; a 3-member cluster needs 2 to form", bootstrapped)
	}

	// An emptied list removes nobody, and `etcdlet status` still shows the
	// real members (asked through node.address and the agent's last list),
	// not an empty cluster.
	c.WriteMembersRaw("# emptied by mistake\n")
	waitPasses(t, c, seq(1, 3), 2)
	var out []byte
	var report statusreport.Report
	// A member moves its storage version to the cluster's minor on its own
	// a few seconds after the cluster version is decided, so the versions
	// are waited for; the rest of the report must hold at once.
	harness.Eventually(t, 30*time.Second, "every member reports the linked etcd and its minor as storage version", func() error {
		var err error
		if out, err = exec.Command(binary, "status", "--config", c.ConfigPath(1), "-o", "json").Output(); err != nil {
			return fmt.Errorf("status: %w", err)
		}
		report = statusreport.Report{}
		if err := json.Unmarshal(out, &report); err != nil {
			return err
		}
		for _, m := range report.Members {
			// The embedded runtime's etcd is the library etcdlet links.
			if m.Version != etcdversion.Version || etcdversion.Cluster(m.StorageVersion) != etcdversion.Cluster(etcdversion.Version) {
				return fmt.Errorf("member %s: version %q, storage version %q; want %s and its minor", m.Name, m.Version, m.StorageVersion, etcdversion.Version)
			}
		}
		return nil
	})
	if !report.Reached || len(report.Members) != 3 || !strings.Contains(strings.Join(report.Plan.Waiting, "\n"), "EmptyList") {
		t.Errorf("status with an empty list does not show the cluster and why nothing changes:\n%s", out)
	}
	for _, m := range report.Members {
		if m.InList != "no" || m.Health != "healthy" {
			t.Errorf("member %+v: want a healthy member that is not listed", m)
		}
	}
	if err := c.Expect(c.Client(), 1, 2, 3); err != nil {
		t.Errorf("an empty list changed membership: %v", err)
	}
}

// A listed address joins as a learner and is promoted; a member whose
// address leaves the list is removed, leader first handing over, and its
// data dir is moved aside and kept.
func TestAddThenRemoveLeader(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netAddRemove, 3)
	w := c.StartWriter(cli)

	c.Start(4) // not listed yet: idles
	harness.Eventually(t, 10*time.Second, "agent 4 idles", func() error {
		return expectLog(c.Agent(4), "local member", map[string]string{"decision": "idle"})
	})
	c.WriteMembers(1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	if c.Agent(4).CountLog("local member", map[string]string{"decision": "join"}) == 0 {
		t.Error("agent 4 became a member without joining as the added learner")
	}

	leader := leaderIndex(t, c, cli)
	keep := without(seq(1, 4), leader)
	c.WriteMembers(keep...)
	c.Wait(cli, convergeTimeout, keep...)
	checkWrites(t, w)

	// Usually once; a loaded machine can cost an election that makes the
	// leaving member lead again, and it hands over again.
	if n := countAll(c, seq(1, 4), "membership change", map[string]string{"action": "move-leader", "outcome": "done"}); n < 1 {
		t.Errorf("leadership was not handed over before removing the leader")
	}
	harness.Eventually(t, 30*time.Second, "removed member's data dir moved aside", func() error {
		if _, err := os.Stat(c.DataDir(leader)); err == nil {
			return errorf("data dir %s still in place", c.DataDir(leader))
		}
		return nil
	})
	requireKeptData(t, movedAside(t, c, leader))
	if !c.Agent(leader).Running() {
		t.Error("the removed node's agent exited; it should stay up, idle")
	}

	// Listed again, the removed node rejoins at once: its member's stop on
	// removal is no crash, so no crash-loop delay holds the join back.
	c.WriteMembers(seq(1, 4)...)
	c.Wait(cli, convergeTimeout, seq(1, 4)...)
	if n := c.Agent(leader).CountLog("delaying the start of the local member after failures", nil); n != 0 {
		t.Errorf("the rejoin of a removed member was delayed by the crash-loop backoff (%d times)", n)
	}
}

// Swapping one address for another: the new member votes before the old
// one leaves, and the cluster keeps accepting writes throughout.
func TestReplaceOne(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netReplace, 3)
	w := c.StartWriter(cli)
	c.Start(4)
	c.WriteMembers(1, 2, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 4)
	checkWrites(t, w)

	promoted := changeTime(t, c, seq(1, 4), "promote", c.Name(4))
	removed := changeTime(t, c, seq(1, 4), "remove", c.Name(3))
	if !promoted.Before(removed) {
		t.Errorf("old member removed at %s before the new one was promoted at %s", removed, promoted)
	}
	harness.Eventually(t, 30*time.Second, "old member's data moved aside", func() error {
		if len(movedAside(t, c, 3)) == 0 {
			return errorf("nothing moved aside yet")
		}
		return nil
	})
	requireKeptData(t, movedAside(t, c, 3))
}

// With a keyspace to copy, the new member is promoted as soon as etcd
// allows, which is as soon as the leader knows its snapshot arrived and
// can be before it applied it and serves. The member it replaces leaves
// only once it serves: the cluster never counts on fewer working members
// than before. agent.removalHoldDown is 0, so that nothing else holds the
// removal back.
func TestReplacementServesBeforeTheOldMemberLeaves(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netReplaceKeyspace, 3, func(o *harness.Options) { o.AgentConfig = "  removalHoldDown: 0s\n" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := harness.Fill(ctx, cli, 64<<20); err != nil {
		t.Fatal(err)
	}
	c.Start(4)
	served := firstServed(t, c.ClientOf(4), c.ClientURL(4))
	c.WriteMembers(1, 2, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 4)

	promoted := changeTime(t, c, seq(1, 4), "promote", c.Name(4))
	removed := changeTime(t, c, seq(1, 4), "remove", c.Name(3))
	serving := served()
	t.Logf("node 4 promoted at %s, served at %s, member 3 removed at %s", promoted.Format(time.StampMicro), serving.Format(time.StampMicro), removed.Format(time.StampMicro))
	if removed.Before(serving) {
		t.Errorf("member 3 was removed at %s, before its replacement served clients at %s", removed.Format(time.StampMicro), serving.Format(time.StampMicro))
	}
}

// firstServed asks endpoint's Status every 5ms from now on, and returns a
// function that waits until it answered and returns when it first did.
func firstServed(t *testing.T, cli *clientv3.Client, endpoint string) func() time.Time {
	t.Helper()
	result := make(chan time.Time, 1)
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	t.Cleanup(cancel)
	go func() {
		defer close(result)
		for ctx.Err() == nil {
			callCtx, callCancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err := cli.Status(callCtx, endpoint)
			callCancel()
			if err == nil {
				result <- time.Now()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() time.Time {
		at, ok := <-result
		if !ok {
			t.Fatalf("%s did not serve within %s", endpoint, convergeTimeout)
		}
		return at
	}
}

// A member removed while its node was down comes back with its old data:
// the agent moves the stale data aside and rejoins as a learner.
func TestRemovedMemberReturnsWithStaleData(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netStale, 3)
	w := c.StartWriter(cli)
	c.Agent(3).Stop()
	c.WriteMembers(1, 2)
	c.Wait(cli, convergeTimeout, 1, 2)

	c.WriteMembers(1, 2, 3)
	c.Agent(3).Restart()
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	checkWrites(t, w)

	if c.Agent(3).CountLog("local member", map[string]string{"decision": "move-aside"}) == 0 {
		t.Error("agent 3 did not detect its stale data")
	}
	requireKeptData(t, movedAside(t, c, 3))
}

// kill -9 of the joining agent right after the writer added its learner,
// then a restart: the join completes unaided.
func TestKillDuringJoin(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netKillJoin, 3)
	w := c.StartWriter(cli)
	a4 := c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	harness.Eventually(t, 30*time.Second, "member 4 added as learner", func() error {
		members, err := c.MemberList(cli)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.IsLearner {
				return nil
			}
		}
		return errorf("no learner yet")
	})
	a4.Kill()
	a4.Restart()
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	checkWrites(t, w)
}

// The local member cannot start (another process holds its client port):
// the agent retries with a growing delay, not in a tight loop, and the
// member starts unaided once the port is free.
func TestFailedStartBacksOffAndRecovers(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netPortTaken})
	c.WriteMembers(1)
	squatter, err := net.Listen("tcp", net.JoinHostPort(c.IP(1), strconv.Itoa(c.Ports.Client)))
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	a := c.Start(1)
	var failures []map[string]any
	harness.Eventually(t, 30*time.Second, "three failed starts", func() error {
		failures = failures[:0]
		for _, e := range a.LogEntries() {
			if e["msg"] == "run local member" {
				failures = append(failures, e)
			}
		}
		if len(failures) < 3 {
			return errorf("%d failed starts", len(failures))
		}
		return nil
	})
	for i, want := range []string{"1s", "2s", "4s"} {
		if got := fmt.Sprint(failures[i]["retryIn"]); got != want {
			t.Errorf("failed start %d: retryIn %s, want %s", i+1, got, want)
		}
		if !strings.Contains(fmt.Sprint(failures[i]["error"]), "address already in use") {
			t.Errorf("failed start %d does not say why: %v", i+1, failures[i]["error"])
		}
	}
	first, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(failures[0]["time"]))
	third, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(failures[2]["time"]))
	if gap := third.Sub(first); gap < 3*time.Second-100*time.Millisecond {
		t.Errorf("three failed starts within %s: the agent does not back off", gap)
	}
	squatter.Close()
	c.Wait(c.Client(), convergeTimeout, 1)
}

// Agents started at the same instant, then one list change seen by all at
// once (two joins and a removal): every membership change is made by
// exactly one agent, once, never duplicated or contradicted. (That agent
// may find its own change already applied when a call's answer was lost;
// that is the idempotence the contract asks for, not a second writer.)
func TestAgentsRacingTheSameChange(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netRace, 3)
	w := c.StartWriter(cli)
	c.Start(4)
	c.Start(5)
	c.WriteMembers(2, 3, 4, 5)
	c.Wait(cli, 2*convergeTimeout, 2, 3, 4, 5)
	checkWrites(t, w)

	all := seq(1, 5)
	changes := []struct{ action, member string }{
		{"add-learner", c.Name(4)}, {"promote", c.Name(4)},
		{"add-learner", c.Name(5)}, {"promote", c.Name(5)},
		{"remove", c.Name(1)},
	}
	made := func(n int, action, member string) int {
		a := c.Agent(n)
		return a.CountLog("membership change", map[string]string{"action": action, "member": member, "outcome": "done"}) +
			a.CountLog("membership change already applied", map[string]string{"action": action, "member": member})
	}
	// A change is logged once its call returned, which can be just after
	// the cluster shows it.
	harness.Eventually(t, 30*time.Second, "every change logged", func() error {
		for _, change := range changes {
			total := 0
			for _, n := range all {
				total += made(n, change.action, change.member)
			}
			if total == 0 {
				return errorf("%s %s not logged yet", change.action, change.member)
			}
		}
		return nil
	})
	for _, change := range changes {
		var writers []int
		for _, n := range all {
			count := made(n, change.action, change.member)
			if count > 1 {
				t.Errorf("%s %s: agent %d made it %d times", change.action, change.member, n, count)
			}
			if count > 0 {
				writers = append(writers, n)
			}
		}
		if len(writers) != 1 {
			t.Errorf("%s %s: made by agents %v, want exactly one", change.action, change.member, writers)
		}
	}
	harness.Eventually(t, 30*time.Second, "removed member's data moved aside", func() error {
		if len(movedAside(t, c, 1)) == 0 {
			return errorf("nothing moved aside yet")
		}
		return nil
	})
	requireKeptData(t, movedAside(t, c, 1))
}

func expectLog(a *harness.Agent, msg string, attrs map[string]string) error {
	if a.CountLog(msg, attrs) == 0 {
		return errorf("agent %d has not logged %q %v", a.N, msg, attrs)
	}
	return nil
}

func countAll(c *harness.Cluster, ns []int, msg string, attrs map[string]string) int {
	total := 0
	for _, n := range ns {
		if a := c.Agent(n); a != nil {
			total += a.CountLog(msg, attrs)
		}
	}
	return total
}

// changeTime is when some agent logged a membership change as done (or
// as already applied, when a retried call found it done). The log line
// follows the change, so it is waited for.
func changeTime(t *testing.T, c *harness.Cluster, ns []int, action, member string) time.Time {
	t.Helper()
	var at time.Time
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("an agent logs %s %s", action, member), func() error {
		for _, n := range ns {
			for _, e := range c.Agent(n).LogEntries() {
				applied := e["msg"] == "membership change" || e["msg"] == "membership change already applied"
				if applied && e["action"] == action && e["member"] == member && e["outcome"] == "done" {
					ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"]))
					if err != nil {
						return err
					}
					at = ts
					return nil
				}
			}
		}
		return errorf("no agent logged %s %s", action, member)
	})
	return at
}

func without(s []int, drop int) []int {
	var out []int
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// A host changes its IP (docs/operations.md, "Change a node's IP"): its
// agent is stopped, its configuration and the list name the new address,
// and it starts again on its old disk. The old member, silent and no longer
// listed, is removed; the host's data, which belongs to that old member, is
// moved aside (kept) and the host joins under its new address as a learner
// and is promoted. The writer never sees the cluster lose quorum.
func TestANodeChangesItsIP(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netChangeIP, 3)
	w := c.StartWriter(cli)
	oldID := memberIDOf(t, c, cli, 3)

	// The host that was node 3 is node 4 from now on: same disk, new address.
	c.Agent(3).Stop()
	if err := os.Rename(filepath.Join(c.Dir, "n3"), filepath.Join(c.Dir, "n4")); err != nil {
		t.Fatal(err)
	}
	c.WriteConfig(4)
	c.WriteMembers(1, 2, 4)
	c.Start(4)
	c.Wait(cli, convergeTimeout, 1, 2, 4)
	checkWrites(t, w)

	if id := memberIDOf(t, c, cli, 4); id == oldID {
		t.Errorf("the host kept member ID %x under its new address; it must join as a new member", id)
	}
	harness.Eventually(t, 30*time.Second, "the old member's data moved aside on the host", func() error {
		if len(movedAside(t, c, 4)) == 0 {
			return errorf("nothing moved aside yet")
		}
		return nil
	})
	requireKeptData(t, movedAside(t, c, 4))
}
