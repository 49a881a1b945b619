package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	etcdversion "go.etcd.io/etcd/api/v3/version"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/test/harness"
)

// The exit codes of etcdlet status (cmd/etcdlet/status.go).
const (
	exitListInvalid = 2
	exitNoQuorum    = 3
	exitUnreachable = 4
)

// statusJSON runs etcdlet status -o json for agent n.
func statusJSON(t *testing.T, c *harness.Cluster, n int) (statusreport.Report, string, int) {
	t.Helper()
	out, stderr, code := etcdlet(t, "status", "--config", c.ConfigPath(n), "-o", "json")
	var r statusreport.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("status -o json (exit %d): %v\n%s%s", code, err, out, stderr)
	}
	return r, stderr, code
}

// etcdlet status shows the cluster whatever the state of the list, and
// its exit code tells a script which of list invalid, no quorum and
// unreachable holds.
func TestStatusExitCodes(t *testing.T) {
	t.Parallel()
	c, _ := startCluster(t, netStatusExit, 3)
	// Members that have just formed the cluster may need a pass to show
	// healthy (a leader, a posted list): converged within a deadline.
	harness.Eventually(t, convergeTimeout, "status of a healthy cluster: exit 0 and converged", func() error {
		if r, stderr, code := statusJSON(t, c, 1); code != 0 || !r.Converged {
			return errorf("exit %d, converged %v, waiting %q, members %+v: %s", code, r.Converged, r.Plan.Waiting, r.Members, stderr)
		}
		return nil
	})

	// A missing members file: the members are shown against the list the
	// agent keeps in force, the problem is extra lines.
	if err := os.Remove(c.Members); err != nil {
		t.Fatal(err)
	}
	r, _, code := statusJSON(t, c, 1)
	if code != exitListInvalid || len(r.Members) != 3 || len(r.ListProblems) == 0 || len(r.ListInForce) != 3 {
		t.Errorf("status with the members file missing: exit %d, report %+v; want exit %d, 3 members and the list problem", code, r, exitListInvalid)
	}
	table, _, code := etcdlet(t, "status", "--config", c.ConfigPath(1))
	if code != exitListInvalid || !strings.Contains(table, "list invalid: ") || !strings.Contains(table, c.Name(3)) {
		t.Errorf("table status with the members file missing: exit %d:\n%s", code, table)
	}

	// A line that is no IP.
	c.WriteMembersRaw(fmt.Sprintf("%s\n%s\nnot-an-ip\n", c.IP(1), c.IP(2)))
	r, _, code = statusJSON(t, c, 1)
	if code != exitListInvalid || len(r.Members) != 3 || !strings.Contains(strings.Join(r.ListProblems, "\n"), "not-an-ip") {
		t.Errorf("status with a bad line: exit %d, members %d, list problems %q", code, len(r.Members), r.ListProblems)
	}
	c.WriteMembers(1, 2, 3)
	if _, stderr, code := statusJSON(t, c, 1); code != 0 {
		t.Errorf("status with the list repaired: exit %d: %s", code, stderr)
	}

	// Two of three members gone: members still answer, without quorum.
	c.Agent(2).Kill()
	c.Agent(3).Kill()
	harness.Eventually(t, 30*time.Second, "status exits with the no-quorum code", func() error {
		r, stderr, code := statusJSON(t, c, 1)
		if code != exitNoQuorum || !r.Answered || r.Reached || len(r.Members) != 3 {
			return errorf("exit %d, answered %v, reached %v, %d members: %s", code, r.Answered, r.Reached, len(r.Members), stderr)
		}
		return nil
	})

	c.Agent(1).Kill()
	harness.Eventually(t, 30*time.Second, "status exits with the unreachable code", func() error {
		if r, stderr, code := statusJSON(t, c, 1); code != exitUnreachable || r.Answered {
			return errorf("exit %d, answered %v: %s", code, r.Answered, stderr)
		}
		return nil
	})
}

