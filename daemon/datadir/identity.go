package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"google.golang.org/protobuf/proto"
)

// Identity is the member and cluster a data dir belongs to, as its
// write-ahead log records them: every WAL file starts with a metadata
// record naming both.
type Identity struct {
	MemberID  uint64
	ClusterID uint64
}

// ErrNoIdentity says the data dir has no WAL to tell its identity.
var ErrNoIdentity = errors.New("no write-ahead log")

// ReadIdentity reads the identity from the newest WAL file's first
// records, without opening the log for writing and without reading it
// whole. It works while etcd runs on the data dir.
func ReadIdentity(dataDir string) (Identity, error) {
	dir := filepath.Join(dataDir, "member", "wal")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return Identity{}, ErrNoIdentity
	}
	if err != nil {
		return Identity{}, fmt.Errorf("read the identity of data dir %s: %w", dataDir, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return Identity{}, ErrNoIdentity
	}
	slices.Sort(names) // <seq>-<index>.wal, zero-padded hex: the newest is last
	f, err := os.Open(filepath.Join(dir, names[len(names)-1]))
	if err != nil {
		return Identity{}, fmt.Errorf("read the identity of data dir %s: %w", dataDir, err)
	}
	defer f.Close()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	for range 3 { // crc, metadata, snapshot
		var rec walpb.Record
		if err := dec.Decode(&rec); err != nil {
			return Identity{}, fmt.Errorf("read the identity of data dir %s from %s: %w", dataDir, names[len(names)-1], err)
		}
		if rec.GetType() == wal.CrcType {
			// Each record's checksum continues the one before it: a file
			// after the first starts from the last checksum of the file
			// before, which its crc record carries (etcd's ReadAll does
			// the same).
			dec.UpdateCRC(rec.GetCrc())
			continue
		}
		if rec.GetType() != wal.MetadataType {
			continue
		}
		var md pb.Metadata
		if err := proto.Unmarshal(rec.GetData(), &md); err != nil {
			return Identity{}, fmt.Errorf("read the identity of data dir %s: %w", dataDir, err)
		}
		return Identity{MemberID: md.GetNodeID(), ClusterID: md.GetClusterID()}, nil
	}
	return Identity{}, fmt.Errorf("read the identity of data dir %s: no metadata record at the start of %s", dataDir, names[len(names)-1])
}
