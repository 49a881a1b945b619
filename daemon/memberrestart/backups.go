package memberrestart

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// BackupsKept is how many databases saved before version changes are
// kept: the one before the latest change, and the one before that (an
// upgrade and the downgrade back).
const BackupsKept = 2

// Backups saves the local member's database before a version change, as
// kubeadm and etcd-manager back up before theirs: a member that does not
// come back on the new version can be restored from it (etcdutl snapshot
// restore) whatever the new version did to its data. The files are
// etcdlet's own copies, not a member's data, so the oldest go once more
// than Keep are there.
type Backups struct {
	// Dir is <agent.stateDir>/version-changes.
	Dir  string
	Keep int
	// Client returns a client of the local member's client URL, owned by
	// the caller.
	Client func() (*clientv3.Client, error)
}

// Save writes the database to Dir/name and returns its path.
func (b Backups) Save(ctx context.Context, name string) (string, error) {
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return "", err
	}
	cli, err := b.Client()
	if err != nil {
		return "", err
	}
	defer cli.Close()
	path := filepath.Join(b.Dir, name)
	if err := snapshot.SaveDB(ctx, cli, path); err != nil {
		return "", fmt.Errorf("save %s: %w", path, err)
	}
	if err := b.prune(); err != nil {
		return "", fmt.Errorf("keep the newest %d databases in %s: %w", b.Keep, b.Dir, err)
	}
	return path, nil
}

// prune removes what a killed save left and all but the newest Keep
// saved databases.
func (b Backups) prune() error {
	entries, err := os.ReadDir(b.Dir)
	if err != nil {
		return err
	}
	type saved struct {
		name string
		at   time.Time
	}
	var all []saved
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), ".partial-") {
			_ = os.Remove(filepath.Join(b.Dir, e.Name()))
			continue
		}
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".db") {
			all = append(all, saved{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(all, func(x, y saved) int { return cmp.Or(y.at.Compare(x.at), strings.Compare(y.name, x.name)) })
	for _, s := range all[min(b.Keep, len(all)):] {
		if err := os.Remove(filepath.Join(b.Dir, s.name)); err != nil {
			return err
		}
	}
	return nil
}
