// Package tasks is the agent's task side: it runs the ops tasks of
// daemon/ops (and the member restart) through the runner of daemon/task,
// starts them on their schedules, and serves them to `etcdlet task` and to
// etcd-druid through etcd-backup-restore's HTTP API.
package tasks

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/backupapi"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/httpserve"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// Service is the agent's task side: the runner (daemon/task) with the
// handlers of daemon/ops, the snapshot store, the schedules, the task API
// for `etcdlet task` and etcd-backup-restore's HTTP API on the node
// address.
type Service struct {
	set     Settings
	log     *slog.Logger
	runner  *task.Runner
	store   snapshot.Store // nil without backup.store
	pool    *etcdclient.Pool
	survey  ops.Surveyor // the listed members
	metrics *metrics.Metrics
	token   string // the task API's bearer token (TokenFile)
	apiTLS  *tls.Config
	api     *http.Server // once the node address is known
	// scheduleWaiting counts scheduled tasks that are due and wait for the
	// task slot: while one does, the API orders nothing (see every).
	scheduleWaiting atomic.Int32
}

// Settings are the parts of the configuration the task side reads.
type Settings struct {
	Cluster     string // cluster.name: the task lock's and the schedules' keys
	StateDir    string // agent.stateDir: task records and the API's token
	CallTimeout time.Duration
	Backup      config.Backup
	Tasks       config.Tasks
}

// SettingsFrom narrows a loaded configuration to the task side's settings.
func SettingsFrom(cfg *config.Config) Settings {
	return Settings{Cluster: cfg.Cluster.Name, StateDir: cfg.Agent.StateDir, CallTimeout: cfg.Agent.CallTimeout,
		Backup: cfg.Backup, Tasks: cfg.Tasks}
}

// Options are what the task side works with.
type Options struct {
	Settings Settings
	Log      *slog.Logger
	Pool     *etcdclient.Pool
	Metrics  *metrics.Metrics
	Events   kube.Recorder
	// Endpoints are the client URLs of the members of the list in force:
	// the tasks' etcd endpoints.
	Endpoints func() []string
	// Node is this host's name, which the task records carry.
	Node string
	// OnSnapshot, when set, is told of every snapshot task that
	// succeeded: full or delta, the last revision stored (0 for a delta
	// with nothing to store) and the snapshot's time (a full one's
	// creation, else the task's end).
	OnSnapshot func(full bool, lastRevision int64, at time.Time)
}

