package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
)

// TakeForced takes a full snapshot of the member data in dataDir, a copy
// of a stopped member's data dir whose cluster lost its quorum for good,
// into store (uncompressed: it is restored right away). etcd starts on it
// as the only member of its cluster (force-new-cluster), reachable only
// on 127.0.0.1 on ports the kernel picks, so that no client and no other
// member reaches it, and applies its log up to the commit index the log
// records (datadir.CommitLog decides which that is).
func TakeForced(ctx context.Context, dataDir, name string, store Store, log *slog.Logger) (Snapshot, error) {
	e, err := startLocal(ctx, dataDir, name, true, log)
	if err != nil {
		return Snapshot{}, fmt.Errorf("force a new cluster on %s: %w", dataDir, err)
	}
	defer embedded.CloseServer(e)
	cli, err := localClient(e, log)
	if err != nil {
		return Snapshot{}, err
	}
	defer cli.Close()
	return TakeFull(ctx, cli, store, Options{Compression: None, TempDir: filepath.Dir(dataDir)})
}

// ForceNewCluster makes the member whose stopped data is dataDir the only
// member of its cluster, in place: etcd starts on it with force-new-cluster,
// reachable only on 127.0.0.1 on ports the kernel picks, commits the
// removal of every other member, and stops again. The cluster and member
// IDs and the member's peer URLs stay: the member then restarts as
// always, alone, and a removed member that comes back is told so by it.
// Run it on a copy (datadir.CommitLog first decides which entries stay).
func ForceNewCluster(ctx context.Context, dataDir, name string, log *slog.Logger) error {
	e, err := startLocal(ctx, dataDir, name, true, log)
	if err != nil {
		return fmt.Errorf("force a new cluster on %s: %w", dataDir, err)
	}
	embedded.CloseServer(e)
	return nil
}
