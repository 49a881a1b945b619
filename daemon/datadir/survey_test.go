package datadir

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// The survey of a real member's data dir: its log's end and commit, its
// backend's revision and applied index, read after it stopped, also when
// the log starts from a snapshot (etcd took several); while it runs the
// log is read all the same and the backend is in use.
func TestReadSurveyOfARealMember(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// Several snapshots: the log is read from the newest.
	e, client, stop := startMember(t, dir, 4, func(cfg *embed.Config) { cfg.SnapshotCount = 25 })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range 100 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := cli.Status(ctx, client.String())
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ReadSurvey(dir); err != nil || !s.BackendInUse || s.LastIndex < st.RaftIndex || s.Revision != 0 {
		t.Errorf("while the member runs: %+v, %v; want the log read to index %d, the backend in use", s, err, st.RaftIndex)
	}
	if v, err := ReadClusterVersion(dir); v != "" || err != nil {
		t.Errorf("while the member runs: cluster version %q, %v; want none (the backend is in use)", v, err)
	}
	id := Identity{MemberID: uint64(e.Server.MemberID()), ClusterID: uint64(e.Server.Cluster().ID())}
	cli.Close()
	stop()

	s, err := ReadSurvey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Identity != id {
		t.Errorf("identity %+v, want %+v", s.Identity, id)
	}
	// Stopping may append an entry or two (a leadership step-down does
	// not; a final sync may): the log ends at or past what Status said.
	if s.LastTerm != st.RaftTerm || s.LastIndex < st.RaftIndex || s.LastIndex > st.RaftIndex+2 {
		t.Errorf("log end term %d index %d; Status said term %d index %d", s.LastTerm, s.LastIndex, st.RaftTerm, st.RaftIndex)
	}
	if s.Commit != s.LastIndex {
		t.Errorf("commit %d, log end %d: a one-member cluster commits every entry", s.Commit, s.LastIndex)
	}
	// The cluster version the member recorded: its own minor, as etcd
	// decides it once every member runs.
	if v, err := ReadClusterVersion(dir); err != nil || v != fmt.Sprintf("%d.%d.0", semverOf(st.Version)[0], semverOf(st.Version)[1]) {
		t.Errorf("cluster version %q, %v; want the member's own minor (it runs %s)", v, err, st.Version)
	}
	if v, err := ReadClusterVersion(filepath.Join(t.TempDir(), "none")); v != "" || err != nil {
		t.Errorf("no data dir: cluster version %q, %v; want none", v, err)
	}
	if s.Revision != st.Header.Revision {
		t.Errorf("revision %d, want %d", s.Revision, st.Header.Revision)
	}
	if s.ConsistentIndex == 0 || s.ConsistentIndex > s.LastIndex {
		t.Errorf("consistent index %d, log end %d", s.ConsistentIndex, s.LastIndex)
	}
	if _, err := ReadSurvey(filepath.Join(t.TempDir(), "none")); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("no data dir: %v, want ErrNoIdentity", err)
	}
}

// semverOf is the major and minor of a version like "3.7.3".
func semverOf(v string) [2]int {
	var m [2]int
	_, _ = fmt.Sscanf(v, "%d.%d", &m[0], &m[1])
	return m
}
