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
	"strings"
	"syscall"
	"time"
)

// HasWAL reports whether dataDir holds a write-ahead log, the point from
// which etcd ignores --initial-cluster* and restarts the member it holds.
func HasWAL(dataDir string) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(dataDir, "member", "wal"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			return true, nil
		}
	}
	return false, nil
}

// MovedSuffix marks directories moved aside by etcdlet.
const MovedSuffix = ".etcdlet-moved-"

// MoveAside renames dataDir to "<dataDir>.etcdlet-moved-<UTC time>" and
// returns the new path; "" when there is nothing to move. A rename is
// atomic, so a crash leaves the data either in place or moved, never
// half-moved. When dataDir is a mount point (rename gives EBUSY or EXDEV)
// its contents are moved into a timestamped directory inside it instead.
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
	target := uniquePath(clean + MovedSuffix + now.UTC().Format("20060102T150405Z"))
	err = os.Rename(clean, target)
	if err == nil {
		return target, syncDir(filepath.Dir(clean))
	}
	if !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.EXDEV) {
		return "", fmt.Errorf("move data dir %s aside to %s: %w", dataDir, target, err)
	}
	return moveContents(clean, entries, now)
}

// moveContents is the mount-point fallback: the data dir itself stays,
// its entries go into "<dataDir>/etcdlet-moved-<time>/".
func moveContents(dataDir string, entries []os.DirEntry, now time.Time) (string, error) {
	target := uniquePath(filepath.Join(dataDir, strings.TrimPrefix(MovedSuffix, ".")+now.UTC().Format("20060102T150405Z")))
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
	return target, syncDir(dataDir)
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// InUse reports whether an etcd process holds the data dir: etcd's bbolt
// backend keeps an exclusive flock on member/snap/db while it runs. The
// data dir of a member whose process is still stopping (the kubelet takes
// its time) must not be moved.
func InUse(dataDir string) (bool, error) {
	f, err := os.Open(filepath.Join(dataDir, "member", "snap", "db"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	default:
		return false, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
}
