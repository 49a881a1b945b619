package snapshot

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// SaveDB writes the database etcd serves through cli to path (0600), as
// etcdctl snapshot save does, whole or not at all: the stream goes to a
// temporary file beside path, its trailing sha256 is checked, and the
// file is synced and renamed into place. etcdutl snapshot restore takes
// it as it is.
func SaveDB(ctx context.Context, cli *clientv3.Client, path string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("start the snapshot stream: %w", err)
	}
	defer rc.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	t := newTrailerHash()
	if _, err := io.Copy(io.MultiWriter(w, t), rc); err != nil {
		return fmt.Errorf("receive the snapshot: %w", err)
	}
	if err := t.verifyDB(); err != nil {
		return fmt.Errorf("the snapshot received from etcd is corrupt: %w", err)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}
