package druid

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/etcdlet/etcdlet/daemon/kube"
)

// TLSEnabledAnnotation is set on a member Lease to whether all of the
// member's peer URLs are https; druid parses it with strconv.ParseBool.
const TLSEnabledAnnotation = "member.etcd.gardener.cloud/tls-enabled"

// Roles in the holder identity, as druid parses them.
const (
	RoleLeader = "Leader"
	RoleMember = "Member"
)

// pollInterval is how often the local member is asked for its status: a
// leader change reaches the Lease within it (druid's DEP-07 lag), while
// the Lease itself is only written on a change or at the heartbeat.
const pollInterval = time.Second

// LocalMember is what the local etcd member says about itself.
type LocalMember struct {
	IP        netip.Addr
	MemberID  uint64
	ClusterID uint64
	Leader    bool
}

// HolderIdentity is the Lease's spec.holderIdentity, as
// etcd-backup-restore writes it: <memberID>:<clusterID>:<role>, IDs in
// lower-case hex without padding.
func (m LocalMember) HolderIdentity() string {
	role := RoleMember
	if m.Leader {
		role = RoleLeader
	}
	return strconv.FormatUint(m.MemberID, 16) + ":" + strconv.FormatUint(m.ClusterID, 16) + ":" + role
}

// LeaseRenewer renews this member's Lease.
type LeaseRenewer struct {
	// Leases reaches the member Leases (kube.Clients.Leases).
	Leases kube.API
	// Namespace and EtcdName name the Etcd resource; the name is known
	// from the configuration before the resource itself is read.
	Namespace   string
	EtcdName    string
	CallTimeout time.Duration
	// Local asks the local member; an error (not running, not reachable,
	// answering for another cluster than the node's) means no renewal, so
	// that druid sees the member go stale, as with backup-restore.
	Local func(ctx context.Context) (LocalMember, error)
	// PeerTLS is whether the member's peer URLs are https.
	PeerTLS bool
	// Heartbeat is kubernetes.etcd.heartbeatInterval; zero follows the
	// Etcd's spec.etcd.heartbeatDuration, else druid's default.
	Heartbeat time.Duration
	Tracker   *kube.Tracker
	Log       *slog.Logger
	Now       func() time.Time

	mu   sync.Mutex
	etcd *druidv1alpha1.Etcd // last version seen; nil until read

	written     string // holder identity last written
	writtenAt   time.Time
	writtenName string
}

// OnEtcd takes in a version of the Etcd resource (lease name prefix,
// heartbeat, owner for a Lease that has to be created).
func (r *LeaseRenewer) OnEtcd(e *druidv1alpha1.Etcd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.etcd = e.DeepCopy()
}

func (r *LeaseRenewer) resource() *druidv1alpha1.Etcd {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.etcd
}

// LeaseName is the Lease of the member at ip: druid's own function when the
// Etcd was read (it adds spec.memberNamePrefix), else <etcd>-<ip>.
func (r *LeaseRenewer) LeaseName(ip netip.Addr) string {
	if e := r.resource(); e != nil {
		return druidv1alpha1.GetMemberNameFromAddress(e, ip.String())
	}
	return r.EtcdName + "-" + ip.String()
}

// heartbeat is the renewal period in force.
func (r *LeaseRenewer) heartbeat() time.Duration {
	if r.Heartbeat > 0 {
		return r.Heartbeat
	}
	if e := r.resource(); e != nil && e.Spec.Etcd.HeartbeatDuration != nil && e.Spec.Etcd.HeartbeatDuration.Duration >= time.Second {
		return e.Spec.Etcd.HeartbeatDuration.Duration
	}
	return 10 * time.Second
}

