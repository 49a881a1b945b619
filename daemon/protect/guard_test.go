package protect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/eventually"
)

const annotation = "etcdlet.io/disable-protection"

// recorder collects reported changes.
type recorder struct {
	mu      sync.Mutex
	changes []Change
}

func (r *recorder) add(c Change) { r.mu.Lock(); r.changes = append(r.changes, c); r.mu.Unlock() }

func (r *recorder) count(a Action) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

func (r *recorder) last() Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes[len(r.changes)-1]
}

// running starts a guard on a fresh directory with one managed file.
func running(t *testing.T, enabled bool) (*Guard, *recorder, string) {
	return runningSettle(t, enabled, 0)
}

// runningSettle is running with a settle time (0: the default).
func runningSettle(t *testing.T, enabled bool, settle time.Duration) (*Guard, *recorder, string) {
	t.Helper()
	rec := &recorder{}
	g := New(Options{Enabled: enabled, Settle: settle, Interval: 200 * time.Millisecond, OnChange: rec.add,
		OptOut: func(_ string, b []byte) bool { return strings.Contains(string(b), annotation) }})
	path := filepath.Join(t.TempDir(), "manifests", "etcd.yaml")
	if _, _, err := g.Write(path, []byte("image: etcd\nname: etcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = g.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		// A guard stuck in a check (a read blocked on a FIFO) fails the
		// test instead of hanging it.
		select {
		case <-done:
		case <-time.After(deadline):
			t.Errorf("the guard did not stop within %s: a check is blocked", deadline)
		}
	})
	return g, rec, path
}

// deadline is when eventually gives up: a failure deadline, not a speed
// figure, so that a loaded machine does not fail a guard that works.
const deadline = 30 * time.Second

func content(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestEditDeleteAndModeAreReverted(t *testing.T) {
	_, rec, path := running(t, true)
	want := "image: etcd\nname: etcd\n"

	if err := os.WriteFile(path, []byte("image: evil\nname: etcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "edit reverted", func() bool { return content(path) == want && rec.count(Reverted) == 1 })
	if d := rec.last().Diff; !strings.Contains(d, "-image: etcd\n+image: evil\n") {
		t.Errorf("the report's diff does not show the edit:\n%s", d)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "deletion restored", func() bool { return content(path) == want && rec.count(Restored) == 1 })
	if d := rec.last().Diff; !strings.Contains(d, "+++ /dev/null") {
		t.Errorf("a deletion's diff should end in /dev/null:\n%s", d)
	}

	if err := os.RemoveAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "removed directory restored", func() bool { return content(path) == want && rec.count(Restored) == 2 })

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "mode put back", func() bool { return modeOf(path) == 0o600 })
	if rec.count(Allowed) != 0 {
		t.Error("nothing may be allowed with protection on and no opt-out")
	}
}

func TestOptOutLeavesTheFileToTheOperator(t *testing.T) {
	g, rec, path := running(t, true)
	mine := "image: etcd\nname: etcd\n"
	theirs := "metadata:\n  annotations:\n    " + annotation + ": \"\"\nimage: debug\nname: etcd\n"
	if err := os.WriteFile(path, []byte(theirs), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "reported as allowed", func() bool { return rec.count(Allowed) == 1 })
	g.Check()
	g.Check()
	if rec.count(Allowed) != 1 {
		t.Error("an allowed change must be reported once")
	}
	if content(path) != theirs || !g.OptedOut(path) {
		t.Fatal("an opted-out file was changed")
	}
	if _, _, err := g.Write(path, []byte(mine), 0o600); !errors.Is(err, ErrOptedOut) || content(path) != theirs {
		t.Fatalf("Write over an opted-out file: %v", err)
	}
	// Without the annotation the file is etcdlet's again.
	if err := os.WriteFile(path, []byte("image: debug\nname: etcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "reverted after the annotation went", func() bool { return content(path) == mine && rec.count(Reverted) == 1 })
}

// An operator writing the file in place (truncate, then write in pieces,
// as editors and "echo >" do) is not interrupted: the guard acts on the
// finished content, here an opt-out that only the last piece completes.
func TestInPlaceWriteIsJudgedWhenFinished(t *testing.T) {
	// The pauses between the pieces are a hundredth of the settle time, so
	// that even a machine too loaded to wake the writer on time does not
	// make the file look finished half-way.
	const settle, pieces = 2 * time.Second, 30
	const pause = settle / 100
	g, rec, path := runningSettle(t, true, settle)
	theirs := "image: debug\nname: etcd\nmetadata:\n  annotations:\n    " + annotation + ": \"\"\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The pieces span three periodic check intervals (200ms): checks land
	// mid-write, and each sees a file that does not hold still.
	for i := range pieces {
		lo, hi := i*len(theirs)/pieces, (i+1)*len(theirs)/pieces
		if _, err := f.WriteString(theirs[lo:hi]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pause)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "the finished write reported as allowed", func() bool { return rec.count(Allowed) == 1 })
	if got := content(path); got != theirs {
		t.Fatalf("the operator's in-place write was cut off or reverted; found:\n%s", got)
	}
	if n := rec.count(Reverted) + rec.count(Restored); n != 0 {
		t.Errorf("%d reverts of a file being written", n)
	}
	if !g.OptedOut(path) {
		t.Error("the finished file does not opt out")
	}
}

// A file truncated by a writer that then stalls (a loaded machine
// deschedules it) holds still, empty, for longer than the settle time; the
// guard gives an empty file longer (EmptySettle), so the write that follows
// is judged, not reverted away. A file that stays empty is reverted.
func TestTruncatedFileIsGivenTimeToBeWritten(t *testing.T) {
	const settle = 50 * time.Millisecond
	g, rec, path := runningSettle(t, true, settle)
	theirs := "image: debug\nname: etcd\nmetadata:\n  annotations:\n    " + annotation + ": \"\"\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * settle) // a stalled writer: well past the settle time
	if _, err := f.WriteString(theirs); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "the finished write reported as allowed", func() bool { return rec.count(Allowed) == 1 })
	if got := content(path); got != theirs {
		t.Fatalf("the operator's write after a stall was reverted; found:\n%s", got)
	}
	if !g.OptedOut(path) {
		t.Error("the finished file does not opt out")
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "a file left empty is reverted", func() bool { return rec.count(Reverted) == 1 })
}

func TestProtectionOffLeavesChanges(t *testing.T) {
	g, rec, path := running(t, false)
	edited := "image: etcd\nname: etcd\nextra: true\n"
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "reported as allowed", func() bool { return rec.count(Allowed) == 1 })
	if content(path) != edited {
		t.Fatal("an edit was reverted with protection off")
	}
	// The same rendering again does not overwrite the operator's edit...
	if changed, _, err := g.Write(path, []byte("image: etcd\nname: etcd\n"), 0o600); err != nil || changed || content(path) != edited {
		t.Fatalf("unchanged rendering rewrote the file (changed=%v, err=%v)", changed, err)
	}
	// ...a new one does.
	if changed, _, err := g.Write(path, []byte("image: etcd:new\nname: etcd\n"), 0o600); err != nil || !changed {
		t.Fatalf("a new rendering was not written (changed=%v, err=%v)", changed, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, deadline, "deletion reported", func() bool { return rec.count(Allowed) == 2 })
	if _, err := os.Stat(path); err == nil {
		t.Error("a deletion was undone with protection off")
	}
}

func TestOwnWritesAreNeverReported(t *testing.T) {
	g, rec, path := running(t, true)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				content := []byte(strings.Repeat("x", i*50+j) + "\n")
				changed, previous, err := g.Write(path, content, 0o600)
				if err != nil {
					t.Error(err)
					return
				}
				if changed && previous == nil {
					t.Error("an existing file reported no previous content")
				}
			}
		})
	}
	wg.Wait()
	final := content(path)
	g.Check()
	if rec.count(Reverted)+rec.count(Restored)+rec.count(Allowed) != 0 {
		t.Errorf("own writes were reported: %+v", rec.changes)
	}
	if content(path) != final {
		t.Error("the last own write was reverted")
	}
}

