package memberlist

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/eventually"

	"github.com/etcdlet/etcdlet/internal/fstest"
)

const (
	listA = "192.0.2.1\n192.0.2.2\n192.0.2.3\n"
	listB = "192.0.2.1\n192.0.2.2\n192.0.2.4\n"
	listC = "192.0.2.1\n192.0.2.2\n192.0.2.5\n"
	wantA = "192.0.2.1 192.0.2.2 192.0.2.3 "
	wantB = "192.0.2.1 192.0.2.2 192.0.2.4 "
	wantC = "192.0.2.1 192.0.2.2 192.0.2.5 "
)

// logBuffer collects log output written by the Watch goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// setFuture gives a file a modification time an hour ahead, as cp -p or
// rsync -t from a host whose clock is ahead do.
func setFuture(t *testing.T, path string) {
	t.Helper()
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
}

// configMapUpdate does what kubelet's atomic writer does to a ConfigMap
// volume: a new timestamped directory, ..data re-pointed at it by rename,
// the old directory removed.
func configMapUpdate(t *testing.T, dir, old, next, content string) {
	t.Helper()
	fstest.Mkdir(t, filepath.Join(dir, next))
	fstest.WriteInPlace(t, filepath.Join(dir, next, "members"), content)
	fstest.Repoint(t, next, filepath.Join(dir, "..data"))
	if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
		t.Fatal(err)
	}
}

// watchDeadline is when a test stops waiting for the watch to notice a
// change and fails. It is a failure deadline, not a speed figure: how fast
// a change is acted on is measured by `make bench`. Only the watch can
// notice the changes these tests make (no reconcile pass runs), so a
// generous deadline proves the watch as well as a tight one would.
const watchDeadline = 10 * time.Second

// waitFor waits until cond holds, and fails the test at the deadline with
// the list as it stands.
func waitFor(t *testing.T, s *Source, within time.Duration, what string, cond func() bool) {
	t.Helper()
	eventually.Nil(t, within, what, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("list %q, error %v", current(s), s.Err())
	})
}

// watched starts a source on path, reads it once and starts its watch.
// No reconcile pass runs: only the watch can notice what the steps do.
func watched(t *testing.T, path string) (*Source, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s := New(fileConfig(path, 0), slog.New(slog.NewTextHandler(logs, nil)), nil)
	s.refresh(false)
	if current(s) != wantA {
		t.Fatalf("initial list %q (error %v)", current(s), s.Err())
	}
	watch(t, s)
	return s, logs
}

type watchStep struct {
	name string
	do   func(t *testing.T, dir string)
	// want is the list in force afterwards; wantErr, when set, is what
	// the rejection must say instead (the list stays as it was).
	want, wantErr string
}

