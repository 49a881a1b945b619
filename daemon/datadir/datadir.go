// Package datadir inspects and moves etcd data directories. etcdlet never
// deletes etcd data: a member's data that must not be used again (the
// member was removed, or the data belongs to an earlier incarnation) is
// moved aside under a timestamped name and kept.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/storage/schema"

	"github.com/etcdlet/etcdlet/internal/atomicfile"
	"github.com/etcdlet/etcdlet/internal/flock"
)

// Contents is what a data dir holds of a member.
type Contents struct {
	// WAL: a write-ahead log, the point from which etcd ignores
	// --initial-cluster* and restarts the member it holds.
	WAL bool
	// Backend: member/snap/db, the key-value store. Without a WAL, only a
	// backend that applied something counts (unusedBackend).
	Backend bool
}

// HasData reports whether the data dir holds anything of a member: a
// backend without a WAL (a copy gone wrong, a restore cut short) is data
// too, and must be moved aside before the node joins as a new member.
func (c Contents) HasData() bool { return c.WAL || c.Backend }

// Inspect reports what dataDir holds.
func Inspect(dataDir string) (Contents, error) {
	var c Contents
	entries, err := os.ReadDir(filepath.Join(dataDir, "member", "wal"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			c.WAL = true
		}
	}
	db := filepath.Join(dataDir, "member", "snap", "db")
	if _, err := os.Lstat(db); err == nil {
		c.Backend = c.WAL || !unusedBackend(db)
	} else if !errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
	return c, nil
}

// unusedBackend reports whether the backend at db never applied a raft
// entry and holds no key: what etcd leaves when its first start on an
// empty data dir fails before it writes its WAL (it creates the backend
// first, then asks its peers for the cluster, which a join that comes
// too early fails: "incompatible with current running cluster" while
// the new cluster has not decided its version). etcd starts on such a
// backend as on an empty data dir, so it is no member's data: moving it
// aside would only count a move a moment of bad timing caused against
// etcd.moveAsideLimit, at every retry. Anything it cannot read for
// certain counts as used: a backend another process holds (the lock is
// not granted at once), or one bbolt does not open.
func unusedBackend(db string) bool {
	b, err := bolt.Open(db, 0o400, &bolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		return false
	}
	defer b.Close()
	unused := false
	err = b.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(schema.Meta.Name()); meta != nil && meta.Get(schema.MetaConsistentIndexKeyName) != nil {
			return nil // applied at least one entry (index 0 is never written)
		}
		if keys := tx.Bucket(schema.Key.Name()); keys != nil && keys.Stats().KeyN > 0 {
			return nil
		}
		unused = true
		return nil
	})
	return err == nil && unused
}

// HasWAL reports whether dataDir holds a write-ahead log.
func HasWAL(dataDir string) (bool, error) {
	c, err := Inspect(dataDir)
	return c.WAL, err
}

// MovedSuffix marks directories moved aside by etcdlet; the UTC time of
// the move follows it (movedTimeFormat).
const MovedSuffix = ".etcdlet-moved-"

const movedTimeFormat = "20060102T150405Z"

// MoveAside renames dataDir to "<dataDir>.etcdlet-moved-<UTC time>" and
// returns the new path; "" when there is nothing to move. A rename is
// atomic, so a crash leaves the data either in place or moved, never
// half-moved. When the data dir cannot be renamed beside itself, its
// contents are moved into a timestamped directory inside it instead:
// a mount point (EBUSY or EXDEV), or a parent that is read-only (EROFS)
// while the data dir is writable, as under etcdlet.service's
// ProtectSystem=strict with the data dir in ReadWritePaths=
// (/var/lib/etcd: /var/lib stays read-only, and the data dir is itself a
// bind mount there). etcd ignores directories it does not know in its data
// dir, so the copies can stay.
func MoveAside(dataDir string, now time.Time) (string, error) {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("move data dir %s aside: %w", dataDir, err)
	}
	if len(entries) == 0 {
		return "", nil
	}
	clean := filepath.Clean(dataDir)
	target := uniquePath(clean + MovedSuffix + now.UTC().Format(movedTimeFormat))
	err = os.Rename(clean, target)
	if err == nil {
		return target, atomicfile.SyncDir(filepath.Dir(clean))
	}
	if !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EROFS) {
		return "", fmt.Errorf("move data dir %s aside to %s: %w", dataDir, target, err)
	}
	return moveContents(clean, entries, now)
}

