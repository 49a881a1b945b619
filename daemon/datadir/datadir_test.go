package datadir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeWAL(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "member", "wal", "0000000000000000-0000000000000000.wal"), []byte("wal"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHasWAL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, step := range []struct {
		setup func()
		want  bool
	}{
		{func() {}, false}, // absent
		{func() { // empty WAL dir: etcd starts fresh
			if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, false},
		{func() {
			if err := os.WriteFile(filepath.Join(dir, "member", "wal", "0.tmp"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{func() { writeWAL(t, dir) }, true},
	} {
		step.setup()
		if got, err := HasWAL(dir); err != nil || got != step.want {
			t.Errorf("HasWAL = %v, %v; want %v", got, err, step.want)
		}
	}
}

func TestMoveAsideKeepsEverything(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	now := time.Date(2026, 11, 21, 15, 30, 0, 0, time.UTC)

	if to, err := MoveAside(dir, now); to != "" || err != nil {
		t.Fatalf("absent data dir: %q, %v", to, err)
	}
	writeWAL(t, dir)
	first, err := MoveAside(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + ".etcdlet-moved-20261121T153000Z"; first != want {
		t.Errorf("moved to %s, want %s", first, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Error("data dir still in place after the move")
	}
	if ok, _ := HasWAL(first); !ok {
		t.Error("the moved data lost its WAL")
	}
	// A second move in the same second never overwrites the first.
	writeWAL(t, dir)
	second, err := MoveAside(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || !strings.HasPrefix(second, first) {
		t.Errorf("second move went to %s (first %s)", second, first)
	}
	if ok, _ := HasWAL(first); !ok {
		t.Error("the first moved copy was touched")
	}
}

func TestMoveContentsForMountPoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	writeWAL(t, dir)
	entries, _ := os.ReadDir(dir)
	to, err := moveContents(dir, entries, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if to != filepath.Join(dir, "etcdlet-moved-20260102T030405Z") {
		t.Errorf("moved to %s", to)
	}
	if ok, _ := HasWAL(dir); ok {
		t.Error("the data dir still has a WAL etcd would start from")
	}
	if ok, _ := HasWAL(to); !ok {
		t.Error("the moved contents lost the WAL")
	}
}

func TestInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if inUse, err := InUse(dir); inUse || err != nil {
		t.Fatalf("absent data dir: %v, %v", inUse, err)
	}
	db := filepath.Join(dir, "member", "snap", "db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if inUse, err := InUse(dir); inUse || err != nil {
		t.Fatalf("unlocked db: %v, %v", inUse, err)
	}
	// etcd's bbolt backend holds an exclusive flock while it runs.
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if inUse, err := InUse(dir); !inUse || err != nil {
		t.Errorf("locked db: %v, %v", inUse, err)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if inUse, _ := InUse(dir); inUse {
		t.Error("the probe must not keep the lock")
	}
}

func TestInspectCountsABackendWithoutAWALAsData(t *testing.T) {
	dir := t.TempDir()
	if c, err := Inspect(dir); err != nil || c.HasData() {
		t.Fatalf("empty data dir: %+v, %v", c, err)
	}
	db := filepath.Join(dir, "member", "snap", "db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, []byte("bolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Inspect(dir)
	if err != nil || !c.HasData() || c.WAL || !c.Backend {
		t.Errorf("backend without a WAL: %+v, %v; want data (a backend, no WAL)", c, err)
	}
}

func TestMovedSinceCountsMovesOnDisk(t *testing.T) {
	parent := t.TempDir()
	dataDir := filepath.Join(parent, "data")
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{t0.Add(-2 * time.Hour), t0.Add(-10 * time.Minute), t0.Add(-time.Minute)} {
		if err := os.MkdirAll(filepath.Join(dataDir, "member", "wal"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dataDir, "member", "wal", "0.wal"), []byte{byte(i)}, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := MoveAside(dataDir, at); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := MovedSince(dataDir, t0.Add(-time.Hour)); err != nil || n != 2 {
		t.Errorf("moves within the last hour = %d, %v; want 2", n, err)
	}
	if n, _ := MovedSince(dataDir, t0.Add(-3*time.Hour)); n != 3 {
		t.Errorf("moves within three hours = %d, want 3", n)
	}
}

func TestMountedAtReadsMountinfo(t *testing.T) {
	mountinfo := []byte("22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n" +
		"30 22 8:2 / /var/lib/etcd rw,relatime - ext4 /dev/sdb1 rw\n" +
		"31 22 8:3 / /mnt/with\\040space rw - ext4 /dev/sdc1 rw\n")
	for path, want := range map[string]bool{"/var/lib/etcd": true, "/var/lib": false, "/mnt/with space": true, "/": true, "/var/lib/etcd/member": false} {
		if got := mountedAt(mountinfo, path); got != want {
			t.Errorf("mountedAt(%q) = %v, want %v", path, got, want)
		}
	}
	// The real table: / is always a mount point.
	if ok, err := IsMountPoint("/"); err != nil || !ok {
		t.Errorf("IsMountPoint(/) = %v, %v", ok, err)
	}
}

// A data dir that does not exist yet has the free space of the
// filesystem that will hold it.
func TestFreeBytesOfADataDirNotCreatedYet(t *testing.T) {
	dir := t.TempDir()
	parent, err := FreeBytes(dir)
	if err != nil || parent == 0 {
		t.Fatalf("free space of %s: %d, %v", dir, parent, err)
	}
	missing, err := FreeBytes(filepath.Join(dir, "not", "yet", "data"))
	if err != nil {
		t.Fatal(err)
	}
	// Others write to the same filesystem meanwhile: the same within 64 MiB.
	if diff := int64(parent) - int64(missing); diff > 64<<20 || diff < -64<<20 {
		t.Errorf("free space of a path not created yet: %d, of its parent %d", missing, parent)
	}
}