func TestWatchSeesChanges(t *testing.T) {
	tests := []struct {
		name string
		// setup lays out list A under dir and returns the members path.
		setup func(t *testing.T, dir string) string
		steps []watchStep
		// logsOnce must each appear exactly once in the log at the end.
		logsOnce []string
	}{{
		name: "ConfigMap volume ..data swap",
		setup: func(t *testing.T, dir string) string {
			fstest.Mkdir(t, filepath.Join(dir, "..2026_11_21_a"))
			fstest.WriteInPlace(t, filepath.Join(dir, "..2026_11_21_a", "members"), listA)
			fstest.Symlink(t, "..2026_11_21_a", filepath.Join(dir, "..data"))
			fstest.Symlink(t, "..data/members", filepath.Join(dir, "members"))
			return filepath.Join(dir, "members")
		},
		steps: []watchStep{
			{name: "first update", want: wantB, do: func(t *testing.T, dir string) {
				configMapUpdate(t, dir, "..2026_11_21_a", "..2026_11_21_b", listB)
			}},
			{name: "second update", want: wantC, do: func(t *testing.T, dir string) {
				configMapUpdate(t, dir, "..2026_11_21_b", "..2026_11_21_c", listC)
			}},
			{name: "update to a bad list", wantErr: "must be an IPv4 or IPv6 address", do: func(t *testing.T, dir string) {
				configMapUpdate(t, dir, "..2026_11_21_c", "..2026_11_21_d", "badCM\n")
			}},
		},
	}, {
		name: "symlink chain into other directories, target edited there",
		setup: func(t *testing.T, dir string) string {
			fstest.Mkdir(t, filepath.Join(dir, "etc"))
			fstest.Mkdir(t, filepath.Join(dir, "hop"))
			fstest.Mkdir(t, filepath.Join(dir, "data"))
			fstest.WriteInPlace(t, filepath.Join(dir, "data", "list"), listA)
			fstest.Symlink(t, filepath.Join(dir, "data", "list"), filepath.Join(dir, "hop", "link"))
			fstest.Symlink(t, "../hop/link", filepath.Join(dir, "etc", "members"))
			return filepath.Join(dir, "etc", "members")
		},
		steps: []watchStep{
			{name: "edited in place", want: wantB, do: func(t *testing.T, dir string) {
				fstest.WriteInPlace(t, filepath.Join(dir, "data", "list"), listB)
			}},
			{name: "replaced by rename", want: wantC, do: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "data", "list"), listC)
			}},
		},
	}, {
		name: "symlink re-pointed into another directory, then target edited there",
		setup: func(t *testing.T, dir string) string {
			fstest.Mkdir(t, filepath.Join(dir, "old"))
			fstest.WriteInPlace(t, filepath.Join(dir, "old", "list"), listA)
			fstest.Symlink(t, filepath.Join(dir, "old", "list"), filepath.Join(dir, "members"))
			return filepath.Join(dir, "members")
		},
		steps: []watchStep{
			{name: "re-pointed", want: wantB, do: func(t *testing.T, dir string) {
				fstest.Mkdir(t, filepath.Join(dir, "new"))
				fstest.WriteInPlace(t, filepath.Join(dir, "new", "list"), listB)
				fstest.Repoint(t, filepath.Join(dir, "new", "list"), filepath.Join(dir, "members"))
			}},
			{name: "new target edited", want: wantC, do: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "new", "list"), listC)
			}},
		},
	}, {
		name: "modification time in the future",
		setup: func(t *testing.T, dir string) string {
			writeSettled(t, filepath.Join(dir, "members"), listA)
			return filepath.Join(dir, "members")
		},
		steps: []watchStep{
			{name: "replaced by a file dated an hour ahead", want: wantB, do: func(t *testing.T, dir string) {
				tmp := filepath.Join(dir, ".members.tmp")
				fstest.WriteInPlace(t, tmp, listB)
				setFuture(t, tmp)
				if err := os.Rename(tmp, filepath.Join(dir, "members")); err != nil {
					t.Fatal(err)
				}
			}},
			{name: "edited in place, dated ahead again", want: wantC, do: func(t *testing.T, dir string) {
				fstest.WriteInPlace(t, filepath.Join(dir, "members"), listC)
				setFuture(t, filepath.Join(dir, "members"))
			}},
		},
	}, {
		name: "directory removed and re-created at once",
		setup: func(t *testing.T, dir string) string {
			fstest.Mkdir(t, filepath.Join(dir, "list"))
			writeSettled(t, filepath.Join(dir, "list", "members"), listA)
			return filepath.Join(dir, "list", "members")
		},
		steps: []watchStep{
			{name: "rm -rf, mkdir, write", want: wantB, do: func(t *testing.T, dir string) {
				if err := os.RemoveAll(filepath.Join(dir, "list")); err != nil {
					t.Fatal(err)
				}
				fstest.Mkdir(t, filepath.Join(dir, "list"))
				write(t, filepath.Join(dir, "list", "members"), listB)
			}},
			{name: "then edited", want: wantC, do: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "list", "members"), listC)
			}},
		},
	}, {
		name: "directory removed, re-created later",
		setup: func(t *testing.T, dir string) string {
			fstest.Mkdir(t, filepath.Join(dir, "list"))
			writeSettled(t, filepath.Join(dir, "list", "members"), listA)
			return filepath.Join(dir, "list", "members")
		},
		steps: []watchStep{
			{name: "rm -rf", wantErr: "cannot be read", do: func(t *testing.T, dir string) {
				if err := os.RemoveAll(filepath.Join(dir, "list")); err != nil {
					t.Fatal(err)
				}
			}},
			{name: "mkdir, write", want: wantB, do: func(t *testing.T, dir string) {
				fstest.Mkdir(t, filepath.Join(dir, "list"))
				write(t, filepath.Join(dir, "list", "members"), listB)
			}},
			{name: "then edited", want: wantC, do: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "list", "members"), listC)
			}},
		},
		logsOnce: []string{"members file watch lost", "members file watch restored"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, logs := watched(t, tt.setup(t, dir))
			for _, step := range tt.steps {
				step.do(t, dir)
				if step.wantErr != "" {
					waitFor(t, s, watchDeadline, step.name, func() bool {
						err := s.Err()
						return err != nil && strings.Contains(err.Error(), step.wantErr)
					})
					continue
				}
				waitFor(t, s, watchDeadline, step.name, func() bool { return current(s) == step.want && s.Err() == nil })
			}
			for _, line := range tt.logsOnce {
				if n := strings.Count(logs.String(), line); n != 1 {
					t.Errorf("%q logged %d times, want once; log:\n%s", line, n, logs.String())
				}
			}
		})
	}
}

