package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/test/harness"
)

// A listed node whose host never comes up gets a learner that is never
// promoted. It does not hold etcd's single learner slot for ever: after
// agent.learnerTimeout it is removed, the next listed node joins, and the
// node that was down joins once it is up.
func TestALearnerThatIsNeverPromotedLeavesTheSlot(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netLearnerTimeout, 3, func(o *harness.Options) { o.AgentConfig = "  learnerTimeout: 10s\n" })
	c.WriteConfig(4) // its host stays down for now
	c.Start(5)
	c.WriteMembers(1, 2, 3, 4, 5)
	harness.Eventually(t, 2*convergeTimeout, "member 5 votes while 4 is down", func() error {
		members, err := c.MemberList(cli)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.Name == c.Name(5) && !m.IsLearner {
				return nil
			}
		}
		return errorf("member 5 is not a voter yet")
	})
	expired := 0
	for _, n := range []int{1, 2, 3, 5} { // any agent may be the writer
		for _, e := range c.Agent(n).LogEntries() {
			if e["msg"] == "membership change" && e["action"] == "remove" && strings.Contains(e["reason"].(string), "learner timeout") {
				expired++
			}
		}
	}
	if expired == 0 {
		t.Error("no agent logged removing an expired learner")
	}
	c.Start(4)
	c.Wait(cli, 2*convergeTimeout, seq(1, 5)...)
}

// Two of three listed nodes are up; the third's agent is not installed
// yet. They wait (silence is no consent) until the operator approves a new
// cluster: the approved node founds it, the other joins, and the third
// joins when it comes up. Approved on both at once, they still form one.
func TestTheOperatorApprovesABootstrap(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netApprove})
	c.WriteMembers(1, 2, 3)
	c.WriteConfig(3)
	c.Start(1)
	c.Start(2)
	harness.Eventually(t, convergeTimeout, "agents 1 and 2 wait for node 3", func() error {
		for _, n := range []int{1, 2} {
			failIfBootstrapped(t, c, n)
			if !waitsFor(c.Agent(n), c.IP(3)) {
				return errorf("agent %d has not logged waiting for %s", n, c.IP(3))
			}
		}
		return nil
	})
	out, err := exec.Command(binary, "bootstrap", "--config", c.ConfigPath(1)).CombinedOutput()
	if err != nil || !slices.ContainsFunc(strings.Split(string(out), "\n"), func(line string) bool {
		return strings.HasPrefix(line, c.IP(3)+" ") && strings.Contains(line, "no answer")
	}) {
		t.Fatalf("etcdlet bootstrap does not show node 3 silent: %v\n%s", err, out)
	}
	// The act, given on both nodes at once by two operators who did not
	// talk to each other: one cluster forms, never two.
	for _, n := range []int{1, 2} {
		if out, err := exec.Command(binary, "bootstrap", "--config", c.ConfigPath(n), "--approve").CombinedOutput(); err != nil && n == 1 {
			t.Fatalf("etcdlet bootstrap --approve on node 1: %v\n%s", err, out)
		}
	}
	cli := c.Client()
	waitStartedVoters(t, c, cli, 2)
	ids := map[uint64]bool{}
	for _, n := range []int{1, 2} {
		ids[put(t, c.ClientOf(n), fmt.Sprintf("/from/%d", n), "x")] = true
	}
	founded := 0
	for _, n := range []int{1, 2} {
		founded += c.Agent(n).CountLog("founding a new cluster", nil)
	}
	if len(ids) != 1 || founded != 1 {
		t.Fatalf("two approvals at once: %d clusters answer, %d foundings; want one of each", len(ids), founded)
	}
	// Once a cluster answers, an approval is refused.
	if out, err := exec.Command(binary, "bootstrap", "--config", c.ConfigPath(2), "--approve").CombinedOutput(); err == nil || !strings.Contains(string(out), "a listed etcd answers") {
		t.Errorf("etcdlet bootstrap --approve beside a cluster: %v\n%s", err, out)
	}
	c.Start(3)
	c.Wait(cli, convergeTimeout, 1, 2, 3)
}

