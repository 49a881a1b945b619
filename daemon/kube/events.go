package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// Recorder records Events about the object etcdlet reports on (the Etcd
// resource, or kubernetes.events). It never blocks: Events are sent in the
// background, de-duplicated and rate-limited by client-go's correlator,
// and dropped when the API server stays away.
type Recorder interface {
	Eventf(eventtype, reason, messageFmt string, args ...any)
}

// Event reasons. They are part of etcdlet's interface: alerts and
// dashboards select on them (docs/kubernetes.md lists them).
const (
	ReasonMemberAdded            = "MemberAdded"
	ReasonMemberPromoted         = "MemberPromoted"
	ReasonMemberRemoved          = "MemberRemoved"
	ReasonLeaderMoved            = "LeaderMoved"
	ReasonAlarmDisarmed          = "AlarmDisarmed"
	ReasonMembershipChangeFailed = "MembershipChangeFailed"
	ReasonDataDirMovedAside      = "DataDirMovedAside"
	// ReasonMemberRetired: this node promised a recovering node not to
	// start its member of the lost cluster again (etcdlet recover).
	ReasonMemberRetired = "MemberRetired"
	// ReasonClusterRestored and ReasonClusterRecovered: this node's agent
	// started on a new cluster that etcdlet restore (from snapshots) or
	// etcdlet recover (from this node's data) made here.
	ReasonClusterRestored  = "ClusterRestored"
	ReasonClusterRecovered = "ClusterRecovered"
	// ReasonMemberForcedAlone: the survivor of a two-node cluster whose
	// peer pacemaker fenced runs its member alone (daemon/twonode).
	ReasonMemberForcedAlone  = "MemberForcedAlone"
	ReasonMemberListRefused  = "MemberListRefused"
	ReasonProtectionReverted = "ProtectionReverted"
	ReasonProtectionSwitched = "ProtectionSwitched"
	// The PacemakerCluster writer (package pacemakercluster).
	ReasonPacemakerStatusWriterTakeover = "PacemakerStatusWriterTakeover"
	ReasonPacemakerStatusRefused        = "PacemakerStatusRefused"
	// Ops tasks (package task): one reason per state a task enters.
	ReasonTaskPending    = "TaskPending"
	ReasonTaskInProgress = "TaskInProgress"
	ReasonTaskSucceeded  = "TaskSucceeded"
	ReasonTaskFailed     = "TaskFailed"
	ReasonTaskRejected   = "TaskRejected"
	// The snapshot Leases (package druid): why they are not renewed.
	ReasonSnapshotLeasesNotRenewed = "SnapshotLeasesNotRenewed"
)

// EventRecorder sends Events about one object through client-go's
// broadcaster. The object can be set late (the Etcd resource's UID is
// only known once it was read); Events before that go to the reference
// without a UID, which the API server accepts.
type EventRecorder struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	mu  sync.Mutex
	ref *corev1.ObjectReference
}

// eventCorrelation: at most one Event per 5 minutes per (source, object,
// reason) after a burst of 10, and similar ones aggregated, so that a list
// refused on every read or a flapping member cannot flood the API server
// (client-go's defaults are tuned for the kubelet's volume).
var eventCorrelation = record.CorrelatorOptions{BurstSize: 10, QPS: 1.0 / 300}

// NewEventRecorder starts sending Events about ref through c, as
// component "etcdlet" on host. Stop ends it.
func NewEventRecorder(c *Clients, ref corev1.ObjectReference, host string) *EventRecorder {
	b := record.NewBroadcasterWithCorrelatorOptions(eventCorrelation)
	b.StartRecordingToSink(eventSink{events: c.Events})
	return &EventRecorder{
		broadcaster: b,
		recorder:    b.NewRecorder(c.Scheme, corev1.EventSource{Component: "etcdlet", Host: host}),
		ref:         &ref,
	}
}

// SetUID completes the reference once the object was read.
func (r *EventRecorder) SetUID(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ref.UID != uid {
		ref := *r.ref
		ref.UID = uid
		r.ref = &ref
	}
}

// Eventf records an Event (corev1.EventTypeNormal or EventTypeWarning).
func (r *EventRecorder) Eventf(eventtype, reason, messageFmt string, args ...any) {
	r.mu.Lock()
	ref := r.ref
	r.mu.Unlock()
	r.recorder.Eventf(ref, eventtype, reason, messageFmt, args...)
}

// Stop stops sending; Events not sent yet are dropped.
func (r *EventRecorder) Stop() { r.broadcaster.Shutdown() }

// Reference returns the object Events are recorded on.
func (r *EventRecorder) Reference() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ref.Namespace == "" {
		return fmt.Sprintf("%s %s", r.ref.Kind, r.ref.Name)
	}
	return fmt.Sprintf("%s %s/%s", r.ref.Kind, r.ref.Namespace, r.ref.Name)
}

// eventSink is record.EventSink over the events Resource: what client-go's
// clientset-based sink does (create, update, strategic-merge patch of a
// correlated series), in the Event's own namespace. The broadcaster calls
// it from its own goroutine and bounds no call itself; eventCallTimeout
// does.
type eventSink struct{ events API }

// eventCallTimeout bounds one write of an Event: a broadcaster stuck on an
// API server that does not answer would hold every Event behind it.
const eventCallTimeout = 10 * time.Second

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventCallTimeout)
	defer cancel()
	out := e.DeepCopy()
	return out, s.events.Create(ctx, e.Namespace, out, "")
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventCallTimeout)
	defer cancel()
	out := e.DeepCopy()
	return out, s.events.Update(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Name}, out, "")
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventCallTimeout)
	defer cancel()
	out := &corev1.Event{}
	return out, s.events.Patch(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Name}, types.StrategicMergePatchType, data, "", out)
}
