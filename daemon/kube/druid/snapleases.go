package druid

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdlet/etcdlet/daemon/kube"
)

// Taken is a snapshot this node's agent took: druid learns of it through
// the Etcd's snapshot Leases.
type Taken struct {
	// Full: a full snapshot; else a delta.
	Full bool
	// LastRevision is the snapshot's last revision; 0 for a delta that
	// found nothing to store.
	LastRevision int64
	// At is the full snapshot's creation time, or when the delta was
	// taken.
	At time.Time
}

// SnapshotLeases renews the Etcd's snapshot Leases, <etcd>-full-snap and
// <etcd>-delta-snap, after each snapshot this node takes, as
// etcd-backup-restore does (pkg/health/heartbeat): holder identity the
// snapshot's last revision in decimal, never lowered; renew time the full
// snapshot's creation, or the delta's time. druid computes the Etcd's
// BackupReady condition from them: True while the delta Lease was renewed
// within twice spec.backup.deltaSnapshotPeriod and the full one within its
// full-snapshot interval (24 h by default).
//
// It never renews them for an Etcd without spec.backup.deltaSnapshotPeriod:
// etcd-druid v0.38 dereferences that field in its BackupReady check as soon
// as a snapshot Lease has a renew time, and crashes. Nor for an Etcd
// without spec.backup.store, for which druid computes no BackupReady.
type SnapshotLeases struct {
	Leases      kube.API
	Namespace   string
	CallTimeout time.Duration
	Tracker     *kube.Tracker
	Recorder    kube.Recorder
	Log         *slog.Logger
	Now         func() time.Time

	mu      sync.Mutex
	etcd    *druidv1alpha1.Etcd
	pending map[bool]Taken // the newest snapshot of each kind not written yet
	wake    chan struct{}
	refused string // the refusal last logged and sent as an Event
}

// NewSnapshotLeases returns a renewer; the fields left are set by the
// caller.
func NewSnapshotLeases() *SnapshotLeases {
	return &SnapshotLeases{pending: map[bool]Taken{}, wake: make(chan struct{}, 1), Now: time.Now}
}

// OnEtcd takes in a version of the Etcd resource.
func (s *SnapshotLeases) OnEtcd(e *druidv1alpha1.Etcd) {
	s.mu.Lock()
	s.etcd = e.DeepCopy()
	s.mu.Unlock()
	s.poke()
}

// Offer hands over a snapshot taken; it never blocks. Of each kind only
// the newest waits for the write.
func (s *SnapshotLeases) Offer(t Taken) {
	s.mu.Lock()
	if prev, ok := s.pending[t.Full]; !ok || !t.At.Before(prev.At) {
		s.pending[t.Full] = t
	}
	s.mu.Unlock()
	s.poke()
}

func (s *SnapshotLeases) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run writes what is offered until ctx ends, retrying a failed write with
// backoff.
func (s *SnapshotLeases) Run(ctx context.Context) {
	backoff := kube.Backoff{Base: time.Second, Max: time.Minute}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-retry.C:
		}
		if err := s.flush(ctx); err != nil {
			retry.Reset(backoff.Next())
			continue
		}
		backoff.Reset()
	}
}

// flush writes every pending snapshot; it stops at the first failure.
func (s *SnapshotLeases) flush(ctx context.Context) error {
	for _, full := range []bool{true, false} {
		s.mu.Lock()
		t, ok := s.pending[full]
		e := s.etcd
		s.mu.Unlock()
		if !ok || e == nil { // the Etcd not read yet: OnEtcd wakes the loop
			continue
		}
		if err := s.renew(ctx, e, t); err != nil {
			s.Tracker.Failed(s.Now(), err)
			s.Log.Warn("snapshot lease not renewed; retrying", "error", err)
			return err
		}
		s.mu.Lock()
		if s.pending[full] == t {
			delete(s.pending, full)
		}
		s.mu.Unlock()
	}
	return nil
}