// Disaster recovery: the data of two of three members is lost, the third
// host is down. The operator approves a new cluster on a survivor's host;
// it is a new cluster, with a cluster ID of its own. When the third host
// comes back with its old data, its longer raft log must not take over the
// new cluster (it would, were the identity the same, and the new cluster
// would commit nothing): its agent refuses to start it beside the new
// cluster and says why, the new cluster keeps serving, and it rejoins once
// the operator runs etcdlet restore --rejoin there, as the refusal says.
func TestAnApprovedRebootstrapIsANewCluster(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netRebootstrap, 3)
	oldID := put(t, cli, "/old", "before the disaster")
	for i := range 50 {
		put(t, cli, fmt.Sprintf("/log/%d", i), "a longer raft log on member 3")
	}
	// Agent 3 knows its cluster (its state pins it), as any member's
	// agent does after a while.
	harness.Eventually(t, convergeTimeout, "agent 3 pinned to its cluster", func() error {
		if c.Agent(3).CountLog("local member is part of the cluster", nil) == 0 {
			return errorf("not yet")
		}
		return nil
	})
	stopAll(t, c, 1, 2, 3)
	for _, n := range []int{1, 2} { // replaced disks: data and state gone
		for _, dir := range []string{"data", "state"} {
			if err := os.RemoveAll(filepath.Join(c.Dir, fmt.Sprintf("n%d", n), dir)); err != nil {
				t.Fatal(err)
			}
		}
		c.Agent(n).Restart()
	}
	harness.Eventually(t, convergeTimeout, "agents 1 and 2 wait for node 3", func() error {
		for _, n := range []int{1, 2} {
			if !waitsFor(c.Agent(n), c.IP(3)) {
				return errorf("agent %d has not logged waiting for %s", n, c.IP(3))
			}
		}
		return nil
	})
	if out, err := exec.Command(binary, "bootstrap", "--config", c.ConfigPath(1), "--approve").CombinedOutput(); err != nil {
		t.Fatalf("etcdlet bootstrap --approve on node 1: %v\n%s", err, out)
	}
	cli12 := c.ClientOf(1, 2)
	waitStartedVoters(t, c, cli12, 2)
	newID := put(t, cli12, "/new", "after the disaster")
	if newID == oldID {
		t.Fatalf("the approved cluster has the old cluster's ID %x: a member of the old one passes for one of the new", oldID)
	}

	starts := startedMembers(c.Agent(3))
	c.Agent(3).Restart()
	harness.Eventually(t, convergeTimeout, "agent 3 refuses its old data beside the new cluster", func() error {
		for _, e := range c.Agent(3).LogEntries() {
			if reason, _ := e["reason"].(string); e["msg"] == "local member" && e["decision"] == "refuse" &&
				strings.Contains(reason, fmt.Sprintf("belongs to cluster %x", oldID)) && strings.Contains(reason, fmt.Sprintf("answer for cluster %x", newID)) {
				return nil
			}
		}
		return errorf("not refused yet")
	})
	waitPasses(t, c, []int{3}, 3)
	if after := startedMembers(c.Agent(3)); len(after) != len(starts) {
		t.Fatalf("agent 3 started its old member beside the new cluster: %v", after[len(starts):])
	}
	if v, err := c.Agent(3).Metric(`etcdlet_refusals_total{reason="foreign-data"}`); err != nil || v < 1 {
		t.Errorf(`etcdlet_refusals_total{reason="foreign-data"} on agent 3 = %v (%v), want ≥ 1`, v, err)
	}
	// The new cluster serves writes all along, and holds none of the old.
	for i := range 5 {
		if id := put(t, cli12, fmt.Sprintf("/serving/%d", i), "yes"); id != newID {
			t.Fatalf("a write answered by cluster %x, not the new %x", id, newID)
		}
	}
	if v := get(t, cli12, "/old"); v != "" {
		t.Errorf("the new cluster holds the old one's key /old = %q", v)
	}

	// As the refusal says: stop etcdlet, etcdlet restore --rejoin, start.
	c.Agent(3).Stop()
	if out, err := exec.Command(binary, "restore", "--rejoin", "--yes", "--config", c.ConfigPath(3)).CombinedOutput(); err != nil {
		t.Fatalf("etcdlet restore --rejoin on node 3: %v\n%s", err, out)
	}
	c.Agent(3).Restart()
	c.Wait(cli12, 2*convergeTimeout, 1, 2, 3)
	if v := get(t, c.ClientOf(3), "/new"); v != "after the disaster" {
		t.Errorf("member 3, rejoined, reads /new = %q", v)
	}
}