// moveContents is the mount-point fallback: the data dir itself stays,
// its entries go into "<dataDir>/etcdlet-moved-<time>/".
func moveContents(dataDir string, entries []os.DirEntry, now time.Time) (string, error) {
	target := uniquePath(filepath.Join(dataDir, strings.TrimPrefix(MovedSuffix, ".")+now.UTC().Format(movedTimeFormat)))
	if err := os.Mkdir(target, 0o700); err != nil {
		return "", fmt.Errorf("move data dir %s aside: %w", dataDir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), strings.TrimPrefix(MovedSuffix, ".")) {
			continue // earlier moves stay where they are
		}
		if err := os.Rename(filepath.Join(dataDir, e.Name()), filepath.Join(target, e.Name())); err != nil {
			return "", fmt.Errorf("move %s aside: %w", e.Name(), err)
		}
	}
	return target, atomicfile.SyncDir(dataDir)
}

func uniquePath(base string) string {
	path := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return path
		}
		path = fmt.Sprintf("%s-%d", base, i)
	}
}

// InUse reports whether an etcd process holds the data dir: etcd's bbolt
// backend keeps an exclusive flock on member/snap/db while it runs. The
// data dir of a member whose process is still stopping (the kubelet takes
// its time) must not be moved.
func InUse(dataDir string) (bool, error) {
	held, err := flock.Held(filepath.Join(dataDir, "member", "snap", "db"))
	if err != nil {
		return false, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
	return held, nil
}

// IsMountPoint reports whether path (after symlinks) is a mount point, as
// /proc/self/mountinfo lists them.
func IsMountPoint(path string) (bool, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, fmt.Errorf("is %s a mount point: %w", path, err)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("is %s a mount point: %w", path, err)
	}
	return mountedAt(data, real), nil
}

// FreeBytes is the space an unprivileged writer may still use on the
// filesystem that holds path, or that will hold it: its nearest existing
// ancestor's, when path does not exist yet (a data dir before its first
// start).
func FreeBytes(path string) (uint64, error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil && st.Bsize > 0 {
			return st.Bavail * uint64(st.Bsize), nil
		}
		if err == nil {
			return 0, fmt.Errorf("free space for %s: statfs %s: block size %d", path, p, st.Bsize)
		}
		if !errors.Is(err, syscall.ENOENT) || p == filepath.Dir(p) {
			return 0, fmt.Errorf("free space for %s: statfs %s: %w", path, p, err)
		}
	}
}

// mountedAt reports whether mountinfo lists a mount at path. The fifth
// field is the mount point, with space, tab, newline and backslash written
// as octal escapes.
func mountedAt(mountinfo []byte, path string) bool {
	for _, line := range strings.Split(string(mountinfo), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 5 && unescapeMountinfo(fields[4]) == path {
			return true
		}
	}
	return false
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MovedSince counts the data dirs moved aside at or after since, from
// their names on disk (beside the data dir, or inside it for a mount
// point): what was moved is counted even if the agent's state did not
// get to record it.
func MovedSince(dataDir string, since time.Time) (int, error) {
	clean := filepath.Clean(dataDir)
	beside, err := filepath.Glob(clean + MovedSuffix + "*")
	if err != nil {
		return 0, err
	}
	inside, err := filepath.Glob(filepath.Join(clean, strings.TrimPrefix(MovedSuffix, ".")+"*"))
	if err != nil {
		return 0, err
	}
	marker := strings.TrimPrefix(MovedSuffix, ".")
	n := 0
	for _, p := range append(beside, inside...) {
		_, stamp, _ := strings.Cut(filepath.Base(p), marker)
		if len(stamp) < len(movedTimeFormat) {
			continue
		}
		at, err := time.Parse(movedTimeFormat, stamp[:len(movedTimeFormat)])
		if err == nil && !at.Before(since.UTC().Truncate(time.Second)) {
			n++
		}
	}
	return n, nil
}

// Dir is one data dir, with the operations the node controller needs.
type Dir struct{ Path string }

// Inspect reports what the data dir holds.
func (d Dir) Inspect() (Contents, error) { return Inspect(d.Path) }

// Identity reads the data dir's member and cluster from its WAL.
func (d Dir) Identity() (Identity, error) { return ReadIdentity(d.Path) }

// InUse reports whether an etcd process holds the data dir.
func (d Dir) InUse() (bool, error) { return InUse(d.Path) }

// MoveAside moves the data dir aside.
func (d Dir) MoveAside(now time.Time) (string, error) { return MoveAside(d.Path, now) }

// MovedSince counts moves aside since a time.
func (d Dir) MovedSince(since time.Time) (int, error) { return MovedSince(d.Path, since) }

// MountPoint reports whether the data dir is a mount point.
func (d Dir) MountPoint() (bool, error) { return IsMountPoint(d.Path) }

// FreeBytes is the free space where the data dir is, or will be
// (FreeBytes).
func (d Dir) FreeBytes() (uint64, error) { return FreeBytes(d.Path) }

// Survey reads how far the data goes (ReadSurvey).
func (d Dir) Survey() (Survey, error) { return ReadSurvey(d.Path) }

// ClusterVersion reads the cluster version the backend recorded
// (ReadClusterVersion).
func (d Dir) ClusterVersion() (string, error) { return ReadClusterVersion(d.Path) }
