package datadir

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// sandboxEnv tells the re-executed test binary which data dir to move
// aside inside the mount namespace TestMoveAsideUnderTheUnitSandbox made.
const sandboxEnv = "ETCDLET_TEST_SANDBOXED_DATA_DIR"

// Under etcdlet.service, ProtectSystem=strict makes the whole tree
// read-only and ReadWritePaths= bind-mounts the data dir writable over
// itself: renaming it beside itself fails (its parent is read-only, and it
// is a mount point). The same mounts are made here in a private mount
// namespace (unshare -m), and the move must still keep every byte: the
// contents go into a directory inside the data dir.
func TestMoveAsideUnderTheUnitSandbox(t *testing.T) {
	if dir := os.Getenv(sandboxEnv); dir != "" {
		moveAsideInSandbox(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test makes bind mounts in a private mount namespace and needs root: run `sudo make test`")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("unshare not found: apt-get install -y util-linux")
	}
	parent := filepath.Join(t.TempDir(), "var-lib")
	dir := filepath.Join(parent, "etcd")
	writeWAL(t, dir)
	// What systemd does for ProtectSystem=strict (read-only) plus
	// ReadWritePaths=<data dir> (a writable bind mount of it), then the
	// test binary runs only this test inside.
	script := `set -e
mount --bind "$1" "$1"
mount -o remount,bind,ro "$1"
mount --bind "$2" "$2"
mount -o remount,bind,rw "$2"
exec "$3" -test.run '^TestMoveAsideUnderTheUnitSandbox$' -test.count=1`
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", parent, dir, os.Args[0])
	cmd.Env = append(os.Environ(), sandboxEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("move aside under the sandbox's mounts: %v\n%s", err, out)
	}
	// Back outside: the WAL is kept, inside the data dir, and the data dir
	// has none etcd would start from.
	if ok, _ := HasWAL(dir); ok {
		t.Error("the data dir still has a WAL etcd would start from")
	}
	moved, err := filepath.Glob(filepath.Join(dir, "etcdlet-moved-*"))
	if err != nil || len(moved) != 1 {
		t.Fatalf("moved copies in the data dir: %v (%v), want one", moved, err)
	}
	if ok, _ := HasWAL(moved[0]); !ok {
		t.Errorf("%s lost the WAL", moved[0])
	}
	if n, err := MovedSince(dir, time.Time{}); err != nil || n != 1 {
		t.Errorf("MovedSince counts %d moves (%v), want 1: the moves-aside limit must see it", n, err)
	}
}

func moveAsideInSandbox(t *testing.T, dir string) {
	// The premise: renaming beside itself really fails here.
	if err := os.Rename(dir, dir+".probe"); err == nil {
		t.Fatal("the data dir could be renamed: the sandbox's mounts are not in place")
	}
	to, err := MoveAside(dir, time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("MoveAside under the sandbox: %v", err)
	}
	if filepath.Dir(to) != dir {
		t.Errorf("moved to %s, want a directory inside %s", to, dir)
	}
}
