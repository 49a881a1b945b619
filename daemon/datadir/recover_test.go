package datadir

import (
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// writeLog writes a write-ahead log of entries 1..last in term 2 that
// records commit as its commit index, as a follower that had not heard of
// the last commits yet leaves it.
func writeLog(t *testing.T, dataDir string, last, commit uint64) {
	t.Helper()
	w, err := wal.Create(zap.NewNop(), filepath.Join(dataDir, "member", "wal"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ents []*raftpb.Entry
	for i := uint64(1); i <= last; i++ {
		ents = append(ents, &raftpb.Entry{Term: new(uint64(2)), Index: new(i), Data: []byte("put")})
	}
	if err := w.Save(&raftpb.HardState{Term: new(uint64(2)), Vote: new(uint64(7)), Commit: new(commit)}, ents); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func readLogState(t *testing.T, dataDir string) (*raftpb.HardState, int) {
	t.Helper()
	w, err := wal.OpenForRead(zap.NewNop(), filepath.Join(dataDir, "member", "wal"), &walpb.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, st, ents, err := w.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return st, len(ents)
}

// The whole log is recorded as committed, term and vote kept, every
// entry kept; a log already committed to its end is left as it is.
func TestCommitLog(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 8, 5)
	raised, err := CommitLog(dir)
	if err != nil || raised != 3 {
		t.Fatalf("CommitLog = %d, %v; want the 3 entries above the commit index", raised, err)
	}
	st, n := readLogState(t, dir)
	if st.GetCommit() != 8 || st.GetTerm() != 2 || st.GetVote() != 7 || n != 8 {
		t.Errorf("after CommitLog: commit %d, term %d, vote %d, %d entries; want 8, 2, 7, 8", st.GetCommit(), st.GetTerm(), st.GetVote(), n)
	}
	if raised, err := CommitLog(dir); err != nil || raised != 0 {
		t.Errorf("CommitLog of a committed log = %d, %v; want 0", raised, err)
	}
	if _, err := CommitLog(t.TempDir()); err == nil {
		t.Error("CommitLog of a data dir without a log succeeded")
	}
}

// A copy holds the same files with their modes, and refuses to overwrite.
func TestCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "data")
	writeLog(t, src, 3, 3)
	if err := os.WriteFile(filepath.Join(src, "member", "db"), []byte("backend"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := Copy(src, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "member", "db")); err != nil || string(b) != "backend" {
		t.Errorf("copied file: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "member", "db")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("copied file mode: %v, %v", fi.Mode(), err)
	}
	if _, n := readLogState(t, dst); n != 3 {
		t.Errorf("the copied log holds %d entries, want 3", n)
	}
	if err := Copy(src, dst); err == nil {
		t.Error("a copy over an existing directory succeeded")
	}
}
