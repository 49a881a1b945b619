// Package fstest makes the directory trees the file-watching tests need
// (ConfigMap volumes, symlink chains, files rewritten in place), failing
// the test on any error.
package fstest

import (
	"os"
	"testing"
)

// Mkdir makes dir and its parents (0750).
func Mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
}

// Symlink makes link point at target.
func Symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// Repoint atomically points link at target, as kubelet does with a
// ConfigMap volume's ..data and as `ln -sfn` followed by a rename does.
func Repoint(t testing.TB, target, link string) {
	t.Helper()
	tmp := link + "_tmp"
	Symlink(t, target, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// WriteInPlace overwrites a file without replacing it (0600 when new).
func WriteInPlace(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