// leaseRefusal says why the snapshot Leases of e must not be renewed; "" when
// they may.
func leaseRefusal(e *druidv1alpha1.Etcd) string {
	switch b := e.Spec.Backup; {
	case b.Store == nil || b.Store.Provider == nil || *b.Store.Provider == "":
		return "the Etcd has no spec.backup.store, so etcd-druid computes no BackupReady condition"
	case b.DeltaSnapshotPeriod == nil:
		return "the Etcd has no spec.backup.deltaSnapshotPeriod: etcd-druid v0.38 reads it in its BackupReady check once a snapshot Lease has a renew time, and crashes without it; set it (to backup.schedule.delta) for BackupReady"
	}
	return ""
}

func (s *SnapshotLeases) renew(ctx context.Context, e *druidv1alpha1.Etcd, t Taken) error {
	if why := leaseRefusal(e); why != "" {
		s.refuse(why)
		return nil
	}
	s.refuse("")
	name := druidv1alpha1.GetDeltaSnapshotLeaseName(e.ObjectMeta)
	if t.Full {
		name = druidv1alpha1.GetFullSnapshotLeaseName(e.ObjectMeta)
	}
	ctx, cancel := context.WithTimeout(ctx, s.CallTimeout)
	defer cancel()
	key := types.NamespacedName{Namespace: s.Namespace, Name: name}
	var lease coordinationv1.Lease
	switch err := s.Leases.Get(ctx, key, &lease); {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("lease %s not found: etcd-druid creates the snapshot Leases of an Etcd with spec.backup.store", key)
	case err != nil:
		return fmt.Errorf("read lease %s: %w", key, err)
	}
	var held int64
	if h := lease.Spec.HolderIdentity; h != nil {
		var err error
		if held, err = strconv.ParseInt(*h, 10, 64); err != nil {
			return fmt.Errorf("lease %s: holder identity %q is no revision: %w", key, *h, err)
		}
	}
	now := s.Now()
	if t.Full && lease.Spec.HolderIdentity != nil && held > t.LastRevision {
		// A newer full snapshot (another node's) is on record.
		s.Tracker.Succeeded(now, kube.ResultUnchanged, fmt.Sprintf("%s holds revision %d, newer than this node's %d", name, held, t.LastRevision))
		return nil
	}
	renewed := t.At
	if !t.Full {
		renewed = now
	}
	spec := map[string]any{"renewTime": metav1.NewMicroTime(renewed)}
	if lease.Spec.HolderIdentity == nil || held < t.LastRevision {
		spec["holderIdentity"] = strconv.FormatInt(t.LastRevision, 10)
	}
	// The full Lease with the resourceVersion read (an optimistic lock,
	// as backup-restore): another node's newer full snapshot written in
	// between must not be overwritten with an older revision.
	patch := map[string]any{"spec": spec}
	if t.Full {
		patch["metadata"] = map[string]any{"resourceVersion": lease.ResourceVersion}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := s.Leases.Patch(ctx, key, types.MergePatchType, data, "", &coordinationv1.Lease{}); err != nil {
		return fmt.Errorf("patch lease %s: %w", key, err)
	}
	s.Tracker.Rename("Lease " + s.Namespace + "/" + name + " (snapshots)")
	s.Tracker.Succeeded(now, kube.ResultWritten, fmt.Sprintf("renewed after the snapshot up to revision %d", t.LastRevision))
	s.Log.Info("snapshot lease renewed", "lease", name, "revision", t.LastRevision)
	return nil
}

// refuse records why the Leases are not renewed: in the tracker (etcdlet
// status), and once per reason in the log and as an Event.
func (s *SnapshotLeases) refuse(why string) {
	s.mu.Lock()
	first := why != s.refused
	s.refused = why
	s.mu.Unlock()
	if why == "" {
		return
	}
	s.Tracker.Idle("not renewing: " + why)
	if first {
		s.Log.Warn("snapshot leases not renewed", "reason", why)
		s.Recorder.Eventf(corev1.EventTypeWarning, kube.ReasonSnapshotLeasesNotRenewed, "snapshot Leases not renewed after this node's snapshot: %s", why)
	}
}
