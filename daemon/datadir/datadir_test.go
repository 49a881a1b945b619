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
		{func() { os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700) }, false}, // empty WAL dir: etcd starts fresh
		{func() { os.WriteFile(filepath.Join(dir, "member", "wal", "0.tmp"), nil, 0o600) }, false},
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
