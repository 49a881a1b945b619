package test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
	"github.com/etcdlet/etcdlet/test/s3test"
)

// What etcd-druid v0.38.1 writes into an OnDemandSnapshot task's
// status.lastOperation.description when Execute succeeds
// (internal/controller/etcdopstask/handler/ondemandsnapshot): a delta whose
// response body is exactly "null" is "skipped", and still Succeeded.
const (
	druidSnapshotCreated = "Snapshot created successfully"
	druidDeltaSkipped    = "Delta snapshot was skipped by backup-restore server"
)

// A real etcd-druid orders etcdlet's snapshots: its EtcdOpsTask controller
// POSTs an OnDemandSnapshot to backup-restore's API on a member address of
// the externally managed Etcd (a random entry of
// spec.externallyManagedMemberAddresses, port spec.backup.port), the agent
// there runs a snapshot task into the S3 bucket, and the task ends
// Succeeded. A delta with no new events is answered "null", which druid
// records as skipped; a delta after new writes is stored as an Incr object.
// druid's BackupReady then follows the snapshot Leases (checkBackupReady).
func TestDruidOpsTaskSnapshots(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	srv := s3test.Start(t)
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	applyManifest(t, env, "deploy/rbac/etcd-druid.yaml")
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), druidIdentity)

	apiPort := freeLoopbackPort(t)
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netDruidOpsTask,
		Members: "members:\n  source: etcd-resource\n",
		Extra:   kubernetesSection(kubeconfig, "") + s3Backup(t, srv, apiPort)})

	// druid only checks that backup is enabled (spec.backup.store set); its
	// own backup sidecar never runs (externally managed: the StatefulSet has
	// no replicas), the agents answer on spec.backup.port instead.
	e := newEtcd(c, 1, 2, 3)
	e.Spec.Backup = druidv1alpha1.BackupSpec{
		Port: ptr.To(int32(apiPort)),
		Store: &druidv1alpha1.StoreSpec{
			Provider:  ptr.To(druidv1alpha1.StorageProvider("S3")),
			Container: ptr.To(srv.Bucket),
			Prefix:    "etcd-main",
		},
	}
	if err := env.Client.Create(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	formBeforeTheEtcd(t, c, 1, 2, 3)
	// A failed request (an agent's API not listening yet) is retried after
	// at most the requeue interval; druid's default is 15 s.
	envtest.StartDruid(t, env, envtest.DruidOptions{ExtraArgs: []string{"--etcd-ops-task-requeue-interval=2s"}})
	cli := c.ClientOf(1, 2, 3)
	c.Wait(cli, 90*time.Second, 1, 2, 3)
	putKeys(t, cli, "before/", 20)

	// druid rejects a task (ERR_ETCD_NOT_READY) unless the Etcd is Ready,
	// which it computes from the Leases the agents renew.
	harness.Eventually(t, 45*time.Second, "druid marks the Etcd Ready from etcdlet's Leases", func() error {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(e), got); err != nil {
			return err
		}
		for _, want := range []druidv1alpha1.ConditionType{druidv1alpha1.ConditionTypeReady, druidv1alpha1.ConditionTypeAllMembersReady} {
			i := slices.IndexFunc(got.Status.Conditions, func(c druidv1alpha1.Condition) bool { return c.Type == want })
			if i < 0 {
				return fmt.Errorf("no %s condition yet; members %+v", want, got.Status.Members)
			}
			if cond := got.Status.Conditions[i]; cond.Status != druidv1alpha1.ConditionTrue {
				return fmt.Errorf("%s is %s (%s: %s)", want, cond.Status, cond.Reason, cond.Message)
			}
		}
		return nil
	})
	ready := time.Now()

	fullTask := runOpsTask(t, env, "snapshot-full", druidv1alpha1.OnDemandSnapshotTypeFull)
	requireTaskSucceeded(t, fullTask, druidSnapshotCreated)
	requireObjects(t, srv, 1, 0)
	requireAPITasks(t, c, map[string]int{"full": 1})

	// Nothing was written since the full snapshot: backup-restore's answer
	// is exactly "null", which druid records as skipped. (etcdlet's own
	// task lock under /etcdlet/ changed meanwhile; those keys are not data.)
	deltaTask := runOpsTask(t, env, "snapshot-delta-empty", druidv1alpha1.OnDemandSnapshotTypeDelta)
	if op := deltaTask.Status.LastOperation; op != nil && op.Description == druidSnapshotCreated {
		t.Fatalf("EtcdOpsTask %s: %s; want %q: the agent stored a delta (%v) although nothing was written since the full snapshot, "+
			"so it did not answer \"null\"; the only changes since are etcdlet's own keys under /etcdlet/ (the task lock), which a delta must not count",
			deltaTask.Name, describeOpsTask(deltaTask), druidDeltaSkipped, listObjects(t, srv))
	}
	requireTaskSucceeded(t, deltaTask, druidDeltaSkipped)
	requireObjects(t, srv, 1, 0)

	putKeys(t, cli, "after/", 20)
	deltaTask = runOpsTask(t, env, "snapshot-delta", druidv1alpha1.OnDemandSnapshotTypeDelta)
	requireTaskSucceeded(t, deltaTask, druidSnapshotCreated)
	requireObjects(t, srv, 1, 1)
	requireAPITasks(t, c, map[string]int{"full": 1, "delta": 2})
	// Every transition of etcdlet's own tasks is an Event on the Etcd.
	harness.Eventually(t, 30*time.Second, "etcdlet's task Events on the Etcd", func() error {
		reasons, err := etcdEvents(t.Context(), env)
		if err != nil {
			return err
		}
		for _, want := range []string{"TaskPending", "TaskInProgress", "TaskSucceeded"} {
			if !slices.Contains(reasons, want) {
				return fmt.Errorf("no %s Event among %v", want, reasons)
			}
		}
		return nil
	})

	t.Logf("three druid tasks in %s after the Etcd was Ready; %s in all", time.Since(ready).Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))

	checkBackupReady(t, env, c, e)
}