// Steady writes to other files in the watched directory must not hold
// off the read of the members file (the debounce has an upper bound).
func TestWatchSeesChangesInABusyDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "members")
	writeSettled(t, path, listA)
	s, _ := watched(t, path)

	ctx, cancel := context.WithCancel(context.Background())
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = os.WriteFile(filepath.Join(dir, "state.json"), []byte(time.Now().String()), 0o600)
			}
		}
	}()
	defer func() { cancel(); <-busy }()

	write(t, path, listB)
	waitFor(t, s, watchDeadline, "change in a busy directory", func() bool { return current(s) == wantB })
}

// A reconcile pass reads a file dated in the future at once: only a
// modification within the last moments holds a pass's read off.
func TestRefreshReadsAFileDatedInTheFuture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "members")
	write(t, path, listA)
	setFuture(t, path)
	s := New(fileConfig(path, 0), slog.New(slog.NewTextHandler(&logBuffer{}, nil)), nil)
	if !s.Refresh() || current(s) != wantA {
		t.Errorf("a file dated an hour ahead was not read: %q (error %v)", current(s), s.Err())
	}
}

// A file renamed over the members file is complete and read at once; a
// write in place still waits for the directory to settle. The settle time
// is an hour here, so only the rename can be read within the deadline.
func TestWatchReadsAFileRenamedOverItAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "members")
	writeSettled(t, path, listA)
	s := New(fileConfig(path, 0), slog.New(slog.NewTextHandler(&logBuffer{}, nil)), nil)
	s.watch.Settle = time.Hour
	s.refresh(false)
	watch(t, s)

	tmp := filepath.Join(dir, ".members.tmp")
	fstest.WriteInPlace(t, tmp, listB)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, watchDeadline, "a file renamed over the list", func() bool { return current(s) == wantB })

	fstest.WriteInPlace(t, path, listC)
	waitFor(t, s, watchDeadline, "the watch noticing a write in place", s.watch.Pending)
	if current(s) != wantB {
		t.Fatalf("a write in place was read before the directory settled: list %q", current(s))
	}
}

// watch runs s.Watch until the test ends, then checks that it stopped
// without an error; it returns once the watch is set up.
func watch(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	<-s.watch.Ready()
}