func TestReleaseKeepsTheFileAndStopsProtecting(t *testing.T) {
	g, rec, path := running(t, true)
	keep := filepath.Join(t.TempDir(), "kept", "etcd.yaml.stopped")
	if err := os.MkdirAll(filepath.Dir(keep), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := g.Release(path, keep); err != nil {
		t.Fatal(err)
	}
	if content(keep) != "image: etcd\nname: etcd\n" {
		t.Error("the released file was not kept")
	}
	g.Check()
	if _, err := os.Stat(path); err == nil || rec.count(Restored) != 0 {
		t.Error("a released file was restored")
	}
}

func modeOf(path string) os.FileMode {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Mode().Perm()
}

func TestSetEnabledRevertsAnEditMadeWhileOff(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etcd.yaml")
	changes := make(chan Change, 10)
	g := New(Options{Enabled: false, Interval: time.Hour, Settle: 10 * time.Millisecond,
		OnChange: func(c Change) { changes <- c }})
	if _, _, err := g.Write(path, []byte("etcdlet's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = g.Run(ctx) }()

	if err := os.WriteFile(path, []byte("operator's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changes, Allowed)
	if !g.SetEnabled(true) || g.SetEnabled(true) {
		t.Fatal("SetEnabled(true) must report a change once, then none")
	}
	waitChange(t, changes, Reverted)
	if got, _ := os.ReadFile(path); string(got) != "etcdlet's\n" {
		t.Fatalf("after protection was switched on the file holds %q, want etcdlet's content back", got)
	}
}

func waitChange(t *testing.T, changes <-chan Change, want Action) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c := <-changes:
			if c.Action == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %s change reported within 10s", want)
		}
	}
}

// A change someone else made that etcdlet's own write undoes before the
// periodic check saw it (the agent's pass rewrote a manifest that was
// deleted a moment before) is reported all the same: restored, or
// reverted. etcdlet's own new rendering is no one else's change.
func TestWriteReportsTheChangeItUndoes(t *testing.T) {
	const ours = "image: etcd\nname: etcd\n"
	for _, tc := range []struct {
		name    string
		meddle  func(path string) error
		content string
		want    Action
	}{
		{"deleted", os.Remove, ours, Restored},
		{"edited", func(p string) error { return os.WriteFile(p, []byte("image: debug\n"), 0o600) }, ours, Reverted},
		{"etcdlet's own new rendering", func(string) error { return nil }, "image: etcd:newer\nname: etcd\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			g := New(Options{Enabled: true, Interval: time.Hour, OnChange: rec.add}) // the check never comes first
			path := filepath.Join(t.TempDir(), "etcd.yaml")
			if _, _, err := g.Write(path, []byte(ours), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tc.meddle(path); err != nil {
				t.Fatal(err)
			}
			if _, _, err := g.Write(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			switch got := len(rec.changes); {
			case tc.want == "" && got != 0:
				t.Errorf("reported %v for etcdlet's own change", rec.changes)
			case tc.want != "" && (got != 1 || rec.last().Action != tc.want):
				t.Errorf("reported %v, want one %s", rec.changes, tc.want)
			}
		})
	}
}
