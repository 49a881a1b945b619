package datadir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// Copy copies the data dir src to dst, which must not exist: directories
// 0700, files with their modes, each file synced. A recovery works on a
// copy so that the member's own data stays as it was until the recovered
// data is complete.
func Copy(src, dst string) error {
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("copy %s to %s: the destination exists (%v)", src, dst, err)
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case d.Type().IsRegular():
			return copyFile(path, to)
		}
		return fmt.Errorf("copy %s: neither a file nor a directory (%s)", path, d.Type())
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return nil
}

// CommitLog records the whole write-ahead log of the stopped member at
// dataDir as committed, and returns how many entries were above the
// commit index it recorded.
//
// etcd's force-new-cluster keeps the entries up to the commit index the
// log recorded (or the backend applied) and drops the rest. A follower
// learns that an entry is committed only with the leader's next message:
// the last entries of a survivor's log may have been committed by the
// leader, and acknowledged to their clients, without the survivor
// recording it. Raft keeps them when it elects the survivor leader (the
// most advanced log wins an election, and a new leader commits its whole
// log); recovering from the most advanced survivor keeps them too. An
// entry that never was committed had no acknowledged client: its write
// ended in a timeout, whose outcome etcd never promised either way.
func CommitLog(dataDir string) (uint64, error) {
	dir := filepath.Join(dataDir, "member", "wal")
	snaps, err := wal.ValidSnapshotEntries(zap.NewNop(), dir)
	if err != nil {
		return 0, fmt.Errorf("read the write-ahead log's snapshots in %s: %w", dir, err)
	}
	from := &walpb.Snapshot{}
	if len(snaps) > 0 {
		from = snaps[len(snaps)-1]
	}
	w, err := wal.Open(zap.NewNop(), dir, from)
	if err != nil {
		return 0, fmt.Errorf("open the write-ahead log in %s: %w", dir, err)
	}
	_, state, ents, err := w.ReadAll()
	if err != nil {
		_ = w.Close()
		return 0, fmt.Errorf("read the write-ahead log in %s: %w", dir, err)
	}
	var raised uint64
	if n := len(ents); n > 0 && ents[n-1].GetIndex() > state.GetCommit() {
		last := ents[n-1].GetIndex()
		raised = last - state.GetCommit()
		err = w.Save(&raftpb.HardState{Term: state.Term, Vote: state.Vote, Commit: &last}, nil)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("record the write-ahead log in %s as committed: %w", dir, err)
	}
	return raised, nil
}
