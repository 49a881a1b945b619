package test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/test/harness"
	"github.com/etcdlet/etcdlet/test/s3test"
)

// s3Backup is the backup section for a versitygw bucket, with the
// credentials written as etcd-backup-restore's credentials dir, and
// backup-restore's API on port apiPort of each node address.
func s3Backup(t *testing.T, srv s3test.Server, apiPort int) string {
	t.Helper()
	return s3BackupAPI(t, srv, fmt.Sprintf("{port: %d, insecure: true}", apiPort))
}

// s3BackupAPI is s3Backup with the backup.api section given.
func s3BackupAPI(t *testing.T, srv s3test.Server, api string) string {
	t.Helper()
	creds := t.TempDir()
	for name, v := range map[string]string{"accessKeyID": srv.AccessKey, "secretAccessKey": srv.SecretKey} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf(`backup:
  store:
    provider: s3
    prefix: etcd-main
    s3: {bucket: %s, endpoint: %s, forcePathStyle: true, credentialsDir: %s}
  api: %s
tasks:
  requeueInterval: 1s
  lockTTL: 5s
`, srv.Bucket, srv.Endpoint, creds, api)
}

// runTask runs `etcdlet task run ARGS` on node n and returns its output.
func runTaskCLI(t *testing.T, c *harness.Cluster, n int, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	argv := append([]string{"task", "run"}, args...)
	argv = append(argv, "--config", c.ConfigPath(n))
	out, err := exec.CommandContext(ctx, binary, argv...).CombinedOutput()
	return string(out), err
}

var snapshotObject = regexp.MustCompile(`^etcd-main/v2/(Full|Incr)-\d{8}-\d{8}-\d+\.gz$`)

func listObjects(t *testing.T, srv s3test.Server) []string {
	t.Helper()
	out, err := srv.Client().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: &srv.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, *o.Key)
	}
	return keys
}