// Run renews until ctx ends.
func (r *LeaseRenewer) Run(ctx context.Context) {
	backoff := kube.Backoff{Base: time.Second, Max: time.Minute}
	var retryAt time.Time
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if now := r.Now(); !now.Before(retryAt) {
			if err := r.Step(ctx); err != nil {
				retryAt = now.Add(backoff.Next())
			} else {
				backoff.Reset()
				retryAt = time.Time{}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Step asks the local member and renews the Lease when its holder
// identity changed or the heartbeat is due. It returns an error only for
// a failed API call (for backoff).
func (r *LeaseRenewer) Step(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
	m, err := r.Local(lctx)
	cancel()
	if err != nil {
		// Not renewing is the report: the Lease goes stale and druid marks
		// the member NotReady after its thresholds.
		r.Tracker.Idle(fmt.Sprintf("not renewing: %v", err))
		return nil
	}
	name := r.LeaseName(m.IP)
	holder := m.HolderIdentity()
	now := r.Now()
	// Half a poll of slack: the poll that comes a hair short of the
	// heartbeat renews, rather than the one a whole poll after it.
	if holder == r.written && name == r.writtenName && now.Sub(r.writtenAt) < r.heartbeat()-pollInterval/2 {
		return nil
	}
	r.Tracker.Rename("Lease " + r.Namespace + "/" + name)
	r.Tracker.Idle("renewing as " + holder)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		err := fmt.Errorf("lease name %q is not a valid Kubernetes name (%s): etcd-druid names member leases <etcd>-<address>, which an IPv6 address cannot be part of", name, errs[0])
		r.Tracker.Failed(now, err)
		return err
	}
	result, err := r.renew(ctx, name, holder, now)
	if err != nil {
		r.Tracker.Failed(now, err)
		r.Log.Warn("member lease not renewed; retrying", "lease", name, "error", err)
		return err
	}
	if holder != r.written {
		r.Log.Info("member lease holder identity", "lease", name, "holderIdentity", holder)
	}
	r.written, r.writtenAt, r.writtenName = holder, now, name
	r.Tracker.Succeeded(now, result, "renewing as "+holder)
	return nil
}

// renew patches the Lease druid created with a JSON merge patch of the
// three fields (what backup-restore's Get-then-MergeFrom sends, without
// the Get: half the calls to an API server that runs on this very etcd),
// or creates it when it is missing and the Etcd is known: druid only
// re-creates a deleted Lease on its next spec reconcile.
func (r *LeaseRenewer) renew(ctx context.Context, name, holder string, now time.Time) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
	defer cancel()
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{TLSEnabledAnnotation: strconv.FormatBool(r.PeerTLS)}},
		"spec":     map[string]any{"holderIdentity": holder, "renewTime": metav1.NewMicroTime(now)},
	})
	if err != nil {
		return "", err
	}
	err = r.Leases.Patch(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, types.MergePatchType, patch, "", &coordinationv1.Lease{})
	switch {
	case apierrors.IsNotFound(err):
		return r.create(ctx, name, holder, now)
	case err != nil:
		return "", fmt.Errorf("patch lease %s/%s: %w", r.Namespace, name, err)
	}
	return kube.ResultWritten, nil
}

func (r *LeaseRenewer) create(ctx context.Context, name, holder string, now time.Time) (string, error) {
	e := r.resource()
	if e == nil {
		return "", fmt.Errorf("lease %s/%s not found, and the Etcd resource was not read yet to create it", r.Namespace, name)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: r.Namespace,
		// The labels and controller reference druid gives its member
		// leases: druid counts only leases it controls.
		Labels: map[string]string{
			druidv1alpha1.LabelComponentKey: "etcd-member-lease",
			druidv1alpha1.LabelAppNameKey:   name,
			druidv1alpha1.LabelManagedByKey: druidv1alpha1.LabelManagedByValue,
			druidv1alpha1.LabelPartOfKey:    e.Name,
		},
		OwnerReferences: []metav1.OwnerReference{druidv1alpha1.GetAsOwnerReference(e.ObjectMeta)},
	}}
	r.fill(lease, holder, now)
	if err := r.Leases.Create(ctx, r.Namespace, lease, ""); err != nil {
		return "", fmt.Errorf("create missing lease %s/%s: %w", r.Namespace, name, err)
	}
	r.Log.Info("member lease was missing; created it", "lease", name)
	return kube.ResultWritten, nil
}

func (r *LeaseRenewer) fill(l *coordinationv1.Lease, holder string, now time.Time) {
	l.Spec.HolderIdentity = &holder
	renew := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &renew
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[TLSEnabledAnnotation] = strconv.FormatBool(r.PeerTLS)
}