// checkBackupReady: druid's BackupReady follows the snapshot Leases the
// agents renew after their snapshots, as backup-restore's would.
//
// With no spec.backup.deltaSnapshotPeriod the agents never renew them:
// etcd-druid v0.38.1 dereferences that field in its BackupReady check once
// a snapshot Lease has a renew time, and crashes. They say why (an Event
// on the Etcd; druid keeps running). With the period set, a full and a
// delta snapshot make BackupReady True; with no snapshot after that, the
// delta Lease goes stale and BackupReady turns False.
func checkBackupReady(t *testing.T, env *envtest.Env, c *harness.Cluster, e *druidv1alpha1.Etcd) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, "the agents say why they do not renew the snapshot Leases", func() error {
		reasons, err := etcdEvents(t.Context(), env)
		if err != nil {
			return err
		}
		if !slices.Contains(reasons, "SnapshotLeasesNotRenewed") {
			return fmt.Errorf("no SnapshotLeasesNotRenewed Event among %v", reasons)
		}
		return nil
	})
	for _, name := range []string{"etcd-main-full-snap", "etcd-main-delta-snap"} {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: druidNamespace, Name: name}, l); err != nil {
			t.Fatalf("druid's snapshot Lease %s: %v", name, err)
		}
		if l.Spec.RenewTime != nil {
			t.Errorf("Lease %s was renewed (%v) for an Etcd without spec.backup.deltaSnapshotPeriod", name, l.Spec.RenewTime)
		}
	}

	const period = 10 * time.Second
	got := &druidv1alpha1.Etcd{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(e), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Backup.DeltaSnapshotPeriod = &metav1.Duration{Duration: period}
	if err := env.Client.Patch(t.Context(), got, patch); err != nil {
		t.Fatal(err)
	}
	// The agents see the change through their watch of the Etcd; a
	// snapshot ordered before that is refused again, so order until the
	// Leases carry one.
	harness.Eventually(t, 60*time.Second, "a full and a delta snapshot renew both Leases", func() error {
		requireTaskSucceeded(t, runOpsTask(t, env, fmt.Sprintf("full-%d", time.Now().UnixNano()), druidv1alpha1.OnDemandSnapshotTypeFull), druidSnapshotCreated)
		runOpsTask(t, env, fmt.Sprintf("delta-%d", time.Now().UnixNano()), druidv1alpha1.OnDemandSnapshotTypeDelta)
		for _, name := range []string{"etcd-main-full-snap", "etcd-main-delta-snap"} {
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: druidNamespace, Name: name}, l); err != nil {
				return err
			}
			if l.Spec.RenewTime == nil || l.Spec.HolderIdentity == nil {
				return fmt.Errorf("Lease %s not renewed yet", name)
			}
		}
		return nil
	})
	full := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: druidNamespace, Name: "etcd-main-full-snap"}, full); err != nil {
		t.Fatal(err)
	}
	if rev, err := strconv.ParseInt(*full.Spec.HolderIdentity, 10, 64); err != nil || rev <= 0 {
		t.Errorf("the full snapshot Lease's holder identity is %q, want the snapshot's last revision in decimal", *full.Spec.HolderIdentity)
	}
	waitBackupReady(t, env, e, druidv1alpha1.ConditionTrue, "BackupSucceeded", 60*time.Second)
	// No snapshot any more: druid goes True -> Unknown -> False once the
	// delta Lease is older than three periods.
	waitBackupReady(t, env, e, druidv1alpha1.ConditionFalse, "BackupFailed", 3*period+60*time.Second)
}