// waitStartedVoters waits until the cluster has n started voters (a
// learner added for a node that is down may be there too).
func waitStartedVoters(t *testing.T, c *harness.Cluster, cli *clientv3.Client, n int) {
	t.Helper()
	harness.Eventually(t, convergeTimeout, fmt.Sprintf("%d started voters", n), func() error {
		members, err := c.MemberList(cli)
		if err != nil {
			return err
		}
		started := 0
		for _, m := range members {
			if len(m.ClientURLs) > 0 && !m.IsLearner {
				started++
			}
		}
		if started != n {
			return errorf("%d started voters", started)
		}
		return nil
	})
}

// A node whose data was moved aside etcd.moveAsideLimit times within the
// window under the list in force (something removes its member although
// the list names it: here an operator's etcdctl) stops rejoining, says
// why, and holds no learner slot meanwhile: another listed node joins.
// etcdlet ack-moves lets it rejoin. Moves that a list change made (the
// list dropped the node) do not count.
func TestMovesAsideTooOftenStopTheRejoin(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netFlapping, 4, func(o *harness.Options) { o.EtcdConfig = "  moveAsideLimit: 2\n" })
	// A removal the list makes counts for nothing.
	c.WriteMembers(1, 2, 3)
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	c.WriteMembers(1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	for i := 1; i <= 2; i++ {
		// etcd refuses a removal ("unhealthy cluster") until every voter
		// has been connected for a while, as a member just promoted may
		// not be: the operator repeats the command, and so does the test.
		harness.Eventually(t, convergeTimeout, "member 4 removed by hand", func() error {
			members, err := c.MemberList(cli)
			if err != nil {
				return err
			}
			for _, m := range members {
				if m.Name == c.Name(4) {
					if _, err := cli.MemberRemove(t.Context(), m.ID); err != nil {
						return errorf("remove member 4 by hand: %v", err)
					}
				}
			}
			return nil
		})
		harness.Eventually(t, convergeTimeout, "agent 4 moved its data aside", func() error {
			if n := len(movedAside(t, c, 4)); n < 1+i {
				return errorf("%d moves", n)
			}
			return nil
		})
		if i == 1 {
			c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
		}
	}
	harness.Eventually(t, convergeTimeout, "agent 4 refuses to rejoin, naming why", func() error {
		for _, e := range c.Agent(4).LogEntries() {
			reason, _ := e["reason"].(string)
			// The agent tells each removal by hand as it saw it: its
			// member removed while it ran, or gone when it looked again
			// (the embedded etcd stops itself on its removal, and which
			// the agent sees first is a race).
			removal := strings.Contains(reason, "no longer in the cluster (removed)") ||
				strings.Contains(reason, "was removed from the cluster while this node was down")
			if e["msg"] == "local member" && e["decision"] == "refuse" && strings.Contains(reason, "moved aside 2 times") && removal {
				return nil
			}
		}
		return errorf("not refused yet")
	})
	// It holds no learner slot: the cluster is the other three, and a new
	// listed node joins.
	c.Start(5)
	c.WriteMembers(1, 2, 3, 4, 5)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 5)
	r, stderr, _ := statusJSON(t, c, 1)
	if waiting := strings.Join(r.Plan.Waiting, "\n"); !strings.Contains(waiting, "NodeRefuses") {
		t.Errorf("status does not say that node 4 refuses to join: %+v %s", r, stderr)
	}

	if out, err := exec.Command(binary, "ack-moves", "--config", c.ConfigPath(4)).CombinedOutput(); err != nil {
		t.Fatalf("etcdlet ack-moves: %v\n%s", err, out)
	}
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4, 5)
	requireKeptData(t, movedAside(t, c, 4))
}

