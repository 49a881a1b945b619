package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// Snapshot task parameters.
const (
	// ParamKind is full or delta.
	ParamKind = "kind"
	// ParamIfOlderThan (a duration) makes the snapshot conditional, as the
	// schedules order it: when the store's newest snapshot of the kind
	// (snapshot.Newest) is younger, none is taken and the task returns
	// that one. It is checked under the cluster-wide task lock, so agents
	// whose schedules fire together take one snapshot between them.
	ParamIfOlderThan = "ifOlderThan"
	// ParamFinal marks a full snapshot final (taken before the cluster is
	// deleted or migrated): etcd-backup-restore's ?final=true.
	ParamFinal = "final"
)

// Codes of the snapshot handler's errors (druid's, where druid has one).
const (
	CodeBackupNotEnabled = "ERR_BACKUP_NOT_ENABLED"
	CodeCreateSnapshot   = "ERR_CREATE_SNAPSHOT"
	CodeNoFullSnapshot   = "ERR_NO_FULL_SNAPSHOT"
)

// SnapshotDeps is what the snapshot task needs.
type SnapshotDeps struct {
	Survey Surveyor
	// Store is nil when no snapshot store is configured.
	Store       snapshot.Store
	Compression snapshot.Compression
	// TempDir holds one directory per task for the snapshot being taken,
	// removed by Cleanup (also what a killed agent left).
	TempDir   string
	Retention snapshot.Retention
	Log       *slog.Logger
}

// NewSnapshotType takes a full or delta snapshot in etcd-backup-restore's
// format from the least-lagging follower and stores it; after a full one
// it prunes the store by the retention policy.
func NewSnapshotType(d SnapshotDeps, timeout time.Duration) task.Type {
	return task.Type{Name: "snapshot", Timeout: timeout,
		Summary: "a full or delta snapshot in etcd-backup-restore's format, to the configured store",
		New: func(t task.Task, env task.Env) (task.Handler, error) {
			h := &snapshotTask{deps: d, env: env, kind: snapshot.KindFull, dir: filepath.Join(d.TempDir, "task-"+t.ID)}
			for k, v := range t.Params {
				switch k {
				case ParamKind:
					switch v {
					case "full":
						h.kind = snapshot.KindFull
					case "delta":
						h.kind = snapshot.KindDelta
					default:
						return nil, fmt.Errorf("parameter %s=%q: want full or delta", k, v)
					}
				case ParamFinal:
					b, err := strconv.ParseBool(v)
					if err != nil {
						return nil, fmt.Errorf("parameter %s=%q: want true or false", k, v)
					}
					h.final = b
				case ParamIfOlderThan:
					d, err := time.ParseDuration(v)
					if err != nil || d <= 0 {
						return nil, fmt.Errorf("parameter %s=%q: want a positive duration (10m)", k, v)
					}
					h.ifOlderThan = d
				default:
					return nil, fmt.Errorf("unknown parameter %q (snapshot takes %s, %s, %s)", k, ParamKind, ParamFinal, ParamIfOlderThan)
				}
			}
			if h.final && h.kind == snapshot.KindDelta {
				return nil, fmt.Errorf("parameter %s: a delta snapshot cannot be final", ParamFinal)
			}
			return h, nil
		}}
}

type snapshotTask struct {
	deps        SnapshotDeps
	env         task.Env
	kind        string
	final       bool
	ifOlderThan time.Duration
	dir         string
}

// snapshotProgress is checkpointed before an upload starts: a restarted
// agent finds out whether the interrupted upload completed.
type snapshotProgress struct {
	Uploading *snapshot.Snapshot `json:"uploading,omitempty"`
}

// IsAgentKey tells etcdlet's own keys: they change whenever a task runs
// (the task lock), so a delta of nothing but them has no news, and a
// restored cluster drops them (they hold the old cluster's locks).
func IsAgentKey(key []byte) bool { return strings.HasPrefix(string(key), etcdclient.AgentKeyPrefix) }

func (s *snapshotTask) Admit(ctx context.Context) task.Result {
	if s.deps.Store == nil {
		return task.Result{Code: CodeBackupNotEnabled, Error: errors.New("no snapshot store is configured (backup.store)")}
	}
	if _, err := s.deps.Survey.AdmitSurvey(ctx); err != nil {
		return task.Result{Code: CodeNoQuorum, Error: err}
	}
	return task.Result{}
}