// waitBackupReady waits until druid's BackupReady condition of e has
// status and reason.
func waitBackupReady(t *testing.T, env *envtest.Env, e *druidv1alpha1.Etcd, status druidv1alpha1.ConditionStatus, reason string, within time.Duration) {
	t.Helper()
	harness.Eventually(t, within, fmt.Sprintf("druid's BackupReady %s (%s)", status, reason), func() error {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(e), got); err != nil {
			return err
		}
		i := slices.IndexFunc(got.Status.Conditions, func(c druidv1alpha1.Condition) bool { return c.Type == druidv1alpha1.ConditionTypeBackupReady })
		if i < 0 {
			return fmt.Errorf("no BackupReady condition among %+v", got.Status.Conditions)
		}
		if c := got.Status.Conditions[i]; c.Status != status || c.Reason != reason {
			return fmt.Errorf("BackupReady is %s (%s: %s)", c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

// runOpsTask creates an OnDemandSnapshot EtcdOpsTask for etcd-main and
// waits until druid completes it (Succeeded, Failed or Rejected).
func runOpsTask(t *testing.T, env *envtest.Env, name string, typ druidv1alpha1.OnDemandSnapshotType) *druidv1alpha1.EtcdOpsTask {
	t.Helper()
	cfg := &druidv1alpha1.OnDemandSnapshotConfig{Type: typ}
	if typ == druidv1alpha1.OnDemandSnapshotTypeFull {
		cfg.TimeoutSecondsFull = ptr.To(int32(120)) // the CRD's minimum
	} else {
		cfg.TimeoutSecondsDelta = ptr.To(int32(30))
	}
	task := &druidv1alpha1.EtcdOpsTask{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: druidNamespace},
		Spec: druidv1alpha1.EtcdOpsTaskSpec{
			EtcdName: ptr.To("etcd-main"),
			Config:   druidv1alpha1.EtcdOpsTaskConfig{OnDemandSnapshot: cfg},
		},
	}
	if err := env.Client.Create(t.Context(), task); err != nil {
		t.Fatalf("create EtcdOpsTask %s: %v", name, err)
	}
	created := time.Now()
	harness.Eventually(t, 30*time.Second, "druid completes EtcdOpsTask "+name, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(task), task); err != nil {
			return err
		}
		if !task.IsCompleted() {
			return fmt.Errorf("status %s", describeOpsTask(task))
		}
		return nil
	})
	t.Logf("EtcdOpsTask %s (%s): %s in %s", name, typ, describeOpsTask(task), time.Since(created).Round(10*time.Millisecond))
	return task
}

func describeOpsTask(task *druidv1alpha1.EtcdOpsTask) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state %s", ptr.Deref(task.Status.State, "<none>"))
	if op := task.Status.LastOperation; op != nil {
		fmt.Fprintf(&b, ", lastOperation %s/%s %q", op.Type, op.State, op.Description)
	}
	for _, e := range task.Status.LastErrors {
		fmt.Fprintf(&b, ", error %s: %s", e.Code, e.Description)
	}
	return b.String()
}

// requireTaskSucceeded asserts druid's record of a successful Execute.
func requireTaskSucceeded(t *testing.T, task *druidv1alpha1.EtcdOpsTask, description string) {
	t.Helper()
	op := task.Status.LastOperation
	if ptr.Deref(task.Status.State, "") != druidv1alpha1.TaskStateSucceeded || op == nil ||
		op.Type != druidv1alpha1.LastOperationTypeExecution || op.State != druidv1alpha1.LastOperationStateCompleted || op.Description != description {
		t.Fatalf("EtcdOpsTask %s: %s; want Succeeded with lastOperation Execution/Completed %q", task.Name, describeOpsTask(task), description)
	}
}

// requireObjects asserts the bucket holds full full and delta Incr
// snapshot objects, named as backup-restore names them.
func requireObjects(t *testing.T, srv s3test.Server, full, delta int) {
	t.Helper()
	keys := listObjects(t, srv)
	var f, d int
	for _, k := range keys {
		switch {
		case !snapshotObject.MatchString(k):
			t.Fatalf("object %s is not named as backup-restore names snapshots", k)
		case strings.Contains(k, "/Full-00000000-"):
			f++
		case strings.Contains(k, "/Incr-"):
			d++
		}
	}
	if f != full || d != delta {
		t.Fatalf("objects %v: %d full and %d delta, want %d and %d", keys, f, d, full, delta)
	}
}

// requireAPITasks asserts that the agents ran exactly these snapshot tasks
// (by kind) on backup-restore API requests, as their logs and `etcdlet task
// list` say, all Succeeded.
func requireAPITasks(t *testing.T, c *harness.Cluster, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	listed := 0
	for n := 1; n <= 3; n++ {
		for _, e := range c.Agent(n).LogEntries() {
			if e["msg"] != "task submitted" || e["source"] != "backup-restore API" || e["type"] != "snapshot" {
				continue
			}
			params, _ := e["params"].(map[string]any)
			got[fmt.Sprint(params["kind"])]++
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		out, err := exec.CommandContext(ctx, binary, "task", "list", "--config", c.ConfigPath(n)).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("etcdlet task list on node %d: %v\n%s", n, err, out)
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			if !strings.Contains(line, "backup-restore API") {
				continue
			}
			if f := strings.Fields(line); len(f) < 3 || f[1] != "snapshot" || f[2] != "Succeeded" {
				t.Errorf("node %d: task list row %q: want a Succeeded snapshot task", n, line)
			}
			listed++
		}
	}
	total := 0
	for _, v := range want {
		total += v
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || listed != total {
		t.Fatalf("the agents logged snapshot tasks from backup-restore API by kind %v and list %d, want %v", got, listed, want)
	}
}
