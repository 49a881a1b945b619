// Package metrics defines etcdlet's Prometheus metrics on a registry of
// its own (served on agent.listen at /metrics), so that library defaults
// do not leak in beside them. Every series carries the label cluster
// (cluster.name): a host may run one agent per cluster
// (etcdlet@<name>.service), and their series must not mix.
package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	etcdversion "go.etcd.io/etcd/api/v3/version"
)

// Metrics are the agent's collectors.
type Metrics struct {
	Registry *prometheus.Registry
	// register adds collectors to Registry, labelled with the cluster.
	register prometheus.Registerer

	ReconcilePasses   prometheus.Counter
	ReconcileDuration prometheus.Histogram
	MembershipChanges *prometheus.CounterVec
	WriterLockBusy    prometheus.Counter
	ListReloads       *prometheus.CounterVec
	DesiredMembers    prometheus.Gauge
	Members           *prometheus.GaugeVec
	HealthyVoters     prometheus.Gauge
	ClusterReachable  prometheus.Gauge
	PlanWaiting       *prometheus.GaugeVec
	LocalDecision     *prometheus.GaugeVec
	DataDirsMoved     prometheus.Counter
	TwoNodeFailovers  prometheus.Counter
	// RecoverySteps counts the steps of a recovery after a lost quorum
	// that this node took, by step (the Recovery* labels).
	RecoverySteps *prometheus.CounterVec
	// ForeignAnswers counts the endpoints that answered for another
	// cluster in the last pass.
	ForeignAnswers prometheus.Gauge
	// BootstrapWaiting is 1 while this node would bootstrap but not every
	// listed node consents.
	BootstrapWaiting prometheus.Gauge
	// LearnersExpired counts learners this agent removed because they
	// were not promoted within agent.learnerTimeout.
	LearnersExpired prometheus.Counter
	// ListsDiffering counts the other agents whose posted member list
	// differs from this agent's, as last read.
	ListsDiffering prometheus.Gauge
	// LastSuccessfulPass is when (unix seconds) a reconcile pass last
	// succeeded: it observed the cluster with quorum, and carried out or
	// correctly deferred the local decision and the writer's step,
	// without an error (node.Pass says exactly what counts).
	LastSuccessfulPass prometheus.Gauge
	// EtcdCallErrors counts the failed attempts of membership calls, by
	// call (etcdclient.Op) and what the error was classified as
	// (etcdclient.Classify: done, retry, fatal).
	EtcdCallErrors *prometheus.CounterVec
	// Refusals counts refusals to act for safety (a bootstrap without
	// every node's consent, data of another cluster, ...), by reason
	// (localmember.Refusal), once as each begins.
	Refusals *prometheus.CounterVec
	// ProtectedFileChanges counts changes to managed files made by anyone
	// but etcdlet, by file and what was done (reverted, restored, allowed).
	ProtectedFileChanges *prometheus.CounterVec

	// ReportWrites counts attempts to write to Kubernetes, by target kind
	// (lease, pacemakercluster, etcd-resource) and result (kube.Result*).
	ReportWrites *prometheus.CounterVec
	// BuildInfo is 1, labelled with the versions (SetBuildInfo).
	BuildInfo *prometheus.GaugeVec

	// KubernetesRequests counts HTTP requests sent to the API server.
	KubernetesRequests prometheus.CounterFunc

	// TaskTransitions counts ops tasks entering a state, by type and state.
	TaskTransitions *prometheus.CounterVec
	// TaskDuration observes completed tasks from creation to completion,
	// by type and final state.
	TaskDuration *prometheus.HistogramVec
	// LastSnapshot is the creation time (unix seconds) of the newest
	// snapshot this agent stored, by kind (Full, Incr).
	LastSnapshot *prometheus.GaugeVec

	// CertificateExpiry is the NotAfter (unix seconds) of every
	// certificate file etcdlet's configuration names, by file and usage
	// (pki.Target.Usage), re-read periodically.
	CertificateExpiry *prometheus.GaugeVec
	// CertificateReadErrors counts failed reads of those files (missing,
	// unreadable, no PEM certificate), by file.
	CertificateReadErrors *prometheus.CounterVec

	PacemakerPolls        *prometheus.CounterVec
	PacemakerPollDuration prometheus.Histogram
	PacemakerKnown        prometheus.Gauge
	PacemakerCondition    *prometheus.GaugeVec
}