func post(t *testing.T, hc *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := hc.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// Snapshots of a three-member cluster go to a real S3 server in
// etcd-backup-restore's format, ordered through the CLI and through
// backup-restore's HTTP API (https, verified by the node address as an IP
// SAN) on any node; the one-task-per-cluster lock rejects a task while
// another node's task holds it.
func TestSnapshotsToS3(t *testing.T) {
	srv := s3test.Start(t)
	apiPort := freeLoopbackPort(t)
	var ips []net.IP
	for n := 1; n <= 3; n++ {
		ips = append(ips, net.ParseIP(fmt.Sprintf("127.0.%d.%d", netSnapshotS3, n)))
	}
	apiCerts, err := harness.GenerateTLS(t.TempDir(), ips)
	if err != nil {
		t.Fatal(err)
	}
	c, cli := startCluster(t, netSnapshotS3, 3, func(o *harness.Options) {
		o.Extra = s3BackupAPI(t, srv, fmt.Sprintf("{port: %d, tls: {certFile: %s, keyFile: %s}}", apiPort, apiCerts.ServerCert, apiCerts.ServerKey))
	})
	putKeys(t, cli, "before/", 200)
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(apiCerts.CA)
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("read the API's CA: %v", err)
	}
	// What druid does: RootCAs only, no client certificate.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	out, err := runTaskCLI(t, c, 1, "snapshot")
	if err != nil || !strings.Contains(out, "Succeeded") {
		t.Fatalf("task run snapshot: %v\n%s", err, out)
	}
	keys := listObjects(t, srv)
	if len(keys) != 1 || !snapshotObject.MatchString(keys[0]) || !strings.Contains(keys[0], "/Full-00000000-") {
		t.Fatalf("objects %v, want one full snapshot named as backup-restore names it", keys)
	}

	api := func(n int, path string) string {
		return "https://" + net.JoinHostPort(c.IP(n), strconv.Itoa(apiPort)) + path
	}
	t.Run("a delta through backup-restore's API holds the new events", func(t *testing.T) {
		putKeys(t, cli, "after/", 50)
		if _, err := cli.Delete(t.Context(), "before/0"); err != nil {
			t.Fatal(err)
		}
		code, body := post(t, hc, api(2, "/snapshot/delta"))
		var s snapshot.Snapshot
		if code != http.StatusOK || json.Unmarshal(body, &s) != nil || s.Kind != snapshot.KindDelta || s.StartRevision == 0 {
			t.Fatalf("POST /snapshot/delta: %d %s", code, body)
		}
		store, err := snapshot.NewS3Store(t.Context(), srv.S3Config("etcd-main"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := snapshot.ReadDelta(t.Context(), store, s)
		if err != nil {
			t.Fatal(err)
		}
		// Besides the data, a delta holds the task lock's own events, so
		// that its revisions stay contiguous for a restore.
		data := 0
		for _, ev := range events {
			if !strings.HasPrefix(string(ev.Kv.Key), "/etcdlet/") {
				data++
			}
		}
		if data != 51 {
			t.Fatalf("the delta holds %d events on data keys, want the 50 puts and the delete", data)
		}
	})
	t.Run("a delta without new events is null", func(t *testing.T) {
		code, body := post(t, hc, api(3, "/snapshot/delta"))
		if code != http.StatusOK || string(body) != "null" {
			t.Fatalf("POST /snapshot/delta: %d %q, want 200 \"null\"", code, body)
		}
	})
	t.Run("latest lists the full and its delta", func(t *testing.T) {
		resp, err := hc.Get(api(1, "/snapshot/latest"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var latest struct {
			Full   *snapshot.Snapshot  `json:"fullSnapshot"`
			Deltas []snapshot.Snapshot `json:"deltaSnapshots"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&latest); err != nil || latest.Full == nil || len(latest.Deltas) != 1 {
			t.Fatalf("GET /snapshot/latest: %v %+v", err, latest)
		}
	})
	t.Run("final=x is a bad request", func(t *testing.T) {
		if code, body := post(t, hc, api(1, "/snapshot/full?final=x")); code != http.StatusBadRequest || len(body) != 0 {
			t.Fatalf("got %d %q, want 400 with an empty body", code, body)
		}
	})
	t.Run("a task is rejected while another node's task holds the lock", func(t *testing.T) {
		holder := etcdclient.LockHolder{Holder: "etcdlet task runner", Host: "node-elsewhere", PID: 4242, Acquired: time.Now(), Task: "20261124-000000-abcdef", Type: "defrag"}
		b, _ := json.Marshal(holder)
		lease, err := cli.Grant(t.Context(), 60)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(t.Context(), etcdclient.TaskLockKey("etcd-main"), string(b), clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
		out, err := runTaskCLI(t, c, 2, "snapshot")
		if err == nil || !strings.Contains(out, "Rejected") || !strings.Contains(out, "node-elsewhere") || !strings.Contains(out, task.CodeDuplicateTask) {
			t.Fatalf("got %v\n%s\nwant a rejection naming the other node's task", err, out)
		}
		// A delta: a full one would be answered with the one just taken.
		resp, err := hc.Post(api(1, "/snapshot/delta"), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("POST /snapshot/delta while locked: %s (Retry-After %q), want 503 with a time to retry", resp.Status, resp.Header.Get("Retry-After"))
		}
		// What an operator sees of it: the holder, not stale while its
		// lease lives, not broken by --yes.
		out, stderr, code := etcdlet(t, "lock", "status", "--task", "--config", c.ConfigPath(1), "-o", "json")
		var st struct {
			Lock, Why   string
			Held, Stale bool
			Holder      *etcdclient.LockHolder
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || !st.Held || st.Stale || st.Lock != etcdclient.LockTask ||
			st.Holder == nil || st.Holder.Task != holder.Task || st.Holder.Host != "node-elsewhere" {
			t.Errorf("lock status --task: exit %d, %v: %s%s", code, err, out, stderr)
		}
		if _, stderr, code := etcdlet(t, "lock", "break", "--task", "--yes", "--config", c.ConfigPath(1)); code != 1 || !strings.Contains(stderr, "refused") {
			t.Errorf("lock break --task --yes of a live task's lock: exit %d, %s", code, stderr)
		}
		if _, err := cli.Revoke(t.Context(), lease.ID); err != nil {
			t.Fatal(err)
		}
		if out, err := runTaskCLI(t, c, 2, "snapshot"); err != nil {
			t.Fatalf("after the lock was freed: %v\n%s", err, out)
		}
	})
	for _, k := range listObjects(t, srv) {
		if !snapshotObject.MatchString(k) {
			t.Errorf("object %s is not named as backup-restore names snapshots", k)
		}
	}
}

func putKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := cli.Put(t.Context(), prefix+strconv.Itoa(i), strings.Repeat("v", 100)+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// defragOutput is the defrag task's output.
type defragOutput struct {
	Members []struct {
		Member, Action string
	} `json:"members"`
}

func taskStatus(t *testing.T, c *harness.Cluster, n int, id string) task.Task {
	t.Helper()
	tk, err := readTask(c, n, id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// readTask runs `etcdlet task status ID` on node n.
func readTask(c *harness.Cluster, n int, id string) (task.Task, error) {
	var tk task.Task
	out, err := exec.Command(binary, "task", "status", id, "--config", c.ConfigPath(n)).CombinedOutput()
	if err != nil {
		return tk, fmt.Errorf("task status %s: %v: %s", id, err, out)
	}
	if err := json.Unmarshal(out, &tk); err != nil {
		return tk, fmt.Errorf("task status %s: %v\n%s", id, err, out)
	}
	return tk, nil
}

// A rolling defragmentation under write load never costs quorum: with one
// of three members down it defragments nothing (each member's stall would
// leave one healthy voter) and waits; an agent killed while its task waits
// resumes the task after a restart and finishes it, every member once,
// the leader last.
func TestDefragRollingNeverLosesQuorum(t *testing.T) {
	c, cli := startCluster(t, netDefrag, 3, func(o *harness.Options) {
		o.Extra = "tasks:\n  requeueInterval: 500ms\n  lockTTL: 5s\n"
	})
	// Fragment the backends: write, then delete and compact (the compact
	// task, keeping no old revision readable).
	putKeys(t, cli, "bulk/", 2000)
	resp, err := cli.Delete(t.Context(), "bulk/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runTaskCLI(t, c, 2, "compact", "--retain", "0"); err != nil || !strings.Contains(out, "compacted to revision") {
		t.Fatalf("task run compact: %v\n%s", err, out)
	}
	if _, err := cli.Get(t.Context(), "bulk/1", clientv3.WithRev(resp.Header.Revision-1)); err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Fatalf("a revision before the compaction is still readable: %v", err)
	}
	c.Agent(3).Stop()
	out, err := exec.Command(binary, "task", "run", "defrag", "--threshold", "0", "--detach", "--config", c.ConfigPath(1)).Output()
	if err != nil {
		t.Fatalf("task run defrag --detach: %v", err)
	}
	id := strings.TrimSpace(string(out))
	harness.Eventually(t, 30*time.Second, "the defrag waits for the stopped member", func() error {
		tk, err := readTask(c, 1, id)
		if err != nil {
			return err
		}
		if tk.Phase != task.InProgress || len(tk.LastErrors) == 0 || tk.LastErrors[len(tk.LastErrors)-1].Code != "ERR_WOULD_LOSE_QUORUM" {
			return fmt.Errorf("state %s, errors %+v", tk.Phase, tk.LastErrors)
		}
		return nil
	})
	if tk := taskStatus(t, c, 1, id); len(tk.Progress) > 0 {
		t.Fatalf("members were defragmented while the cluster could not spare one: %s", tk.Progress)
	}

	// The test itself takes quorum away here (members 1 and 3 down) and
	// gives it back; what the writer measures is the defrag that resumes
	// once agent 1 is back, with members 2 and 3 voting.
	c.Agent(1).Kill()
	c.Agent(3).Restart()
	voting := c.ClientOf(2, 3)
	harness.Eventually(t, convergeTimeout, "members 2 and 3 take writes again", func() error {
		ctx, cancel := context.WithTimeout(t.Context(), harness.WriteTimeout)
		defer cancel()
		_, err := voting.Put(ctx, "/test/quorum-back", "yes")
		return err
	})
	w := c.StartWriter(voting)
	c.Agent(1).Restart()
	var done task.Task
	harness.Eventually(t, 2*time.Minute, "the resumed defrag completes", func() error {
		var err error
		if done, err = readTask(c, 1, id); err != nil {
			return err
		}
		if !done.Phase.Completed() {
			return fmt.Errorf("state %s: %s", done.Phase, done.LastOperation.Description)
		}
		return nil
	})
	if done.Phase != task.Succeeded || done.Attempts < 2 {
		t.Fatalf("state %s after %d attempts (%s), want Succeeded after a resumed attempt", done.Phase, done.Attempts, done.LastOperation.Description)
	}
	var outp defragOutput
	if err := json.Unmarshal(done.Output, &outp); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range outp.Members {
		seen[m.Member]++
		if m.Action != "defragmented" {
			t.Errorf("member %s: %s, want defragmented (threshold 0)", m.Member, m.Action)
		}
	}
	for n := 1; n <= 3; n++ {
		if seen[c.Name(n)] != 1 {
			t.Errorf("member %s defragmented %d times, want once (members: %v)", c.Name(n), seen[c.Name(n)], seen)
		}
	}
	checkWrites(t, w)
}

// The recovery path after lost quorum, as docs/operations.md gives it:
// full and delta snapshots in S3; `etcdlet restore` on one node (refused
// while the others still have quorum), then with host 2 down and node 3's
// agent running: node 3 promises not to start its member again and joins
// the restored cluster on its own, node 2 is cleared with `--rejoin`: the
// three nodes form the restored cluster, with every key of the last delta
// and the old data dirs kept.
func TestRestoreAfterLostQuorum(t *testing.T) {
	srv := s3test.Start(t)
	c, cli := startCluster(t, netRestore, 3, func(o *harness.Options) { o.Extra = s3Backup(t, srv, freeLoopbackPort(t)) })
	putKeys(t, cli, "data/a/", 300)
	if out, err := runTaskCLI(t, c, 1, "snapshot"); err != nil {
		t.Fatalf("full snapshot: %v\n%s", err, out)
	}
	putKeys(t, cli, "data/b/", 100)
	if _, err := cli.Delete(t.Context(), "data/a/1", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if out, err := runTaskCLI(t, c, 2, "snapshot", "--kind", "delta"); err != nil || !strings.Contains(out, "Incr-") {
		t.Fatalf("delta snapshot: %v\n%s", err, out)
	}
	want := readPrefix(t, cli, "data/")
	oldCluster := clusterID(t, cli)
	// A client that watched the lost cluster, as the API server's watch
	// cache does: after the restore it must get a compaction error (and
	// list again), never revisions it saw before or none at all.
	watchCtx, cancelWatch := context.WithCancel(t.Context())
	defer cancelWatch()
	watch := cli.Watch(watchCtx, "data/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if created := <-watch; !created.Created {
		t.Fatalf("the watch was not created: %+v", created)
	}

	restoreCmd := func(n int, args ...string) (string, error) {
		out, err := exec.Command(binary, append([]string{"restore", "--yes", "--config", c.ConfigPath(n)}, args...)...).CombinedOutput()
		return string(out), err
	}
	c.Agent(1).Stop()
	if out, err := restoreCmd(1); err == nil || !strings.Contains(out, "quorum") {
		t.Fatalf("restore while two members keep quorum: %v\n%s\nwant a refusal", err, out)
	}
	// Host 2 is down; node 3's agent runs, its member without quorum:
	// it promises not to start that member again, and joins the restored
	// cluster on its own; node 2 is cleared by hand.
	c.Agent(2).Stop()
	out, err := restoreCmd(1)
	if err != nil || !strings.Contains(out, "restored") || !strings.Contains(out, "bumped by 1000000000 to ") ||
		!strings.Contains(out, c.IP(3)+" (cluster "+fmt.Sprintf("%x", oldCluster)+") promised not to start their members again") ||
		!strings.Contains(out, "Run 'etcdlet restore --rejoin' on "+c.IP(2)+" before its etcdlet starts") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	// What went as expected is not shown as a problem: no error or
	// warning from the restore's temporary etcd (its shutdown, its ports).
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") || strings.Contains(line, "not recommended for production") {
			t.Errorf("a restore that succeeded printed %q; all it printed:\n%s", line, out)
		}
	}
	if out, err := restoreCmd(2, "--rejoin"); err != nil {
		t.Fatalf("restore --rejoin on node 2: %v\n%s", err, out)
	}
	for _, n := range []int{1, 2} {
		c.Agent(n).Restart()
	}
	cli2 := c.Client()
	c.Wait(cli2, convergeTimeout, 1, 2, 3)
	if got := readPrefix(t, cli2, "data/"); !mapsEqual(got, want) {
		t.Fatalf("the restored cluster holds %d keys under data/, want the %d of the last delta", len(got), len(want))
	}
	if id := clusterID(t, cli2); id == oldCluster {
		t.Errorf("the restored cluster has the old cluster ID %x; a restore makes a new cluster", id)
	}
	put(t, cli2, "data/after-the-restore", "1")
	requireCompactionError(t, watch)
	for _, n := range []int{1, 2, 3} {
		requireKeptData(t, movedAside(t, c, n))
	}
	// Node 1's agent reported the restore at its start, the others none;
	// node 3's promised and left the lost cluster.
	for n, want := range map[int]float64{1: 1, 2: 0, 3: 0} {
		waitMetric(t, c.Agent(n), `etcdlet_recovery_steps_total{step="restored"}`, fmt.Sprint(want), equals(want))
	}
	for _, step := range []string{"retired", "left"} {
		waitMetric(t, c.Agent(3), `etcdlet_recovery_steps_total{step="`+step+`"}`, "1", equals(1))
	}
}

// requireCompactionError asserts that a watch opened on the lost cluster
// hears a compaction error from the cluster restored or recovered in its
// place (its revision bumped and marked compacted), not events.
func requireCompactionError(t *testing.T, watch clientv3.WatchChan) {
	t.Helper()
	select {
	case resp := <-watch:
		if resp.CompactRevision == 0 || len(resp.Events) > 0 {
			t.Errorf("the watch opened before the loss got %d events (compact revision %d, %v); want a compaction error", len(resp.Events), resp.CompactRevision, resp.Err())
		}
	case <-time.After(convergeTimeout):
		t.Error("the watch opened before the loss heard nothing; want a compaction error")
	}
}

func readPrefix(t *testing.T, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range resp.Kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func clusterID(t *testing.T, cli *clientv3.Client) uint64 {
	t.Helper()
	resp, err := cli.MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.ClusterId
}

// An agent killed in the middle of a snapshot (its upload hangs on an S3
// server that stopped answering) keeps the cluster-wide lock until its
// lease expires, so other nodes' tasks are rejected meanwhile; restarted,
// it takes the lock over for the same task, takes the snapshot again and
// finishes: one snapshot in the store, no temporary files left.
func TestSnapshotResumesAfterAgentKilled(t *testing.T) {
	srv := s3test.Start(t)
	// The rejection below must come while the killed agent's lease lives:
	// the other tests' 5 s is less than a kill and a CLI's start took on a
	// loaded machine (2 cores beside the other suites and a campaign).
	extra := strings.Replace(s3Backup(t, srv, freeLoopbackPort(t)), "lockTTL: 5s", "lockTTL: 30s", 1)
	c, cli := startCluster(t, netTaskKill, 3, func(o *harness.Options) { o.Extra = extra })
	putKeys(t, cli, "data/", 200)

	srv.Pause(t)
	out, err := exec.Command(binary, "task", "run", "snapshot", "--detach", "--config", c.ConfigPath(1)).Output()
	if err != nil {
		t.Fatalf("task run snapshot --detach: %v", err)
	}
	id := strings.TrimSpace(string(out))
	harness.Eventually(t, 30*time.Second, "the snapshot's upload is under way", func() error {
		tk, err := readTask(c, 1, id)
		if err != nil {
			return err
		}
		if tk.Phase != task.InProgress || !strings.Contains(tk.LastOperation.Description, "streaming a full snapshot") {
			return fmt.Errorf("state %s: %s", tk.Phase, tk.LastOperation.Description)
		}
		return nil
	})
	c.Agent(1).Kill()
	if out, err := runTaskCLI(t, c, 2, "compact"); err == nil || !strings.Contains(out, id) {
		t.Fatalf("a task on another node while the killed agent's lease lives: %v\n%s\nwant a rejection naming task %s", err, out, id)
	}
	srv.Resume(t)
	c.Agent(1).Restart()
	var done task.Task
	harness.Eventually(t, time.Minute, "the resumed snapshot completes", func() error {
		var err error
		if done, err = readTask(c, 1, id); err != nil {
			return err
		}
		if !done.Phase.Completed() || !done.Cleaned {
			return fmt.Errorf("state %s: %s", done.Phase, done.LastOperation.Description)
		}
		return nil
	})
	if done.Phase != task.Succeeded || done.Attempts != 2 {
		t.Fatalf("state %s after %d attempts (%s), want Succeeded at the second attempt", done.Phase, done.Attempts, done.LastOperation.Description)
	}
	var s snapshot.Snapshot
	if err := json.Unmarshal(done.Output, &s); err != nil {
		t.Fatal(err)
	}
	if keys := listObjects(t, srv); len(keys) != 1 || keys[0] != "etcd-main/v2/"+s.SnapName {
		t.Errorf("objects %v, want exactly the task's %s", keys, s.SnapName)
	}
	tmp := filepath.Join(filepath.Dir(c.ConfigPath(1)), "state", "tmp")
	if left, _ := filepath.Glob(filepath.Join(tmp, "*", "*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// Scheduled snapshots on every agent of a cluster sharing one S3 store:
// one full snapshot per interval for the whole cluster (the store says
// whether one is due), then deltas of the writes.
func TestScheduledSnapshots(t *testing.T) {
	srv := s3test.Start(t)
	_, cli := startCluster(t, netSchedule, 3, func(o *harness.Options) {
		o.Extra = strings.Replace(s3Backup(t, srv, freeLoopbackPort(t)), "  api:", "  schedule: {full: 1m, delta: 10s}\n  api:", 1)
	})
	harness.Eventually(t, 45*time.Second, "a scheduled full snapshot and a delta of the writes after it", func() error {
		putKeys(t, cli, "data/", 5)
		var full, deltas int
		for _, k := range listObjects(t, srv) {
			switch {
			case strings.Contains(k, "/Full-"):
				full++
			case strings.Contains(k, "/Incr-"):
				deltas++
			}
		}
		if full == 0 || deltas == 0 {
			return fmt.Errorf("%d full, %d delta snapshots", full, deltas)
		}
		if full > 1 {
			t.Fatalf("%d full snapshots within one interval of 1m: the agents did not see each other's", full)
		}
		return nil
	})
}