// New builds the task side: the state dir and the task API's token (made
// on the first start), the snapshot store, the handlers, and the runner
// with the tasks a previous run left.
func New(opts Options) (*Service, error) {
	set, m, events := opts.Settings, opts.Metrics, opts.Events
	log := opts.Log.With("component", "tasks")
	if err := os.MkdirAll(set.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	token, err := ensureToken(set.StateDir)
	if err != nil {
		return nil, err
	}
	o := &Service{set: set, log: log, pool: opts.Pool, metrics: m, token: token,
		survey: ops.Surveyor{Etcd: opts.Pool, Endpoints: opts.Endpoints, CallTimeout: set.CallTimeout, Log: log}}
	// No call to the store here: the agent starts the local member
	// whether or not object storage answers.
	store, err := OpenSnapshotStore(context.Background(), set.Backup.Store, false)
	if err != nil {
		return nil, err
	}
	o.store = store
	if a := set.Backup.API; a.Port != 0 && a.TLS.CertFile != "" {
		info := transport.TLSInfo{CertFile: a.TLS.CertFile, KeyFile: a.TLS.KeyFile, TrustedCAFile: a.TLS.CAFile, ClientCertAuth: a.TLS.CAFile != ""}
		if o.apiTLS, err = info.ServerConfig(); err != nil {
			return nil, fmt.Errorf("backup.api.tls: %w", err)
		}
	}
	compression, err := snapshot.ParseCompression(set.Backup.Compression)
	if err != nil {
		return nil, fmt.Errorf("backup.compression: %w", err)
	}
	reg := &task.Registry{}
	reg.Register(ops.NewSnapshotType(ops.SnapshotDeps{Survey: o.survey, Store: store, Compression: compression,
		TempDir: filepath.Join(set.StateDir, "tmp"), Log: log,
		Retention: snapshot.Retention{Policy: set.Backup.Retention.Policy, KeepFull: set.Backup.Retention.KeepFull, MaxAge: set.Backup.Retention.MaxAge},
	}, set.Tasks.SnapshotTimeout))
	reg.Register(ops.NewDefragType(o.survey, ops.DefragOptions{Threshold: set.Tasks.Defrag.Threshold, CatchUp: time.Minute}, set.Tasks.Defrag.Timeout))
	reg.Register(ops.NewCompactType(o.survey, set.Tasks.Compact.Retain, set.Tasks.Compact.Timeout))
	o.runner = &task.Runner{
		Registry: reg, Store: task.FileStore{State: state.Store{Dir: set.StateDir}}, Node: opts.Node, Log: log,
		RequeueInterval: set.Tasks.RequeueInterval,
		Locker: &etcdclient.TaskLocker{Key: etcdclient.TaskLockKey(set.Cluster), TTL: set.Tasks.LockTTL, CallTimeout: set.CallTimeout,
			Client: func() (*clientv3.Client, error) { return o.client() }},
		OnTransition: func(t task.Task, from task.Phase) { o.transitioned(t, events, opts.OnSnapshot) },
	}
	if err := o.runner.Load(); err != nil {
		return nil, err
	}
	return o, nil
}

// Register adds a task type that lives outside daemon/ops (the member
// restart), before Start.
func (o *Service) Register(t task.Type) { o.runner.Registry.Register(t) }

// Run submits a task on this node, as the task API does, and waits until
// it is completed or ctx ends; a task submitted while another is not
// completed comes back Rejected.
func (o *Service) Run(ctx context.Context, req task.Request) (task.Task, error) {
	t, ok, err := o.runner.Submit(req)
	if err != nil || !ok {
		return t, err
	}
	return o.runner.Wait(ctx, t.ID)
}

// client is a client over the listed members' endpoints, for the lock and
// the schedule records.
func (o *Service) client() (*clientv3.Client, error) {
	eps := o.survey.Endpoints()
	if len(eps) == 0 {
		return nil, errors.New("no member list in force yet")
	}
	return o.pool.NewMulti(eps)
}

// transitioned logs nothing (the runner does), and counts and reports.
func (o *Service) transitioned(t task.Task, events kube.Recorder, onSnapshot func(bool, int64, time.Time)) {
	o.metrics.TaskTransitions.WithLabelValues(t.Type, string(t.Phase)).Inc()
	if t.Phase.Completed() {
		o.metrics.TaskDuration.WithLabelValues(t.Type, string(t.Phase)).Observe(t.LastTransitionTime.Sub(t.CreatedAt).Seconds())
	}
	if t.Phase == task.Succeeded && t.Type == "snapshot" {
		var s snapshot.Snapshot
		stored := json.Unmarshal(t.Output, &s) == nil && s.Kind != ""
		if stored {
			o.metrics.LastSnapshot.WithLabelValues(s.Kind).Set(float64(s.CreatedOn.Unix()))
		}
		full := t.Params[ops.ParamKind] != "delta"
		switch {
		case onSnapshot == nil:
		case full && stored:
			onSnapshot(true, s.LastRevision, s.CreatedOn)
		case !full:
			// A delta with nothing to store is a delta taken all the
			// same (backup-restore renews its Lease on every period).
			onSnapshot(false, s.LastRevision, t.LastTransitionTime)
		}
	}
	kind, reason := corev1.EventTypeNormal, "Task"+string(t.Phase)
	if t.Phase == task.Failed || t.Phase == task.Rejected {
		kind = corev1.EventTypeWarning
	}
	events.Eventf(kind, reason, "task %s (%s, from %s) %s: %s", t.ID, t.Type, orSource(t.Source), t.Phase, t.LastOperation.Description)
}

func orSource(s string) string {
	if s == "" {
		return "cli"
	}
	return s
}

// OpenSnapshotStore opens the configured snapshot store; nil without one.
// With check, an S3 store is asked at once whether its bucket opens.
func OpenSnapshotStore(ctx context.Context, s config.BackupStore, check bool) (snapshot.Store, error) {
	switch s.Provider {
	case config.ProviderLocal:
		return snapshot.NewLocalStore(s.Directory, s.Prefix)
	case config.ProviderS3:
		idFile, secretFile := s.S3.S3Credentials()
		id, err := readCredential(idFile)
		if err != nil {
			return nil, err
		}
		secret, err := readCredential(secretFile)
		if err != nil {
			return nil, err
		}
		c := snapshot.S3Config{Bucket: s.S3.Bucket, Prefix: s.Prefix, Endpoint: s.S3.Endpoint,
			Region: s.S3.Region, AccessKeyID: id, SecretAccessKey: secret, ForcePathStyle: s.S3.ForcePathStyle, CAFile: s.S3.CAFile}
		if check {
			return snapshot.NewS3Store(ctx, c)
		}
		return snapshot.OpenS3Store(c)
	}
	return nil, nil
}

func readCredential(path string) (string, error) {
	v, err := readSecretLine(path)
	if err != nil {
		return "", fmt.Errorf("backup.store.s3.credentialsDir: %w", err)
	}
	return v, nil
}

// Start runs the runner and the schedules until ctx ends.
func (o *Service) Start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() {
		if err := o.runner.Run(ctx); err != nil {
			o.log.Error("task runner stopped", "error", err)
		}
	})
	o.schedule(ctx, wg)
}

