package protect

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// A placement puts something other than etcdlet's regular file at a
// managed path. It is made beside the path and renamed over it, so that
// the guard never sees the path missing. outside is a directory away from
// the managed one, for what a symlink points to. The returned check fails
// the test if anything outside was changed.
type placement struct {
	name  string
	place func(t *testing.T, path, outside string) (check func(t *testing.T))
	kind  fs.FileMode // the type of what is placed (0: a regular file)
	found string      // how the report describes it
}

// optedOutManifest carries the opt-out annotation: read through a
// symlink, it would make the guard leave the path alone.
const optedOutManifest = "metadata:\n  annotations:\n    " + annotation + ": \"\"\nimage: theirs\n"

var placements = []placement{
	{name: "FIFO", kind: fs.ModeNamedPipe, found: "is a named pipe, want a regular file",
		place: func(t *testing.T, path, _ string) func(*testing.T) {
			tmp := path + ".fifo"
			mkfifo(t, tmp)
			renameOver(t, tmp, path)
			return nil
		}},
	{name: "symlink to an opted-out file", kind: fs.ModeSymlink, found: "is a symbolic link to ",
		place: func(t *testing.T, path, outside string) func(*testing.T) {
			target := filepath.Join(outside, "theirs.yaml")
			if err := os.WriteFile(target, []byte(optedOutManifest), 0o644); err != nil {
				t.Fatal(err)
			}
			symlinkOver(t, target, path)
			return func(t *testing.T) {
				fi, err := os.Lstat(target)
				if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
					t.Errorf("the symlink's target was changed: %v, %v", fi, err)
					return
				}
				if got := readNoFollow(target); got != optedOutManifest {
					t.Errorf("the symlink's target was written through: %q", got)
				}
			}
		}},
	{name: "symlink to a FIFO", kind: fs.ModeSymlink, found: "is a symbolic link to ",
		place: func(t *testing.T, path, outside string) func(*testing.T) {
			target := filepath.Join(outside, "fifo")
			mkfifo(t, target)
			symlinkOver(t, target, path)
			return func(t *testing.T) {
				if fi, err := os.Lstat(target); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
					t.Errorf("the symlink's target was replaced: %v, %v", fi, err)
				}
			}
		}},
	{name: "dangling symlink", kind: fs.ModeSymlink, found: "is a symbolic link to ",
		place: func(t *testing.T, path, outside string) func(*testing.T) {
			target := filepath.Join(outside, "nowhere")
			symlinkOver(t, target, path)
			return func(t *testing.T) {
				if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a file was created where the dangling symlink pointed: %v", err)
				}
			}
		}},
	{name: "file over the cap", kind: 0, found: "is 4194304 bytes, must be at most 1048576 bytes",
		place: func(t *testing.T, path, _ string) func(*testing.T) {
			// It opts out in its first lines: a file over the cap is not
			// read, so it cannot.
			tmp := path + ".big"
			big := []byte(optedOutManifest + strings.Repeat("#", 4<<20-len(optedOutManifest)))
			if err := os.WriteFile(tmp, big, 0o600); err != nil {
				t.Fatal(err)
			}
			renameOver(t, tmp, path)
			return nil
		}},
}

// Something other than a regular file of at most the cap at a managed path
// is foreign content: it is never read (nothing blocks, nothing is read
// through a symlink, an opt-out in it does not count), it is replaced by
// the rendered file, and what a symlink points to stays as it was.
func TestForeignFilesAreReplacedNotRead(t *testing.T) {
	const want = "image: etcd\nname: etcd\n"
	for _, p := range placements {
		t.Run(p.name, func(t *testing.T) {
			t.Run("watched and reverted", func(t *testing.T) {
				_, rec, path := running(t, true)
				check := p.place(t, path, t.TempDir())
				eventually.True(t, deadline, "reverted", func() bool { return readNoFollow(path) == want && rec.count(Reverted) == 1 })
				if d := rec.last().Diff; !strings.Contains(d, path+" "+p.found) || !strings.Contains(d, "not read, so no diff") {
					t.Errorf("the report does not say what was found (%q):\n%s", p.found, d)
				}
				if n := rec.count(Allowed); n != 0 {
					t.Errorf("%d changes allowed: foreign content cannot opt out", n)
				}
				if check != nil {
					check(t)
				}
			})

			t.Run("own write replaces it", func(t *testing.T) {
				g, path := stopped(t, want)
				check := p.place(t, path, t.TempDir())
				within(t, "Write", func() {
					changed, previous, err := g.Write(path, []byte("image: etcd:new\n"), 0o600)
					if err != nil || !changed || previous != nil {
						t.Errorf("Write = %v, %q, %v; want a write, no previous content", changed, previous, err)
					}
				})
				if got := readNoFollow(path); got != "image: etcd:new\n" {
					t.Errorf("found %q after the write", got)
				}
				if check != nil {
					check(t)
				}
			})

			t.Run("never opts out", func(t *testing.T) {
				g, path := stopped(t, want)
				p.place(t, path, t.TempDir())
				within(t, "OptedOut", func() {
					if g.OptedOut(path) {
						t.Error("foreign content opts out")
					}
				})
			})

			t.Run("released as it is", func(t *testing.T) {
				g, path := stopped(t, want)
				check := p.place(t, path, t.TempDir())
				keepAt := filepath.Join(t.TempDir(), "etcd.yaml.stopped")
				within(t, "Release", func() {
					if err := g.Release(path, keepAt); err != nil {
						t.Error(err)
					}
				})
				if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the path was not cleared: %v", err)
				}
				if fi, err := os.Lstat(keepAt); err != nil || fi.Mode().Type() != p.kind {
					t.Errorf("kept: %v, %v; want a file of type %v", fi, err, p.kind)
				}
				if check != nil {
					check(t)
				}
			})

			t.Run("protection off: reported once, left", func(t *testing.T) {
				g, rec, path := running(t, false)
				check := p.place(t, path, t.TempDir())
				eventually.True(t, deadline, "reported", func() bool { return rec.count(Allowed) == 1 })
				within(t, "Check", func() { g.Check(); g.Check() })
				if n := rec.count(Allowed); n != 1 {
					t.Errorf("reported %d times", n)
				}
				if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != p.kind {
					t.Errorf("found %v, %v; want what was placed, left alone", fi, err)
				}
				if check != nil {
					check(t)
				}
			})
		})
	}
}