// With etcd.dataDirMustBeMount, a data dir that is not a mount point (a
// disk that failed to mount) is never used: the agent refuses and says
// why. Once the disk is mounted, the member starts.
func TestADataDirThatMustBeAMountPoint(t *testing.T) {
	t.Parallel()
	requireTools(t, map[string]string{"mount": "mount"})
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netMount, EtcdConfig: "  dataDirMustBeMount: true\n"})
	c.WriteMembers(1)
	if err := os.MkdirAll(c.DataDir(1), 0o700); err != nil {
		t.Fatal(err)
	}
	a := c.Start(1)
	harness.Eventually(t, convergeTimeout, "the agent refuses the unmounted data dir", func() error {
		for _, e := range a.LogEntries() {
			if e["msg"] == "local member" && e["decision"] == "refuse" && strings.Contains(e["reason"].(string), "is not a mount point") {
				return nil
			}
		}
		return errorf("not refused yet")
	})
	if entries, _ := os.ReadDir(c.DataDir(1)); len(entries) > 0 {
		t.Fatal("the agent wrote into a data dir that is not a mount point")
	}
	// The disk arrives: a bind mount of the directory onto itself.
	if out, err := exec.Command("mount", "--bind", c.DataDir(1), c.DataDir(1)).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind: %v: %s", err, out)
	}
	t.Cleanup(func() {
		a.Stop()
		if out, err := exec.Command("umount", c.DataDir(1)).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", c.DataDir(1), err, out)
		}
	})
	c.Wait(c.Client(), convergeTimeout, 1)
}

// A node whose data dir's filesystem cannot take the copy of the
// keyspace refuses to join, says how much it has and needs, and no learner
// is added for it; once the filesystem is larger, it joins.
func TestAJoinWaitsForDiskSpace(t *testing.T) {
	t.Parallel()
	requireTools(t, map[string]string{"mount": "mount", "umount": "mount"})
	c, cli := startCluster(t, netDiskSpace, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := harness.Fill(ctx, cli, 48<<20); err != nil {
		t.Fatal(err)
	}
	// Node 2's disk: a tmpfs too small for a 48 MiB backend and the first
	// write-ahead log file (64 MB).
	if err := os.MkdirAll(c.DataDir(2), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=80m,mode=0700", "tmpfs", c.DataDir(2)).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	a := c.Start(2)
	t.Cleanup(func() {
		a.Stop()
		if out, err := exec.Command("umount", c.DataDir(2)).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", c.DataDir(2), err, out)
		}
	})
	c.WriteMembers(1, 2)
	harness.Eventually(t, convergeTimeout, "node 2 refuses to join for lack of space", func() error {
		for _, e := range a.LogEntries() {
			if reason, _ := e["reason"].(string); e["msg"] == "local member" && e["decision"] == "refuse" &&
				strings.Contains(reason, "MiB free, and a joining member needs") && strings.Contains(reason, "a copy of the leader's backend") {
				t.Logf("node 2: %s", reason)
				return nil
			}
		}
		return errorf("not refused yet")
	})
	harness.Eventually(t, convergeTimeout, "node 1's writer waits for node 2's refusal", func() error {
		for _, e := range c.Agent(1).LogEntries() {
			if e["msg"] == "membership changes waiting" && strings.Contains(fmt.Sprint(e["waiting"]), "NodeRefuses") {
				return nil
			}
		}
		return errorf("no NodeRefuses wait logged")
	})
	if members, err := c.MemberList(cli); err != nil || len(members) != 1 {
		t.Fatalf("members while node 2 refuses: %+v, %v; want node 1 alone", members, err)
	}

	// The disk grows: node 2 joins.
	if out, err := exec.Command("mount", "-o", "remount,size=512m", c.DataDir(2)).CombinedOutput(); err != nil {
		t.Fatalf("remount tmpfs: %v: %s", err, out)
	}
	c.Wait(cli, convergeTimeout, 1, 2)
}

// A member whose data is corrupt (a CORRUPT alarm raised for it) is
// replaced through the list: the new member joins, the corrupt one
// leaves, and its alarm, which held every write of the cluster, is
// disarmed.
func TestACorruptMemberIsReplaced(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netCorrupt, 3)
	members, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	var corrupt uint64
	for _, m := range members {
		if m.Name == c.Name(3) {
			corrupt = m.ID
		}
	}
	one := c.ClientOf(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = pb.NewMaintenanceClient(one.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: corrupt, Alarm: pb.AlarmType_CORRUPT})
	cancel()
	if err != nil {
		t.Fatalf("raise a CORRUPT alarm for member 3: %v", err)
	}

	c.Start(4)
	c.WriteMembers(1, 2, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 4)
	harness.Eventually(t, convergeTimeout, "the cluster takes writes again", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "/after/corrupt", "x")
		return err
	})
	harness.Eventually(t, convergeTimeout, "the corrupt member's data moved aside", func() error {
		if len(movedAside(t, c, 3)) == 0 {
			return errorf("nothing moved aside yet")
		}
		return nil
	})
	requireKeptData(t, movedAside(t, c, 3))
}