// Steps of etcdlet_recovery_steps_total.
const (
	RecoveryRestored  = "restored"
	RecoveryRecovered = "recovered"
	RecoveryRetired   = "retired"
	RecoveryLeft      = "left"
)

// New registers every collector, plus Go runtime and process collectors,
// each series labelled cluster=<cluster>.
func New(cluster string) *Metrics {
	registry := prometheus.NewRegistry()
	r := prometheus.WrapRegistererWith(prometheus.Labels{"cluster": cluster}, registry)
	m := &Metrics{
		Registry: registry,
		register: r,
		ReconcilePasses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdlet_reconcile_passes_total", Help: "Reconcile passes run."}),
		ReconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "etcdlet_reconcile_duration_seconds", Help: "Duration of reconcile passes.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		LastSuccessfulPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdlet_reconcile_last_success_timestamp_seconds",
			Help: "When (unix seconds) a reconcile pass last observed the cluster with quorum and carried out or correctly deferred its decisions without an error; 0 before the first."}),
		MembershipChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdlet_membership_changes_total", Help: "Membership calls issued by this agent, by action and outcome (done, retry, fatal)."},
			[]string{"action", "outcome"}),
		WriterLockBusy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdlet_writer_lock_busy_total", Help: "Passes that wanted to change membership while another agent held the writer lock."}),
		ListReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdlet_member_list_reloads_total", Help: "Reads of a changed member list, by result (accepted, rejected)."},
			[]string{"result"}),
		DesiredMembers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdlet_desired_members", Help: "Entries of the member list in force."}),
		Members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdlet_members", Help: "Cluster members by role (voter, learner), as last observed."},
			[]string{"role"}),
		HealthyVoters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdlet_healthy_voters", Help: "Voters that answered Status healthy in the last pass."}),
		ClusterReachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdlet_cluster_reachable", Help: "1 when a linearizable member list was read in the last pass."}),
		PlanWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdlet_plan_waiting", Help: "Needed membership changes refused for now, by reason."},
			[]string{"reason"}),
		LocalDecision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdlet_local_member_decision", Help: "1 for the current decision about the local member (keep, join, wait, ...)."},
			[]string{"decision"}),
		ListsDiffering: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdlet_lists_differing", Help: "Other agents whose posted member list differs from this agent's, as last read; changes about the addresses they disagree on wait."}),
		DataDirsMoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdlet_data_dirs_moved_aside_total", Help: "Data dirs moved aside (never deleted)."}),
		TwoNodeFailovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdlet_two_node_failovers_total", Help: "Times this node's member was made the only member of its two-node cluster after pacemaker fenced the peer."}),
		RecoverySteps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdlet_recovery_steps_total",
			Help: "Steps of a recovery after a lost quorum that this node took: restored and recovered (this node's agent started on a cluster etcdlet restore or etcdlet recover made here), retired (it promised a recovering node not to start its old member), left (it left the old cluster to join the recovered one)."},
			[]string{"step"}),
		ForeignAnswers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdlet_foreign_cluster_answers", Help: "Endpoints that answered for another etcd cluster in the last pass; nothing is done to or for them."}),
		BootstrapWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdlet_bootstrap_waiting_for_consent", Help: "1 while this node would bootstrap a new cluster but not every listed node confirms it is fresh."}),
		LearnersExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdlet_learners_expired_total", Help: "Learners removed by this agent because they were not promoted within agent.learnerTimeout."}),
		EtcdCallErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdlet_etcd_call_errors_total",
			Help: "Failed attempts of membership calls to etcd, by op (add-learner, promote, remove, move-leader, disarm-alarm) and outcome the error is classified as (done: already applied, retry, fatal)."},
			[]string{"op", "outcome"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdlet_refusals_total",
			Help: "Refusals to act for safety (bootstrap, another cluster's data or answers, an orphaning list, ...), by reason, counted once as each begins."},
			[]string{"reason"}),
	}
	m.PacemakerPolls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdlet_pacemaker_polls_total", Help: "Pacemaker polls, by result (known, unknown)."}, []string{"result"})
	m.PacemakerPollDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "etcdlet_pacemaker_poll_duration_seconds", Help: "Duration of pacemaker polls (crm_mon, CIB, corosync).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)})
	m.PacemakerKnown = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "etcdlet_pacemaker_known", Help: "1 when the last poll gave a usable pacemaker state."})
	m.PacemakerCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdlet_pacemaker_condition",
		Help: "PacemakerCluster conditions of the last poll: 1 True, 0 False, -1 Unknown. node and resource (Kubelet, Etcd or a fencing agent) are empty for cluster conditions."},
		[]string{"node", "resource", "type"})
	m.ProtectedFileChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdlet_protected_file_changes_total",
		Help: "Edits and deletions of files etcdlet renders, made by someone else, by file and action (reverted, restored, allowed)."},
		[]string{"file", "action"})
	m.ReportWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdlet_report_writes_total",
		Help: "Attempts to report to Kubernetes, by target (lease, pacemakercluster, etcd-resource) and result (written, unchanged, standby, error)."},
		[]string{"target", "result"})
	m.TaskTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdlet_task_transitions_total",
		Help: "Ops tasks entering a state, by type (snapshot, defrag, compact) and state (Pending, InProgress, Succeeded, Failed, Rejected)."},
		[]string{"type", "state"})
	m.TaskDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "etcdlet_task_duration_seconds", Help: "Ops tasks from creation to completion, by type and final state.",
		Buckets: prometheus.ExponentialBuckets(0.1, 3, 10)}, []string{"type", "state"})
	m.LastSnapshot = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdlet_snapshot_last_success_timestamp_seconds",
		Help: "Creation time of the newest snapshot this agent stored, by kind (Full, Incr)."}, []string{"kind"})
	m.CertificateExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdlet_certificate_expiry_timestamp_seconds",
		Help: "NotAfter (unix seconds) of each certificate file etcdlet's configuration names, by file and usage; re-read every minute."},
		[]string{"file", "usage"})
	m.CertificateReadErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdlet_certificate_read_errors_total",
		Help: "Failed reads of the certificate files etcdlet's configuration names (missing, unreadable, no PEM certificate), by file."},
		[]string{"file"})
	r.MustRegister(m.CertificateExpiry, m.CertificateReadErrors)
	r.MustRegister(m.ProtectedFileChanges, m.ReportWrites, m.TaskTransitions, m.TaskDuration, m.LastSnapshot)
	r.MustRegister(m.PacemakerPolls, m.PacemakerPollDuration, m.PacemakerKnown, m.PacemakerCondition)
	r.MustRegister(m.ReconcilePasses, m.ReconcileDuration, m.MembershipChanges, m.WriterLockBusy, m.ListReloads,
		m.DesiredMembers, m.Members, m.HealthyVoters, m.ClusterReachable, m.PlanWaiting, m.LocalDecision, m.DataDirsMoved, m.TwoNodeFailovers,
		m.RecoverySteps, m.ForeignAnswers, m.BootstrapWaiting, m.LearnersExpired, m.ListsDiffering, m.LastSuccessfulPass, m.EtcdCallErrors, m.Refusals,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every step at 0 from the start, so that increase() sees the first.
	for _, step := range []string{RecoveryRestored, RecoveryRecovered, RecoveryRetired, RecoveryLeft} {
		m.RecoverySteps.WithLabelValues(step)
	}
	return m
}

// SetBuildInfo exports etcdlet_build_info: 1, labelled with etcdlet's
// version, the etcd version it embeds and the Go version it was built
// with, so that a rolling upgrade can be followed across the agents.
func (m *Metrics) SetBuildInfo(version string) {
	m.BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdlet_build_info", Help: "1, labelled with etcdlet's version, the etcd version it embeds and the Go version it was built with."},
		[]string{"version", "etcd_version", "go_version"})
	m.BuildInfo.WithLabelValues(version, etcdversion.Version, runtime.Version()).Set(1)
	m.register.MustRegister(m.BuildInfo)
}

// CountKubernetesRequests exports calls() as etcdlet_kubernetes_requests_total.
func (m *Metrics) CountKubernetesRequests(calls func() int64) {
	m.KubernetesRequests = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "etcdlet_kubernetes_requests_total", Help: "HTTP requests sent to the Kubernetes API server (reporting, the Etcd resource's watch, Events)."},
		func() float64 { return float64(calls()) })
	m.register.MustRegister(m.KubernetesRequests)
}