// Execute is idempotent: an attempt records the name of the snapshot it
// uploads before the upload starts, and the next attempt (after a crash)
// returns that snapshot when the store has it, else takes a new one.
func (s *snapshotTask) Execute(ctx context.Context) task.Result {
	if done, ok := s.uploadedEarlier(ctx); ok {
		return task.Result{Output: done, Description: "stored " + done.SnapName + " (the upload of an interrupted attempt had completed)"}
	}
	if recent, ok := s.recentEnough(ctx); ok {
		return task.Result{Output: recent, Description: fmt.Sprintf("none taken: the store has %s, %s old, younger than %s",
			recent.SnapName, time.Since(recent.CreatedOn).Round(time.Second), s.ifOlderThan)}
	}
	sv, err := s.deps.Survey.Survey(ctx)
	if err != nil {
		return task.Result{Requeue: true, Code: CodeNoQuorum, Error: err}
	}
	src, err := sv.SnapshotSource()
	if err != nil {
		return task.Result{Requeue: true, Code: CodeNoQuorum, Error: err}
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return task.Result{Code: CodeCreateSnapshot, Error: fmt.Errorf("create temp dir: %w", err)}
	}
	cli, err := s.deps.Survey.Etcd.NewMulti([]string{src.ClientURL})
	if err != nil {
		return task.Result{Requeue: true, Code: CodeCreateSnapshot, Error: err}
	}
	defer cli.Close()
	opts := snapshot.Options{Compression: s.deps.Compression, TempDir: s.dir, Final: s.final, Ignore: IsAgentKey,
		BeforeUpload: func(snap snapshot.Snapshot) error {
			p := snapshotProgress{Uploading: &snap}
			// Kept here too: a retried attempt of this same run looks
			// for the object as a restarted agent would.
			s.env.Progress, _ = json.Marshal(p)
			return s.env.Checkpoint(p)
		}}
	if s.kind == snapshot.KindDelta {
		return s.delta(ctx, src, cli, opts)
	}
	if s.final {
		// etcd-backup-restore answers a repeated final request with the
		// final snapshot it already has, when nothing was written since.
		if prev, ok := s.finalAlreadyTaken(ctx, src); ok {
			return task.Result{Output: prev, Description: "the final snapshot " + prev.SnapName + " is current"}
		}
	}
	s.env.Report(fmt.Sprintf("streaming a full snapshot from %s to %s", src, s.deps.Store))
	snap, err := snapshot.TakeFull(ctx, cli, s.deps.Store, opts)
	if err != nil {
		return task.Result{Code: CodeCreateSnapshot, Error: fmt.Errorf("full snapshot from %s: %w", src, err)}
	}
	s.prune(ctx)
	return task.Result{Output: &snap, Description: fmt.Sprintf("stored %s (revision %d, from %s)", snap.SnapName, snap.LastRevision, src)}
}

func (s *snapshotTask) delta(ctx context.Context, src Member, cli *clientv3.Client, opts snapshot.Options) task.Result {
	full, deltas, err := snapshot.Latest(ctx, s.deps.Store)
	if err != nil {
		return task.Result{Requeue: true, Code: CodeCreateSnapshot, Error: fmt.Errorf("list %s: %w", s.deps.Store, err)}
	}
	if full == nil {
		return task.Result{Code: CodeNoFullSnapshot, Error: fmt.Errorf("%s holds no full snapshot to build a delta on: take a full snapshot first", s.deps.Store)}
	}
	prev := *full
	if len(deltas) > 0 {
		prev = deltas[len(deltas)-1]
	}
	s.env.Report(fmt.Sprintf("collecting events after revision %d from %s", prev.LastRevision, src))
	snap, err := snapshot.TakeDelta(ctx, cli, s.deps.Store, prev, opts)
	switch {
	case errors.Is(err, snapshot.ErrCompacted):
		return task.Result{Code: CodeCreateSnapshot, Error: fmt.Errorf("delta after %s: %w", prev.SnapName, err)}
	case err != nil:
		return task.Result{Code: CodeCreateSnapshot, Error: fmt.Errorf("delta snapshot from %s: %w", src, err)}
	case snap == nil:
		return task.Result{Description: fmt.Sprintf("skipped: no events after revision %d", prev.LastRevision)}
	}
	return task.Result{Output: snap, Description: fmt.Sprintf("stored %s (revisions %d-%d, from %s)", snap.SnapName, snap.StartRevision, snap.LastRevision, src)}
}

// uploadedEarlier finds the snapshot an earlier attempt of this task was
// uploading, if the store has it.
func (s *snapshotTask) uploadedEarlier(ctx context.Context) (*snapshot.Snapshot, bool) {
	var p snapshotProgress
	if len(s.env.Progress) == 0 || json.Unmarshal(s.env.Progress, &p) != nil || p.Uploading == nil {
		return nil, false
	}
	list, err := s.deps.Store.List(ctx)
	if err != nil {
		return nil, false
	}
	for _, stored := range list {
		if stored.SnapName == p.Uploading.SnapName {
			return &stored, true
		}
	}
	return nil, false
}

// recentEnough is the store's newest snapshot of the task's kind when the
// task is conditional (ParamIfOlderThan) and that one is young enough. A
// store that cannot be listed takes the snapshot: the upload says why.
func (s *snapshotTask) recentEnough(ctx context.Context) (*snapshot.Snapshot, bool) {
	if s.ifOlderThan <= 0 {
		return nil, false
	}
	newest, ok, err := snapshot.Newest(ctx, s.deps.Store, s.kind)
	if err != nil || !ok || time.Since(newest.CreatedOn) >= s.ifOlderThan {
		return nil, false
	}
	return newest, true
}

func (s *snapshotTask) finalAlreadyTaken(ctx context.Context, src Member) (*snapshot.Snapshot, bool) {
	full, deltas, err := snapshot.Latest(ctx, s.deps.Store)
	if err != nil || full == nil || len(deltas) > 0 || !full.IsFinal {
		return nil, false
	}
	return full, full.LastRevision == src.Status.GetHeader().GetRevision()
}

// prune applies the retention policy; a failure is logged, the snapshot
// is stored either way.
func (s *snapshotTask) prune(ctx context.Context) {
	deleted, err := snapshot.Prune(ctx, s.deps.Store, s.deps.Retention, time.Now())
	if err != nil {
		s.deps.Log.Warn("pruning old snapshots failed; they stay until the next full snapshot", "store", s.deps.Store.String(), "error", err)
	}
	for _, d := range deleted {
		s.deps.Log.Info("snapshot pruned by the retention policy", "snapshot", d.SnapName)
	}
}

// Cleanup removes the task's temp dir, with whatever an interrupted
// attempt left there.
func (s *snapshotTask) Cleanup(context.Context) task.Result {
	if err := os.RemoveAll(s.dir); err != nil {
		return task.Result{Error: fmt.Errorf("remove %s: %w", s.dir, err)}
	}
	return task.Result{}
}
