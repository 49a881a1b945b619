package datadir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
)

// Survey is what a stopped member's data dir holds, for choosing the
// survivor to recover a cluster from: the identity, how far its raft log
// goes, what it knows to be committed, and how far its backend applied.
type Survey struct {
	Identity
	// LastTerm and LastIndex are the term and index of the last entry of
	// its write-ahead log (of the snapshot it starts from, without one):
	// the raft log's end, which ranks survivors as raft elects leaders.
	LastTerm, LastIndex uint64
	// Commit is the commit index the log recorded last: entries above it
	// may never have been committed, and a forced new cluster drops them.
	Commit uint64
	// Revision is the highest revision in the backend; ConsistentIndex
	// the last raft index the backend applied. Both 0 with BackendInUse:
	// a running etcd holds the backend (ask it instead).
	Revision        int64
	ConsistentIndex uint64
	BackendInUse    bool
}

// ReadSurvey reads the survey of a data dir. It opens nothing for
// writing: the log is read as etcd reads it at start (from the newest
// snapshot it records; a record being written when it is read ends it),
// the backend read-only, unless a running etcd holds it (BackendInUse,
// found within a second).
func ReadSurvey(dataDir string) (Survey, error) {
	id, err := ReadIdentity(dataDir)
	if err != nil {
		return Survey{}, err
	}
	s := Survey{Identity: id}
	if err := s.readLog(filepath.Join(dataDir, "member", "wal")); err != nil {
		return Survey{}, fmt.Errorf("read the write-ahead log of data dir %s: %w", dataDir, err)
	}
	if err := s.readBackend(filepath.Join(dataDir, "member", "snap", "db")); err != nil {
		return Survey{}, fmt.Errorf("read the backend of data dir %s: %w", dataDir, err)
	}
	return s, nil
}

func (s *Survey) readLog(dir string) error {
	snaps, err := wal.ValidSnapshotEntries(zap.NewNop(), dir)
	if err != nil {
		return err
	}
	from := &walpb.Snapshot{}
	if len(snaps) > 0 {
		from = snaps[len(snaps)-1] // in log order: the newest is last
	}
	w, err := wal.OpenForRead(zap.NewNop(), dir, from)
	if err != nil {
		return err
	}
	defer w.Close()
	_, state, ents, err := w.ReadAll()
	if err != nil {
		return err
	}
	s.LastTerm, s.LastIndex = from.GetTerm(), from.GetIndex()
	if n := len(ents); n > 0 {
		s.LastTerm, s.LastIndex = ents[n-1].GetTerm(), ents[n-1].GetIndex()
	}
	s.Commit = state.GetCommit()
	return nil
}

func (s *Survey) readBackend(path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		s.BackendInUse = true
		return nil
	}
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(schema.Meta.Name()); meta != nil {
			if v := meta.Get(schema.MetaConsistentIndexKeyName); len(v) == 8 {
				s.ConsistentIndex = binary.BigEndian.Uint64(v)
			}
		}
		if keys := tx.Bucket(schema.Key.Name()); keys != nil {
			// Keys are revisions, 8 bytes of the main revision first, big
			// endian: the last is the highest.
			if k, _ := keys.Cursor().Last(); len(k) >= 8 {
				s.Revision = int64(binary.BigEndian.Uint64(k[:8])) //nolint:gosec // etcd writes revisions as int64
			}
		}
		return nil
	})
}

// ReadClusterVersion reads the cluster version the backend of dataDir
// recorded (etcd 3.5 and later record it): "" when there is no backend,
// none was recorded, or a running etcd holds the backend.
func ReadClusterVersion(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "member", "snap", "db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return "", nil // a running etcd holds it
	case err != nil:
		return "", fmt.Errorf("read the cluster version of data dir %s: %w", dataDir, err)
	}
	defer db.Close()
	var v string
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(schema.Cluster.Name()); b != nil {
			v = string(b.Get(schema.ClusterClusterVersionKeyName))
		}
		return nil
	})
	return v, err
}
