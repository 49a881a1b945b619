// Package report is the agent's Kubernetes side (package kube and its
// targets): the member Lease, the Etcd resource, the PacemakerCluster
// status and Events, each run in its own goroutine, and the state of
// every target kept on disk for `etcdlet status`.
package report

import (
	"cmp"
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/kube/druid"
	"github.com/etcdlet/etcdlet/daemon/kube/pacemakercluster"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// File is where, under agent.stateDir, the agent keeps the state of its
// Kubernetes reporting for `etcdlet status`.
const File = "reporting.json"

// Reporting is the agent's Kubernetes side. Every target runs in its own
// goroutine; nothing here is on the reconcile loop's path, which only
// hands over facts (OfferPacemaker, Events).
type Reporting struct {
	set     Settings
	log     *slog.Logger
	host    string
	clients *kube.Clients
	// events is never nil: a recorder that drops everything without
	// Kubernetes.
	events   kube.Recorder
	recorder *kube.EventRecorder

	trackers   []*kube.Tracker
	watcher    *druid.EtcdWatcher
	renewer    *druid.LeaseRenewer
	snapLeases *druid.SnapshotLeases
	keeper     *druid.AddressKeeper
	protection *druid.ProtectionSwitch
	pacemaker  *pacemakercluster.Writer
	dirty      chan struct{}
}

type nopRecorder struct{}

func (nopRecorder) Eventf(string, string, string, ...any) {}

// Settings are the parts of the configuration the reporting reads.
type Settings struct {
	Kubernetes config.Kubernetes
	// PeerTLS: the members' peer URLs are https (the Leases say so).
	PeerTLS bool
	// KeepsList: the list comes from the Etcd resource, whose list the
	// reporting keeps (members.source etcd-resource).
	KeepsList bool
	// PacemakerAPIVersion is the PacemakerCluster version written.
	PacemakerAPIVersion string
	// Protection is protection.enabled: the Etcd's annotation may switch
	// it.
	Protection bool
	StateDir   string // agent.stateDir: the reporting state for status
}

// SettingsFrom narrows a loaded configuration to the reporting's settings.
func SettingsFrom(cfg *config.Config) Settings {
	return Settings{Kubernetes: cfg.Kubernetes, PeerTLS: cfg.Etcd.PeerScheme() == "https",
		KeepsList: cfg.Members.Source == config.SourceEtcdResource, PacemakerAPIVersion: cfg.Pacemaker.APIVersion,
		Protection: cfg.Protection.On(), StateDir: cfg.Agent.StateDir}
}

// New builds the targets the kubernetes section asks for; without it,
// only a recorder that drops Events. listRules returns the list rules in
// force (they change with a reload).
func New(set Settings, listRules func() config.ListRules, log *slog.Logger, m *metrics.Metrics, host string) (*Reporting, error) {
	r := &Reporting{set: set, log: log.With("component", "kubernetes"), host: host, events: nopRecorder{}, dirty: make(chan struct{}, 1)}
	k := set.Kubernetes
	if !k.Enabled() {
		return r, nil
	}
	// client-go logs into the agent's log, warnings only (its retries of a
	// missing API server would otherwise flood it).
	kube.SetLogger(slog.New(levelFloor{r.log.Handler(), slog.LevelWarn}))
	c, err := kube.NewClients(k)
	if err != nil {
		return nil, err
	}
	r.clients = c
	m.CountKubernetesRequests(c.Calls)
	r.recorder = kube.NewEventRecorder(c, eventObject(k), host)
	r.events = r.recorder
	track := func(kind, target string) *kube.Tracker {
		t := kube.NewTracker(target, func(_, result string) { m.ReportWrites.WithLabelValues(kind, result).Inc() }, r.changed)
		r.trackers = append(r.trackers, t)
		return t
	}
	if e := k.Etcd; e != nil {
		key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
		r.renewer = &druid.LeaseRenewer{Leases: c.Leases, Namespace: e.Namespace, EtcdName: e.Name, CallTimeout: k.CallTimeout,
			PeerTLS: set.PeerTLS, Heartbeat: e.HeartbeatInterval,
			Tracker: track("lease", "Lease "+e.Namespace+"/"+e.Name+"-<ip>"), Log: r.log, Now: time.Now}
		if set.KeepsList {
			r.keeper = &druid.AddressKeeper{Rules: listRules, Log: r.log, Recorder: r.events}
		}
		r.snapLeases = druid.NewSnapshotLeases()
		r.snapLeases.Leases, r.snapLeases.Namespace, r.snapLeases.CallTimeout = c.Leases, e.Namespace, k.CallTimeout
		r.snapLeases.Tracker = track("snapshot-lease", "Lease "+e.Namespace+"/"+e.Name+"-full-snap, -delta-snap (snapshots)")
		r.snapLeases.Recorder, r.snapLeases.Log = r.events, r.log
		r.watcher = &druid.EtcdWatcher{Etcds: c.Etcds, Key: key, CallTimeout: k.CallTimeout,
			Tracker: track("etcd-resource", "Etcd "+key.String()+" (read)"), Log: r.log, Now: time.Now, OnEtcd: r.onEtcd}
	}
	if p := k.PacemakerCluster; p != nil {
		pcs, err := c.PacemakerClusters(set.PacemakerAPIVersion)
		if err != nil {
			return nil, err
		}
		r.pacemaker, err = pacemakercluster.New(pacemakercluster.Options{
			Client: pcs, Version: set.PacemakerAPIVersion, NodeName: cmp.Or(p.NodeName, host),
			RefreshInterval: p.RefreshInterval, StaleAfter: p.StaleAfter, CallTimeout: k.CallTimeout,
			Tracker:  track("pacemakercluster", "PacemakerCluster "+set.PacemakerAPIVersion+" cluster (status)"),
			Recorder: r.events, Log: r.log, Now: time.Now,
		})
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// eventObject is what Events are about: the Etcd resource, else the
// configured object, else the PacemakerCluster singleton.
func eventObject(k config.Kubernetes) corev1.ObjectReference {
	switch {
	case k.Etcd != nil:
		return corev1.ObjectReference{APIVersion: druidv1alpha1.SchemeGroupVersion.String(), Kind: "Etcd", Namespace: k.Etcd.Namespace, Name: k.Etcd.Name}
	case k.Events != nil:
		return corev1.ObjectReference{APIVersion: k.Events.APIVersion, Kind: k.Events.Kind, Namespace: k.Events.Namespace, Name: k.Events.Name}
	default:
		return corev1.ObjectReference{APIVersion: "etcd.openshift.io/v1", Kind: "PacemakerCluster", Name: "cluster"}
	}
}

// Events records Events about the cluster (drops them without
// Kubernetes).
func (r *Reporting) Events() kube.Recorder { return r.events }

// ListVerdict says whether the member list is kept from the Etcd
// resource (members.source etcd-resource), and why the latest list there
// was refused.
func (r *Reporting) ListVerdict() (keeps bool, err error) {
	if r.keeper == nil {
		return false, nil
	}
	return true, r.keeper.Err()
}

// SetGuard lets the Etcd's protection annotation switch the guard of the
// files etcdlet renders (static-pod runtime only).
func (r *Reporting) SetGuard(g *protect.Guard) {
	if g != nil && r.watcher != nil {
		r.protection = &druid.ProtectionSwitch{Guard: g, Configured: r.set.Protection, Log: r.log, Recorder: r.events}
	}
}

func (r *Reporting) onEtcd(e *druidv1alpha1.Etcd) {
	if r.recorder != nil {
		r.recorder.SetUID(e.UID)
	}
	r.renewer.OnEtcd(e)
	r.snapLeases.OnEtcd(e)
	if r.keeper != nil {
		r.keeper.OnEtcd(e)
		r.changed() // a refused list is part of the reporting state
	}
	if r.protection != nil {
		r.protection.OnEtcd(e)
	}
}

// Start runs every target until ctx ends; local is what the local
// member says about itself, for its Lease.
func (r *Reporting) Start(ctx context.Context, wg *sync.WaitGroup, local func(context.Context) (druid.LocalMember, error)) {
	if r.clients == nil {
		return
	}
	if r.watcher != nil {
		wg.Go(func() { r.watcher.Run(ctx) })
		r.renewer.Local = local
		wg.Go(func() { r.renewer.Run(ctx) })
		wg.Go(func() { r.snapLeases.Run(ctx) })
	}
	if r.pacemaker != nil {
		wg.Go(func() { r.pacemaker.Run(ctx) })
	}
	wg.Go(func() { r.persist(ctx) })
}

// SnapshotTaken tells druid, through the Etcd's snapshot Leases, of a
// snapshot this node took (nothing without kubernetes.etcd).
func (r *Reporting) SnapshotTaken(t druid.Taken) {
	if r.snapLeases != nil {
		r.snapLeases.Offer(t)
	}
}

// Stop ends the event recorder (after the targets stopped).
func (r *Reporting) Stop() {
	if r.recorder != nil {
		r.recorder.Stop()
	}
}

// States returns every target's state.
func (r *Reporting) States() []kube.TargetState {
	states := make([]kube.TargetState, 0, len(r.trackers)+1)
	for _, t := range r.trackers {
		states = append(states, t.State())
	}
	if r.keeper != nil {
		if err := r.keeper.Err(); err != nil {
			states = append(states, kube.TargetState{Target: "member list from the Etcd resource", LastError: err.Error()})
		}
	}
	return states
}

func (r *Reporting) changed() {
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

// persistEvery bounds how often the reporting state is written to disk:
// a Lease renewal every few seconds must not mean a disk write each.
const persistEvery = 5 * time.Second

// persist keeps File current for `etcdlet status`, at most every
// persistEvery, and once more when the agent stops.
func (r *Reporting) persist(ctx context.Context) {
	store := state.Store{Dir: r.set.StateDir}
	write := func() {
		if err := store.WriteJSON(File, r.States()); err != nil {
			r.log.Warn("reporting state not saved for etcdlet status", "file", File, "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			write()
			return
		case <-r.dirty:
			write()
		}
		select {
		case <-ctx.Done():
			write()
			return
		case <-time.After(persistEvery):
		}
	}
}

// Read reads the reporting state the agent saved in stateDir (nil, nil
// when it reports nothing, or never ran).
func Read(stateDir string) ([]kube.TargetState, error) {
	var states []kube.TargetState
	_, err := state.Store{Dir: stateDir}.ReadJSON(File, &states)
	return states, err
}

// MembershipEvent turns a membership call into an Event: what changed, or
// why the call failed.
func (r *Reporting) MembershipEvent(a membership.Action, res etcdclient.Result) {
	if res.Outcome != etcdclient.Done {
		if res.Outcome == etcdclient.Fatal {
			r.events.Eventf(corev1.EventTypeWarning, kube.ReasonMembershipChangeFailed, "%s: %v", a, res.Err)
		}
		return
	}
	reason := map[membership.ActionKind]string{
		membership.ActionAddLearner: kube.ReasonMemberAdded,
		membership.ActionPromote:    kube.ReasonMemberPromoted,
		membership.ActionRemove:     kube.ReasonMemberRemoved,
		membership.ActionMoveLeader: kube.ReasonLeaderMoved,
		membership.ActionDisarm:     kube.ReasonAlarmDisarmed,
	}[a.Kind]
	if reason == "" {
		reason = "MembershipChanged"
	}
	r.events.Eventf(corev1.EventTypeNormal, reason, "%s", a)
}

// OfferPacemaker hands the latest PacemakerCluster status to the writer
// (nil while pacemaker's state is unknown: nothing is written then), with
// whether this host is pacemaker's DC: the DC's agent is the one writer
// (package pacemakercluster).
func (r *Reporting) OfferPacemaker(snap pacemaker.Snapshot, built status.Object, self netip.Addr) {
	if r.pacemaker == nil {
		return
	}
	in := pacemakercluster.Input{Built: built}
	if c := snap.Cluster; c != nil {
		local := r.set.Kubernetes.PacemakerCluster.NodeName
		if local == "" {
			local = pacemakercluster.LocalNode(c, self, r.host)
		}
		in.IsDC = pacemakercluster.IsDC(c, local)
	}
	r.pacemaker.Offer(in)
}

// levelFloor drops records below a level.
type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}
