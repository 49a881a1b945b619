package ops

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// A conditional snapshot (the schedules' ParamIfOlderThan) takes none when
// the store's newest of its kind is younger, and returns that one; when it
// is older, or without the condition, the task goes on to take one. The
// check runs in Execute, under the cluster-wide task lock, so agents whose
// schedules fire together take one snapshot between them.
func TestAConditionalSnapshotTakesNoneWhenTheStoreHasAYoungerOne(t *testing.T) {
	store, err := snapshot.NewLocalStore(t.TempDir(), "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	full := snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 5, CreatedOn: now.Add(-30 * time.Second), CompressionSuffix: ".gz"}
	delta := snapshot.Snapshot{Kind: snapshot.KindDelta, StartRevision: 6, LastRevision: 9, CreatedOn: now.Add(-5 * time.Minute), CompressionSuffix: ".gz"}
	for _, s := range []snapshot.Snapshot{full, delta} {
		if err := store.Put(context.Background(), s, bytes.NewReader([]byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	noCluster := Surveyor{Endpoints: func() []string { return nil }, CallTimeout: time.Second}
	typ := NewSnapshotType(SnapshotDeps{Survey: noCluster, Store: store, TempDir: t.TempDir(), Log: slog.New(slog.DiscardHandler)}, time.Minute)
	for _, tc := range []struct {
		name   string
		params map[string]string
		// skips: returns the stored snapshot named, else goes on (here: to
		// a cluster that is not there).
		skips string
	}{
		{"a full snapshot 30s old, the condition 1m", map[string]string{ParamKind: "full", ParamIfOlderThan: "1m"}, full.GenerateName()},
		{"a full snapshot 30s old, the condition 10s", map[string]string{ParamKind: "full", ParamIfOlderThan: "10s"}, ""},
		{"no condition", map[string]string{ParamKind: "full"}, ""},
		{"a delta: the newest object is the delta, 5m old", map[string]string{ParamKind: "delta", ParamIfOlderThan: "10m"}, delta.GenerateName()},
		{"a delta 5m old, the condition 1m", map[string]string{ParamKind: "delta", ParamIfOlderThan: "1m"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := typ.New(task.Task{ID: "t1", Type: "snapshot", Params: tc.params}, task.Env{Checkpoint: func(any) error { return nil }, Report: func(string) {}})
			if err != nil {
				t.Fatal(err)
			}
			res := h.Execute(context.Background())
			got, _ := res.Output.(*snapshot.Snapshot)
			switch {
			case tc.skips != "" && (got == nil || got.SnapName != tc.skips || res.Error != nil):
				t.Errorf("want %s returned and none taken; got %+v (%s)", tc.skips, res, res.Description)
			case tc.skips == "" && (!res.Requeue || res.Code != CodeNoQuorum):
				t.Errorf("want the task to go on to the cluster (no quorum here, requeued); got %+v", res)
			}
			if tc.skips != "" && !strings.Contains(res.Description, "none taken") {
				t.Errorf("description %q does not say none was taken", res.Description)
			}
		})
	}
	if _, err := typ.New(task.Task{ID: "t2", Type: "snapshot", Params: map[string]string{ParamIfOlderThan: "soon"}}, task.Env{}); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("parameter %s=%q", ParamIfOlderThan, "soon")) {
		t.Errorf("a bad condition: %v, want an error naming it", err)
	}
}
