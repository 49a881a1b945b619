package druid

import (
	"strings"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/test/envtest"
)

// The snapshot Leases are renewed as etcd-backup-restore renews them, on
// a real kube-apiserver: never for an Etcd without deltaSnapshotPeriod
// (druid v0.38.1 would crash), which is said once; the full one with the
// snapshot's revision and time, never lowered; the delta one with the
// time of the delta and, with nothing stored, revision 0.
func TestSnapshotLeases(t *testing.T) {
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	ctx := t.Context()
	etcd := etcdWith(1, "192.0.2.1")
	etcd.ResourceVersion = ""
	etcd.Spec.Labels = map[string]string{"app": "etcd"}
	etcd.Spec.Backup.Store = &druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("backups"), Prefix: "etcd-main"}
	if err := env.Client.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd-main-full-snap", "etcd-main-delta-snap"} { // as druid creates them
		if err := env.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(name string) (holder string, renewed time.Time) {
		t.Helper()
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "etcd-main-" + name + "-snap"}, l); err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time
		}
		return holder, renewed
	}
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	events := &recorded{}
	s := NewSnapshotLeases()
	s.Leases, s.Namespace, s.CallTimeout = env.AgentClients(t).Leases, "kube-system", 5*time.Second
	s.Tracker, s.Recorder, s.Log, s.Now = kube.NewTracker("snapshot leases", nil, nil), events, discard, func() time.Time { return now }
	offer := func(t *testing.T, taken Taken) {
		t.Helper()
		s.Offer(taken)
		if err := s.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *druidv1alpha1.Etcd {
		t.Helper()
		e := &druidv1alpha1.Etcd{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(etcd), e); err != nil {
			t.Fatal(err)
		}
		return e
	}

	// Before the Etcd is read nothing is written, and the snapshot waits.
	offer(t, Taken{Full: true, LastRevision: 40, At: now.Add(-time.Minute)})
	s.OnEtcd(read())
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, renewed := lease("full"); !renewed.IsZero() {
		t.Fatalf("renewed for an Etcd without spec.backup.deltaSnapshotPeriod (%v): druid v0.38.1 crashes on that", renewed)
	}
	offer(t, Taken{Full: false, At: now})
	if len(events.reasons) != 1 || events.reasons[0] != kube.ReasonSnapshotLeasesNotRenewed {
		t.Errorf("events %v, want one %s", events.reasons, kube.ReasonSnapshotLeasesNotRenewed)
	}
	if st := s.Tracker.State(); !strings.Contains(st.Detail, "spec.backup.deltaSnapshotPeriod") {
		t.Errorf("etcdlet status says %q, want why nothing is renewed", st.Detail)
	}

	e := read()
	e.Spec.Backup.DeltaSnapshotPeriod = &metav1.Duration{Duration: 20 * time.Second}
	s.OnEtcd(e)
	full := now.Add(-time.Minute)
	offer(t, Taken{Full: true, LastRevision: 50, At: full})
	if holder, renewed := lease("full"); holder != "50" || !renewed.Equal(full) {
		t.Errorf("full snapshot Lease: %q at %v, want 50 at the snapshot's time %v", holder, renewed, full)
	}
	offer(t, Taken{Full: true, LastRevision: 45, At: now})
	if holder, renewed := lease("full"); holder != "50" || !renewed.Equal(full) {
		t.Errorf("an older full snapshot lowered the Lease to %q at %v", holder, renewed)
	}
	offer(t, Taken{Full: false, At: now})
	if holder, renewed := lease("delta"); holder != "0" || !renewed.Equal(now) {
		t.Errorf("a delta with nothing stored: %q at %v, want 0 at %v", holder, renewed, now)
	}
	now = now.Add(20 * time.Second)
	offer(t, Taken{Full: false, LastRevision: 61, At: now})
	if holder, renewed := lease("delta"); holder != "61" || !renewed.Equal(now) {
		t.Errorf("a delta up to revision 61: %q at %v, want 61 at %v", holder, renewed, now)
	}
	if len(events.reasons) != 1 {
		t.Errorf("events %v: the refusal was sent more than once", events.reasons)
	}
}