// A foreign file of 4 MiB, and one at the read cap with short lines, are
// reverted at a bounded cost. Unbounded, each would be read whole and
// diffed against the manifest's 102 lines by a table of 102 times its
// 131,072 lines: over 100 MiB for either (measured: 109 MiB and 285 MiB
// with the cap and the diff bounds lifted). Bounded, a check reads at most
// the cap twice (before and after the settle time, 1 MiB each) and diffs
// no side over maxDiffBytes (a table of at most maxDiffCells 4-byte cells,
// 4 MiB): at most about 6 MiB, measured at 2 MiB (4 MiB under -race). The
// bound of 64 MiB is ten times that, room for the runtime and the race
// detector, and still well under what the unbounded path needs.
func TestOversizedForeignFileIsRevertedWithBoundedMemory(t *testing.T) {
	const bound = 64 << 20
	tests := []struct {
		name    string
		size    int
		lineLen int
		found   string // part of the report
	}{
		{"4 MiB, 32-byte lines", 4 << 20, 32, "is 4194304 bytes, must be at most 1048576 bytes; not read"},
		{"at the cap, 8-byte lines", maxManagedFile, 8,
			fmt.Sprintf("diff omitted: from %d bytes (102 lines) to 1048576 bytes (131072 lines)", len(manifestLike()))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			g := New(Options{Enabled: true, Settle: time.Millisecond, Interval: time.Hour, OnChange: rec.add})
			path := filepath.Join(t.TempDir(), "etcd.yaml")
			manifest := manifestLike()
			if _, _, err := g.Write(path, manifest, 0o600); err != nil {
				t.Fatal(err)
			}
			{
				// The foreign content is out of scope before the
				// measurement: only what the check allocates counts.
				foreign := foreignFile(tt.size, tt.lineLen)
				if len(foreign) != tt.size {
					t.Fatalf("foreign file of %d bytes, want %d", len(foreign), tt.size)
				}
				if err := os.WriteFile(path, foreign, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			g.Check()
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("a check of the foreign file allocated %d KiB", allocated>>10)
			if allocated >= bound {
				t.Errorf("a check allocated %d MiB, want < %d MiB", allocated>>20, bound>>20)
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, manifest) || rec.count(Reverted) != 1 {
				t.Fatalf("not reverted: %d bytes, %v, %d reverts", len(got), err, rec.count(Reverted))
			}
			if d := rec.last().Diff; !strings.Contains(d, tt.found) {
				t.Errorf("the report does not say %q:\n%.500s", tt.found, d)
			}
		})
	}
}

// stopped is a guard that is not running, managing one file of content.
func stopped(t *testing.T, content string) (*Guard, string) {
	t.Helper()
	g := New(Options{Enabled: true, Interval: time.Hour,
		OptOut: func(_ string, b []byte) bool { return strings.Contains(string(b), annotation) }})
	path := filepath.Join(t.TempDir(), "manifests", "etcd.yaml")
	if _, _, err := g.Write(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return g, path
}

// within fails the test if f does not return within the deadline (a read
// blocked on a FIFO).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatalf("%s did not return within %s", what, deadline)
	}
}

// readNoFollow is the content of path if it is a regular file itself;
// otherwise a description. It never blocks.
func readNoFollow(path string) string {
	data, _, err := config.ReadRegularNoFollow(path, 8<<20)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// symlinkOver makes path a symlink to target, atomically.
func symlinkOver(t *testing.T, target, path string) {
	t.Helper()
	tmp := path + ".link"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	renameOver(t, tmp, path)
}

func renameOver(t *testing.T, tmp, path string) {
	t.Helper()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
