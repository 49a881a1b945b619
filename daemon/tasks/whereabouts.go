package tasks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// Whereabouts says, for etcdlet status, where this node's snapshots go and
// what an operator must know about that: none configured; a directory on
// this host only, which a lost host takes with it; or the S3 store; with
// the newest full snapshot and the schedule. It changes nothing: a local
// store that holds no snapshot yet is not created.
func Whereabouts(ctx context.Context, b config.Backup, now time.Time) string {
	if !b.SnapshotsEnabled() {
		return "none: backup.store is not set, so a cluster that loses its quorum for good can be recovered only from a member's data dir (tasks.md)"
	}
	schedule := "none scheduled (backup.schedule.full)"
	if b.Schedule.Full > 0 {
		schedule = "a full one every " + b.Schedule.Full.String()
	}
	where, caveat := b.Store.Directory+" on this host only",
		"; a host that is lost takes them with it: copy them off the host, or use an S3 store (tasks.md)"
	if b.Store.S3 != nil {
		where, caveat = "s3://"+b.Store.S3.Bucket+"/"+b.Store.Prefix, ""
	}
	return fmt.Sprintf("%s in %s; %s%s", newestFull(ctx, b.Store, now), where, schedule, caveat)
}

// newestFull describes the store's newest full snapshot.
func newestFull(ctx context.Context, s config.BackupStore, now time.Time) string {
	if s.Provider == config.ProviderLocal {
		if _, err := os.Stat(filepath.Join(s.Directory, filepath.FromSlash(s.Prefix), "v2")); errors.Is(err, fs.ErrNotExist) {
			return "no snapshot yet"
		}
	}
	store, err := OpenSnapshotStore(ctx, s, false)
	if err != nil {
		return fmt.Sprintf("snapshots cannot be listed (%v)", err)
	}
	newest, ok, err := snapshot.Newest(ctx, store, snapshot.KindFull)
	switch {
	case err != nil:
		return fmt.Sprintf("snapshots cannot be listed (%v)", err)
	case !ok:
		return "no full snapshot yet"
	}
	return fmt.Sprintf("newest full snapshot %s (%s ago, revision %d)", newest.CreatedOn.UTC().Format(time.RFC3339),
		now.Sub(newest.CreatedOn).Round(time.Minute), newest.LastRevision)
}
