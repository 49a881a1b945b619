package tasks

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// etcdlet status says where the snapshots are, and that a directory on
// one host is lost with it; without a store, that there are none. A store
// not created yet is reported, not created.
func TestWhereaboutsOfTheSnapshots(t *testing.T) {
	dir := t.TempDir()
	local := config.Backup{Store: config.BackupStore{Provider: config.ProviderLocal, Directory: filepath.Join(dir, "snapshots"), Prefix: "etcd-main"},
		Schedule: config.BackupSchedule{Full: 12 * time.Hour}}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

	if got := Whereabouts(t.Context(), config.Backup{}, now); !strings.HasPrefix(got, "none: backup.store is not set") {
		t.Errorf("without a store: %q", got)
	}
	want := "no snapshot yet in " + local.Store.Directory + " on this host only; a full one every 12h0m0s; a host that is lost takes them with it"
	if got := Whereabouts(t.Context(), local, now); !strings.HasPrefix(got, want) {
		t.Errorf("an empty local store: %q, want it to start %q", got, want)
	}
	if _, err := os.Stat(local.Store.Directory); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the look created the store's directory (%v)", err)
	}
	if err := os.Mkdir(local.Store.Directory, 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := snapshot.NewLocalStore(local.Store.Directory, "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	full := snapshot.Snapshot{Kind: snapshot.KindFull, StartRevision: 0, LastRevision: 42, CreatedOn: now.Add(-3 * time.Hour), CompressionSuffix: ".gz"}
	full.SnapName = full.GenerateName()
	if err := store.Put(t.Context(), full, strings.NewReader("a snapshot")); err != nil {
		t.Fatal(err)
	}
	want = "newest full snapshot 2026-11-28T09:00:00Z (3h0m0s ago, revision 42) in " + local.Store.Directory + " on this host only"
	if got := Whereabouts(t.Context(), local, now); !strings.HasPrefix(got, want) {
		t.Errorf("a local store with a snapshot: %q, want it to start %q", got, want)
	}
}