// memberList runs etcdlet member list -o json for agent n.
func memberList(t *testing.T, c *harness.Cluster, n int) []statusreport.Row {
	t.Helper()
	out, stderr, code := etcdlet(t, "member", "list", "--config", c.ConfigPath(n), "-o", "json")
	var rows []statusreport.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
		t.Fatalf("member list: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	return rows
}

// expectRefused runs an etcdlet command that must be refused naming the
// rule, and checks that membership did not change.
func expectRefused(t *testing.T, c *harness.Cluster, rule string, members []int, args ...string) {
	t.Helper()
	_, stderr, code := etcdlet(t, args...)
	if code != 1 || !strings.Contains(stderr, rule) {
		t.Errorf("etcdlet %s: exit %d, stderr %q; want it refused: %q", strings.Join(args[:3], " "), code, stderr, rule)
	}
	if err := c.Expect(c.Client(), members...); err != nil {
		t.Errorf("after a refused %s: %v", args[1], err)
	}
}

// The member commands list the cluster, hand leadership over, remove an
// unlisted member, and refuse what the agents would undo or what would
// cost quorum.
func TestMemberCommands(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netMemberCommands, 3)
	cfg := c.ConfigPath(1)

	rows := memberList(t, c, 1)
	leaders := 0
	for _, r := range rows {
		if r.InList != "yes" || r.Health != "healthy" || len(r.PeerURLs) != 1 || !strings.HasPrefix(r.ClientURLs[0], "https://") || r.Version != etcdversion.Version {
			t.Errorf("member list row %+v: want a healthy listed member with its URLs, running etcd %s", r, etcdversion.Version)
		}
		if r.Role == "leader" {
			leaders++
		}
	}
	if len(rows) != 3 || leaders != 1 {
		t.Errorf("member list: %d rows, %d leaders; want 3 and 1", len(rows), leaders)
	}

	expectRefused(t, c, "is in the member list in force", []int{1, 2, 3}, "member", "remove", c.Name(3), "--config", cfg)
	expectRefused(t, c, "is a voter", []int{1, 2, 3}, "member", "evict-learner", c.IP(1), "--config", cfg)

	from := leaderIndex(t, c, cli)
	to := from%3 + 1
	if out, stderr, code := etcdlet(t, "member", "move-leader", c.IP(to), "--config", cfg); code != 0 {
		t.Fatalf("move-leader: exit %d: %s%s", code, out, stderr)
	}
	if got := leaderIndex(t, c, cli); got != to {
		t.Errorf("after move-leader to %d, %d leads", to, got)
	}

	// A fourth member, then a list that names nobody (an empty list never
	// removes members): every member is unlisted, and the agents leave
	// them alone.
	c.WriteMembers(1, 2, 3, 4)
	c.Start(4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
	c.WriteMembersRaw("# emptied for the test\n")
	if out, stderr, code := etcdlet(t, "member", "remove", c.IP(4), "--config", cfg); code != 0 || !strings.Contains(out, "removed member "+c.Name(4)) {
		t.Fatalf("remove of an unlisted member: exit %d: %s%s", code, out, stderr)
	}
	if err := c.Expect(cli, 1, 2, 3); err != nil {
		t.Errorf("after member remove: %v", err)
	}
	c.Agent(4).Stop()

	// One of three down: removing a healthy voter would leave one healthy
	// of two, below quorum, --force or not.
	c.Agent(3).Kill()
	// If host 3 led, the two left elect a leader first; until then the
	// command refuses for another reason (no quorum right now).
	waitQuorum(t, cli)
	_, stderr, code := etcdlet(t, "member", "remove", c.Name(2), "--force", "--config", cfg)
	if code != 1 || !strings.Contains(stderr, "below quorum 2") {
		t.Errorf("remove costing quorum: exit %d, stderr %q; want it refused", code, stderr)
	}
	members, err := c.MemberList(cli)
	if err != nil || len(members) != 3 {
		t.Errorf("after a refused removal: %d members, %v; want 3", len(members), err)
	}
}

// lockStatus runs etcdlet lock status -o json for agent n.
func lockStatus(t *testing.T, c *harness.Cluster) map[string]any {
	t.Helper()
	out, stderr, code := etcdlet(t, "lock", "status", "--config", c.ConfigPath(1), "-o", "json")
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("lock status: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	return st
}

// holdLock takes the agents' writer lock the way an agent does, with a
// lease of ttl.
func holdLock(t *testing.T, c *harness.Cluster, ttl time.Duration) etcdclient.Lock {
	t.Helper()
	tls := c.Opts.TLS
	pool, err := etcdclient.NewPool(config.TLSFiles{CertFile: tls.ClientCert, KeyFile: tls.ClientKey, CAFile: tls.CA}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	locker := &etcdclient.SessionLocker{Pool: pool, TTL: ttl, CallTimeout: 2 * time.Second, Holder: "operator-test"}
	t.Cleanup(func() { locker.Close(); pool.Close() })
	lock, err := locker.TryLock(t.Context(), []string{c.ClientURL(1), c.ClientURL(2), c.ClientURL(3)}, clusterID(t, c.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return lock
}

// lock status names the holder of the agents' writer lock; lock break
// frees a live holder's lock only with --force and a stale one with
// --yes, and the agents, held back while it was held, then converge.
func TestLockCommands(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netLockCommands, 3)
	lockCmd := func(args ...string) (string, string, int) {
		return etcdlet(t, append(append([]string{"lock"}, args...), "--config", c.ConfigPath(1))...)
	}
	if st := lockStatus(t, c); st["held"] != false {
		t.Errorf("lock status of an idle cluster: %v", st)
	}

	live := holdLock(t, c, 5*time.Second)
	st := lockStatus(t, c)
	holder, _ := st["holder"].(map[string]any)
	if st["held"] != true || st["stale"] != false || holder["holder"] != "operator-test" || holder["pid"] != float64(os.Getpid()) {
		t.Errorf("lock status while the test holds the lock: %v", st)
	}
	if out, _, _ := lockCmd("status"); !strings.Contains(out, "holder:   operator-test") {
		t.Errorf("lock status table:\n%s", out)
	}
	for _, args := range [][]string{{"break"}, {"break", "--yes"}} {
		if _, stderr, code := lockCmd(args...); code != 1 || !strings.Contains(stderr, "refused") {
			t.Errorf("lock %v of a live lock: exit %d, %s", args, code, stderr)
		}
	}
	if _, err := live.Remaining(t.Context()); err != nil {
		t.Fatalf("a refused break freed the lock: %v", err)
	}
	if out, stderr, code := lockCmd("break", "--force"); code != 0 || !strings.Contains(out, "broke the writer lock") {
		t.Fatalf("lock break --force: exit %d: %s%s", code, out, stderr)
	}
	if _, err := live.Remaining(t.Context()); !errors.Is(err, etcdclient.ErrLockLost) {
		t.Errorf("the holder of a broken lock: %v, want ErrLockLost before its next call", err)
	}

	// While the test holds the lock, the agents do not add a listed node:
	// they take the same lock.
	stuck := holdLock(t, c, 5*time.Second)
	c.WriteMembers(1, 2, 3, 4)
	c.Start(4)
	harness.Eventually(t, 30*time.Second, "an agent finds the writer lock busy", func() error {
		for _, n := range seq(1, 4) {
			if v, err := c.Agent(n).Metric("etcdlet_writer_lock_busy_total"); err == nil && v > 0 {
				return nil
			}
		}
		return errorf("no agent found the lock busy")
	})
	if members, err := c.MemberList(cli); err != nil || len(members) != 3 {
		t.Errorf("membership changed under the test's lock: %d members, %v", len(members), err)
	}
	harness.Eventually(t, 30*time.Second, "lock status calls the lock stale", func() error {
		if st := lockStatus(t, c); st["stale"] != true {
			return errorf("%v", st["why"])
		}
		return nil
	})
	if out, stderr, code := lockCmd("break", "--yes"); code != 0 {
		t.Fatalf("lock break --yes of a stale lock: exit %d: %s%s", code, out, stderr)
	}
	if _, err := stuck.Remaining(t.Context()); !errors.Is(err, etcdclient.ErrLockLost) {
		t.Errorf("the holder of a broken stale lock: %v", err)
	}
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
}

// etcdlet etcdctl runs etcdctl in-process with the agent's endpoints and
// client TLS, against a TLS cluster, and refuses membership changes.
func TestEtcdctl(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netEtcdctl, 3)
	ctl := func(args ...string) (string, string, int) {
		return etcdlet(t, append([]string{"etcdctl", "--config", c.ConfigPath(1), "--"}, args...)...)
	}
	if out, stderr, code := ctl("put", "/operator/probe", "ok"); code != 0 || strings.TrimSpace(out) != "OK" {
		t.Fatalf("etcdctl put: exit %d: %s%s", code, out, stderr)
	}
	if out, stderr, code := ctl("get", "/operator/probe", "--print-value-only"); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Errorf("etcdctl get: exit %d: %q %s", code, out, stderr)
	}
	resp, err := cli.Get(t.Context(), "/operator/probe")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "ok" {
		t.Errorf("the value etcdctl put, read with the harness's client: %v, %v", resp, err)
	}

	out, stderr, code := ctl("member", "list", "-w", "json")
	var list struct {
		Members []struct {
			Name string `json:"name"`
			ID   uint64 `json:"ID"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 {
		t.Fatalf("etcdctl member list: exit %d, %v: %s%s", code, err, out, stderr)
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if want := []string{c.Name(1), c.Name(2), c.Name(3)}; !slices.Equal(names, want) {
		t.Errorf("etcdctl member list: %v, want %v", names, want)
	}

	if _, stderr, code := ctl("member", "remove", fmt.Sprintf("%x", list.Members[0].ID)); code != 1 || !strings.Contains(stderr, "refused") {
		t.Errorf("etcdctl member remove: exit %d, %s; want it refused", code, stderr)
	}
	if err := c.Expect(cli, 1, 2, 3); err != nil {
		t.Errorf("after a refused etcdctl member remove: %v", err)
	}
}
