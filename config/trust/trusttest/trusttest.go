// Package trusttest makes the files and directories that tests of the
// trust rules (package trust) need: with an exact mode, past the umask,
// and owned by root or by another user. Making another user's file needs
// root, as etcdlet itself does.
package trusttest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Nobody is the user that owns what another user planted.
const Nobody = 65534

// RequireRoot fails a test that makes files owned by another user when it
// does not run as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes files owned by another user and needs root: run it as root (make test does)")
	}
}

// File writes a small file at path with mode, making the directories
// above it (0755), and returns path.
func File(t testing.TB, path string, mode fs.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("192.0.2.10\n"), mode); err != nil {
		t.Fatal(err)
	}
	Chmod(t, path, mode)
	return path
}

// Dir makes the directory path (and those above it, 0755) with mode and
// returns path.
func Dir(t testing.TB, path string, mode fs.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	Chmod(t, path, mode)
	return path
}

// Chmod sets path's mode exactly.
func Chmod(t testing.TB, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// Chown gives path (not following a symbolic link) to uid and gid.
func Chown(t testing.TB, path string, uid, gid int) {
	t.Helper()
	if err := os.Lchown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}
