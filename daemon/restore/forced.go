package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// forcedSuffix names the work dir of ForceAlone beside the data dir, and
// forcedMark the file in it that says the forced copy is complete.
const (
	forcedSuffix = ".etcdlet-force"
	forcedMark   = "forced"
)

// ForceAlone makes the stopped member in dataDir the only member of its
// cluster, from its own data, keeping every entry of its log: the failover
// of a two-node cluster's survivor (daemon/twonode). The data dir is
// copied, the copy's whole log recorded as committed (datadir.CommitLog:
// the last entries may have been committed, and acknowledged, by a leader
// whose notice never came) and forced to a one-member cluster
// (snapshot.ForceNewCluster), keeping the cluster and member IDs; then the
// data dir goes aside (kept) and the copy takes its place. It returns
// where the data dir went and how many entries above the recorded commit
// index were kept.
//
// The data dir is untouched until the forced copy is complete and marked
// so. A crash before that leaves it as it was (the next run starts again);
// a crash between moving it aside and putting the copy in place leaves the
// marked copy, which ResumeForced puts in place.
func ForceAlone(ctx context.Context, dataDir, name string, log *slog.Logger, now time.Time) (moved string, kept uint64, err error) {
	work := filepath.Clean(dataDir) + forcedSuffix
	if err := os.RemoveAll(work); err != nil { // only ever ForceAlone's own work dir
		return "", 0, fmt.Errorf("remove the work dir %s of an earlier failover: %w", work, err)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", 0, err
	}
	copied := filepath.Join(work, "data")
	if err := datadir.Copy(dataDir, copied); err != nil {
		return "", 0, err
	}
	if kept, err = datadir.CommitLog(copied); err != nil {
		return "", 0, err
	}
	if err := snapshot.ForceNewCluster(ctx, copied, name, log); err != nil {
		return "", kept, err
	}
	if err := atomicfile.Write(filepath.Join(work, forcedMark), []byte(now.UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		return "", kept, fmt.Errorf("mark the forced copy complete: %w", err)
	}
	if moved, err = datadir.MoveAside(dataDir, now); err != nil {
		return "", kept, err
	}
	return moved, kept, finishForced(work, dataDir)
}

// ResumeForced completes a ForceAlone that a crash interrupted after the
// data dir went aside: the marked forced copy is put in its place. It
// reports whether it did; a work dir without the mark, or a data dir that
// holds member data again, is left as it is (the next ForceAlone removes
// the work dir).
func ResumeForced(dataDir string) (bool, error) {
	work := filepath.Clean(dataDir) + forcedSuffix
	if _, err := os.Stat(filepath.Join(work, forcedMark)); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	c, err := datadir.Inspect(dataDir)
	if err != nil {
		return false, err
	}
	if c.HasData() || c.WAL {
		return false, nil
	}
	return true, finishForced(work, dataDir)
}

func finishForced(work, dataDir string) error {
	if err := swapIn(filepath.Join(work, "data"), dataDir); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(filepath.Dir(filepath.Clean(dataDir))); err != nil {
		return err
	}
	return os.RemoveAll(work)
}
