package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// druidTimeout bounds each wait on druid: a status sync is 5 s, and a busy
// 2-core machine can delay a reconcile by several of them.
const druidTimeout = 60 * time.Second

// The real operator turns Leases renewed in the backup-restore format into
// Etcd.status.members and AllMembersReady: the loop the agents' tests build
// on.
func TestDruidCreatesMemberLeases(t *testing.T) {
	t.Parallel()
	env := Start(t, Options{DruidEtcd: true})
	ns := createNamespace(t, env, "druid-leases")

	// Created before druid runs, so its initial list finds it: that saves
	// a watch round trip off the ~10 s druid takes to start.
	addrs := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	etcd := &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns},
		Spec: druidv1alpha1.EtcdSpec{
			Labels:                           map[string]string{"app": "etcd-main"},
			Replicas:                         3,
			Etcd:                             druidv1alpha1.EtcdConfig{},
			Backup:                           druidv1alpha1.BackupSpec{},
			ExternallyManagedMemberAddresses: addrs,
		},
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := env.Client.Create(ctx, etcd); err != nil {
		t.Fatalf("create Etcd %s/%s: %v", ns, etcd.Name, err)
	}

	d := StartDruid(t, env, DruidOptions{})

	leaseNames := make([]string, len(addrs))
	for i, a := range addrs {
		leaseNames[i] = etcd.Name + "-" + a
	}
	waitDruid(t, "druid creates a Lease per member address, controlled by the Etcd", func(ctx context.Context) error {
		for _, name := range leaseNames {
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l); err != nil {
				return fmt.Errorf("get Lease %s: %w", name, err)
			}
			owner := metav1.GetControllerOf(l)
			if owner == nil || owner.UID != etcd.UID || owner.Kind != "Etcd" {
				return fmt.Errorf("Lease %s has controller %+v, want Etcd %s (uid %s)", name, owner, etcd.Name, etcd.UID)
			}
		}
		return nil
	})

	// What an agent writes (backup-restore's heartbeat format): member and
	// cluster IDs in lower-case hex, then the role; renewTime now.
	const clusterID = "1c2d3e4f5a6b7c8d"
	ids := []string{"8e9e05c52164694d", "91bc3c398fb3c146", "fd422379fda50e48"}
	roles := []druidv1alpha1.EtcdRole{druidv1alpha1.EtcdRoleLeader, druidv1alpha1.EtcdRoleMember, druidv1alpha1.EtcdRoleMember}
	renew := func(ctx context.Context) error {
		for i, name := range leaseNames {
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l); err != nil {
				return fmt.Errorf("get Lease %s: %w", name, err)
			}
			patch := client.MergeFrom(l.DeepCopy())
			holder := ids[i] + ":" + clusterID + ":" + string(roles[i])
			l.Spec.HolderIdentity = &holder
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if err := env.Client.Patch(ctx, l, patch); err != nil {
				return fmt.Errorf("renew Lease %s: %w", name, err)
			}
		}
		return nil
	}

	// druid reads Leases only on its status sync; renew on every poll
	// round, as an agent would on its timer, so that a slow round never lets
	// a renewal age past the unknown threshold.
	var lastRenew time.Time
	membersReady := func(ctx context.Context) error {
		if time.Since(lastRenew) > 2*time.Second {
			if err := renew(ctx); err != nil {
				return err
			}
			lastRenew = time.Now()
		}
		got := &druidv1alpha1.Etcd{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return fmt.Errorf("get Etcd: %w", err)
		}
		var problems []string
		if len(got.Status.Members) != len(leaseNames) {
			problems = append(problems, fmt.Sprintf("%d members in the status, want %d", len(got.Status.Members), len(leaseNames)))
		}
		for i, name := range leaseNames {
			j := slices.IndexFunc(got.Status.Members, func(m druidv1alpha1.EtcdMemberStatus) bool { return m.Name == name })
			if j < 0 {
				problems = append(problems, "member "+name+" missing")
				continue
			}
			m := got.Status.Members[j]
			var id string
			var role druidv1alpha1.EtcdRole
			if m.ID != nil {
				id = *m.ID
			}
			if m.Role != nil {
				role = *m.Role
			}
			if m.Status != druidv1alpha1.EtcdMemberStatusReady || id != ids[i] || role != roles[i] {
				problems = append(problems, fmt.Sprintf("member %s is %s (%s) id %q role %q, want Ready id %q role %q",
					name, m.Status, m.Reason, id, role, ids[i], roles[i]))
			}
		}
		c := findDruidCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersReady)
		if c == nil || c.Status != druidv1alpha1.ConditionTrue {
			problems = append(problems, fmt.Sprintf("condition AllMembersReady is %+v, want True", c))
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s", strings.Join(problems, "; "))
		}
		return nil
	}
	waitDruid(t, "druid lists the three renewed members as Ready with their roles, and AllMembersReady", membersReady)

	// The agents' tests restart kube-apiserver under a running druid: it
	// must survive that (its watches re-list) and go on computing the
	// status, here from a leader change made after the restart.
	env.StopAPIServer(t)
	env.StartAPIServer(t)
	roles[0], roles[1] = druidv1alpha1.EtcdRoleMember, druidv1alpha1.EtcdRoleLeader
	lastRenew = time.Time{}
	waitDruid(t, "after a kube-apiserver restart, druid reports the new leader", membersReady)

	// druid exits on SIGTERM, well before Stop would resort to SIGKILL;
	// Stop is idempotent (the cleanup calls it again).
	begin := time.Now()
	d.Stop()
	d.Stop()
	if took := time.Since(begin); took >= druidStopTimeout {
		t.Errorf("druid took %s to stop: it ignored SIGTERM", took)
	}
	select {
	case <-d.exited:
	default:
		t.Error("Stop returned while druid still runs")
	}
}

