package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/etcdlet/etcdlet/config/trust"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// LocalStore keeps snapshots as files in a directory, laid out as BR's
// Local provider does (<dir>/<prefix>/v2/<name>).
type LocalStore struct {
	dir    string
	prefix string
	// v2 is the directory holding the files, dir/prefix/v2.
	v2 string
}

// NewLocalStore creates (0700) the directory <dir>/<prefix>/v2 if needed.
// dir, and then every directory down to v2, must be one only root can
// change (package trust): restore takes the newest object it lists for
// the data of a new cluster, so a planted one would be restored.
func NewLocalStore(dir, prefix string) (*LocalStore, error) {
	p, err := cleanPrefix(prefix)
	if err != nil {
		return nil, fmt.Errorf("local snapshot store %s: %w", dir, err)
	}
	if err := trust.CheckDir(dir); err != nil {
		return nil, untrustedStore(err)
	}
	v2 := filepath.Join(dir, filepath.FromSlash(p), "v2")
	if err := os.MkdirAll(v2, 0o700); err != nil {
		return nil, fmt.Errorf("local snapshot store: %w", err)
	}
	// Below a trusted dir, only root creates directories; one that was
	// there before it was trusted is checked all the same.
	if err := trust.CheckDir(v2); err != nil {
		return nil, untrustedStore(err)
	}
	return &LocalStore{dir: dir, prefix: p, v2: v2}, nil
}

func untrustedStore(err error) error {
	return fmt.Errorf("local snapshot store (backup.store.directory) must be a directory only root can change: %w", err)
}

func (l *LocalStore) String() string { return l.v2 }

func (l *LocalStore) file(s Snapshot) (string, error) {
	key, err := objectKey(l.prefix, s)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.dir, filepath.FromSlash(key)), nil
}

// Put writes to a temporary file in the same directory, fsyncs it and
// renames it into place: a crash leaves either no file under the name or
// the whole one. The temporary name does not parse as a snapshot, so List
// never shows it.
func (l *LocalStore) Put(ctx context.Context, s Snapshot, r io.Reader) error {
	name, err := l.file(s)
	if err != nil {
		return fmt.Errorf("put %s: %w", s.name(), err)
	}
	if err := writeAtomic(ctx, name, r); err != nil {
		return fmt.Errorf("put %s: %w", s.name(), err)
	}
	return nil
}

func writeAtomic(ctx context.Context, name string, r io.Reader) error {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	// CreateTemp makes the file 0600, which is what snapshots need: they
	// hold every secret the cluster stores.
	if _, err := io.Copy(tmp, ctxReader{ctx, r}); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

func (l *LocalStore) Get(_ context.Context, s Snapshot) (io.ReadCloser, error) {
	name, err := l.file(s)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.name(), err)
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s from %s: %w", s.name(), l, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.name(), err)
	}
	return f, nil
}

func (l *LocalStore) List(context.Context) ([]Snapshot, error) {
	entries, err := os.ReadDir(l.v2)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l, err)
	}
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			keys = append(keys, path.Join(l.prefix, "v2", e.Name()))
		}
	}
	return parseKeys(keys, nil), nil
}

func (l *LocalStore) Delete(_ context.Context, s Snapshot) error {
	name, err := l.file(s)
	if err != nil {
		return fmt.Errorf("delete %s: %w", s.name(), err)
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", s.name(), err)
	}
	if err := atomicfile.SyncDir(l.v2); err != nil {
		return fmt.Errorf("delete %s: %w", s.name(), err)
	}
	return nil
}