// StartAPI serves etcd-backup-restore's API on the node address once it
// is known; a failure to listen is retried on the next pass.
func (o *Service) StartAPI(wg *sync.WaitGroup, node string) {
	if o.api != nil || node == "" || o.set.Backup.API.Port == 0 {
		return
	}
	addr := net.JoinHostPort(node, strconv.Itoa(o.set.Backup.API.Port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		o.log.Error("backup-restore API cannot listen; etcd-druid cannot order snapshots from this node", "address", addr, "error", err)
		return
	}
	a := o.set.Backup.API
	if nets := a.ClientNetworks(); len(nets) > 0 {
		l = httpserve.AllowOnly(l, nets, o.log)
	}
	backend := backupapi.Coalesce(o, a.MinFullInterval, time.Now)
	o.api = backupapi.Server(backupapi.Handler(backend, o.log, o.apiTLS != nil), o.apiTLS)
	srv := o.api
	o.log.Info("backup-restore API listening", "address", addr, "tls", o.apiTLS != nil,
		"clientCertificates", a.TLS.CAFile != "", "allowedClients", a.AllowedClients)
	httpserve.Serve(wg, o.log, "backup-restore API", srv, l)
}

// Shutdown closes etcd-backup-restore's API.
func (o *Service) Shutdown(ctx context.Context) {
	if o.api != nil {
		_ = o.api.Shutdown(ctx)
	}
}

// TakeSnapshot implements backupapi.Backend: a snapshot task, waited for.
// It orders nothing while a scheduled task waits for the task slot, so
// that no rate of API requests starves the schedule; a busy slot is
// BusyError (503 with Retry-After), not a failure.
func (o *Service) TakeSnapshot(ctx context.Context, kind string, final bool) (json.RawMessage, error) {
	retry := o.set.Tasks.RequeueInterval
	if o.scheduleWaiting.Load() > 0 {
		return nil, &backupapi.BusyError{Reason: "a scheduled task waits for the task slot; it goes first", RetryAfter: retry}
	}
	params := map[string]string{ops.ParamKind: kind}
	if final {
		params[ops.ParamFinal] = "true"
	}
	if active, busy := o.activeTask(); busy {
		return nil, &backupapi.BusyError{Reason: "task " + active.String() + " holds the task slot", RetryAfter: retry}
	}
	t, ok, err := o.runner.Submit(task.Request{Type: "snapshot", Params: params, Source: "backup-restore API"})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &backupapi.BusyError{Reason: fmt.Sprintf("task %s rejected: %s", t.ID, t.LastOperation.Description), RetryAfter: retry}
	}
	t, err = o.runner.Wait(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.Phase == task.Rejected && slices.ContainsFunc(t.LastErrors, func(e task.Error) bool { return e.Code == task.CodeDuplicateTask }) {
		// Another node's task holds the cluster's task lock.
		return nil, &backupapi.BusyError{Reason: fmt.Sprintf("task %s rejected: %s", t.ID, t.LastOperation.Description), RetryAfter: retry}
	}
	if t.Phase != task.Succeeded {
		return nil, fmt.Errorf("task %s %s: %s", t.ID, t.Phase, t.LastOperation.Description)
	}
	return t.Output, nil
}

// Latest implements backupapi.Backend.
func (o *Service) Latest(ctx context.Context) (*snapshot.Snapshot, []snapshot.Snapshot, error) {
	if o.store == nil {
		return nil, nil, errors.New("no snapshot store is configured (backup.store)")
	}
	return snapshot.Latest(ctx, o.store)
}

// Healthy implements backupapi.Backend: the listed members answer.
func (o *Service) Healthy(ctx context.Context) bool {
	_, err := o.survey.Survey(ctx)
	return err == nil
}

var _ backupapi.Backend = (*Service)(nil)