// The error for a missing druid binary says how to get it; StartDruid
// turns it into t.Fatal, never a skip.
func TestDruidBinaryErrorsSayHowToGetIt(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "druid")
	if err := os.WriteFile(notExec, []byte("not a binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, value, want string
	}{
		{"unset", "", "ETCDLET_DRUID is not set"},
		{"missing", filepath.Join(t.TempDir(), "druid"), "no such file"},
		{"not executable", notExec, "is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(druidEnv, tc.value)
			_, err := druidBinary()
			if err == nil {
				t.Fatalf("druidBinary() with %s=%q: no error", druidEnv, tc.value)
			}
			for _, w := range []string{tc.want, "run hack/druid.sh, or make test, which builds it"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDruidArgs(t *testing.T) {
	args, err := druidArgs(DruidOptions{UnknownThreshold: time.Minute, ExtraArgs: []string{"--etcd-workers=1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"--enable-leader-election=false",
		"--enable-etcd-components-webhook=false",
		"--etcd-status-sync-period=5s",
		"--etcd-member-unknown-threshold=1m0s",
		"--etcd-member-notready-threshold=30s",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("druid args %q lack %q", args, want)
		}
	}
	if args[len(args)-1] != "--etcd-workers=1" {
		t.Errorf("druid args %q do not end with the extra args", args)
	}
	if _, err := druidArgs(DruidOptions{StatusSyncPeriod: -time.Second}); err == nil {
		t.Error("a negative status sync period is accepted")
	}
}

func TestDruidLogScanner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "druid.log")
	write := func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	s := &druidLogScanner{started: map[string]bool{}, working: map[string]bool{}}
	scan := func() []string {
		t.Helper()
		if err := s.scan(path); err != nil {
			t.Fatal(err)
		}
		return s.pending()
	}
	write("plain text before the logger\n")
	for _, c := range druidControllers {
		write(`{"level":"info","msg":"Starting EventSource","controller":"` + c + `"}` + "\n")
	}
	write(`{"level":"info","msg":"Starting EventSource","controller":"compaction-controller"}` + "\n")
	if got := scan(); len(got) != len(druidControllers)+1 {
		t.Fatalf("pending %v before any worker started", got)
	}
	for _, c := range druidControllers {
		write(`{"level":"info","msg":"Starting workers","controller":"` + c + `","worker count":3}` + "\n")
	}
	// Half a line: the scanner must keep it for the next scan.
	write(`{"level":"info","msg":"Starting workers","contr`)
	if got := scan(); !slices.Equal(got, []string{"compaction-controller"}) {
		t.Fatalf("pending %v, want only compaction-controller", got)
	}
	write(`oller":"compaction-controller"}` + "\n")
	if got := scan(); len(got) != 0 {
		t.Fatalf("pending %v after every controller started its workers", got)
	}
}

// waitDruid polls check until it succeeds, failing the test with the last
// error when druidTimeout passes (StartDruid's cleanup then prints the end
// of druid's log).
func waitDruid(t *testing.T, what string, check func(context.Context) error) {
	t.Helper()
	begin := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), druidTimeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %v", what, druidTimeout, last)
	}
	t.Logf("%s: after %s", what, time.Since(begin).Round(time.Millisecond))
}

func findDruidCondition(cs []druidv1alpha1.Condition, typ druidv1alpha1.ConditionType) *druidv1alpha1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// createNamespace creates a namespace named after prefix, so that each
// test's objects are its own.
func createNamespace(t *testing.T, env *Env, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s-*: %v", prefix, err)
	}
	return ns.Name
}
