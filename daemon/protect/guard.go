// Package protect keeps the files etcdlet renders (the etcd static-pod
// manifest) equal to what etcdlet last wrote. An edit or deletion made by
// anyone else is detected (fsnotify on the files' directories, plus a
// periodic check for what a watch can miss), reverted, and reported: a log
// line with a unified diff and a callback for metrics and events. This is
// the node-side counterpart of etcd-druid's component-protection webhook:
// protection can be switched off as a whole, and a file whose content
// carries an opt-out (for the manifest the annotation
// etcdlet.io/disable-protection, like druid's
// druid.gardener.cloud/disable-etcd-component-protection) is left to the
// operator while it carries it.
//
// A managed file is read only if the path itself is a regular file of at
// most maxManagedFile bytes: never through a symlink, never blocking on a
// FIFO. Anything else found there (a symlink, a FIFO, a directory, a file
// over the cap) is foreign content that is not read: it never opts out and
// is replaced by the rendered file like any edit.
package protect

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// ErrOptedOut is returned by Write for a file whose content on disk opts
// out of protection: the operator took it over, and etcdlet leaves it.
var ErrOptedOut = errors.New("the file opts out of protection; left to the operator")

// Action is what the guard did about a change made by someone else.
type Action string

// Actions.
const (
	Reverted Action = "reverted" // edited content (or mode) put back
	Restored Action = "restored" // a deleted file written again
	Allowed  Action = "allowed"  // left alone: protection off, or the file opts out
)

// Change is a change to a managed file made by someone else.
type Change struct {
	Path   string
	Action Action
	// Diff is a unified diff from the expected content to what was found
	// (/dev/null for a deleted file). Where there is nothing to diff it
	// says what was found instead: a mode, something other than a regular
	// file, a file over the read cap, or sides too large to diff (see
	// UnifiedDiff).
	Diff string
}

// Options configure a guard.
type Options struct {
	// Enabled: revert changes. When false nothing is reverted, and Write
	// rewrites a file only when etcdlet's own content changed.
	Enabled bool
	// Interval is the periodic check besides the file watch.
	Interval time.Duration
	// Settle is how long a changed file must hold still before the guard
	// acts on it; DefaultSettle when zero.
	Settle time.Duration
	Log    *slog.Logger
	// OptOut reports whether a file's current content opts out of
	// protection. May be nil.
	OptOut func(path string, onDisk []byte) bool
	// OnChange is called for every change made by someone else. May be nil.
	OnChange func(Change)
}

// Guard keeps the files etcdlet renders equal to what etcdlet last wrote.
type Guard struct {
	opts Options
	// enabled starts as opts.Enabled; SetEnabled switches it at run time
	// (etcd-druid's protection annotation on the Etcd resource).
	enabled atomic.Bool

	mu    sync.Mutex
	files map[string]*managed
	kick  chan struct{} // a Write added a directory to watch
}

type managed struct {
	content []byte
	mode    fs.FileMode
	// reported is what was found when a change was last reported as
	// allowed, so that a change left alone is reported once, not on every
	// check.
	reported *found
}

// New returns a guard; Run starts watching.
func New(opts Options) *Guard {
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	g := &Guard{opts: opts, files: map[string]*managed{}, kick: make(chan struct{}, 1)}
	g.enabled.Store(opts.Enabled)
	return g
}

// SetEnabled switches reverting on or off and reports whether that
// changed anything. Switched on, the files are checked at once: an edit
// made while protection was off is reverted now, not on the next interval.
func (g *Guard) SetEnabled(on bool) bool {
	if g.enabled.Swap(on) == on {
		return false
	}
	if on {
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// Enabled reports whether changes are reverted.
func (g *Guard) Enabled() bool { return g.enabled.Load() }

// Write is etcdlet's own write: the file gets content and mode atomically,
// and from now on that is what it must be. It reports whether the bytes on
// disk changed and what they were before (nil for no file, and for
// something that is not read: not a regular file, or over the cap). A file
// that currently opts out is left alone (ErrOptedOut). With protection
// off, a file whose expected content is unchanged is not rewritten, so an
// operator's edit stays until etcdlet's own rendering changes. The write
// replaces whatever is at path (a symlink itself, never its target).
func (g *Guard) Write(path string, content []byte, mode fs.FileMode) (changed bool, previous []byte, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, err := readFound(path)
	if err != nil {
		return false, nil, fmt.Errorf("read %s: %w", path, err)
	}
	// The cheap check first: on most passes the file is what etcdlet
	// renders, which never carries an opt-out.
	if f.matches(&managed{content: content, mode: mode}) {
		g.track(path, content, mode)
		return false, f.data, nil
	}
	if f.readable() && g.optsOut(path, f.data) {
		g.track(path, content, mode)
		return false, nil, ErrOptedOut
	}
	var expected []byte
	m, tracked := g.files[path]
	if tracked {
		expected = m.content
	}
	if !f.missing && !g.Enabled() && expected != nil && bytes.Equal(expected, content) {
		g.track(path, content, mode)
		return false, f.data, nil
	}
	if err := writeFile(path, content, mode); err != nil {
		return false, nil, err
	}
	if tracked && g.Enabled() && !f.matches(m) {
		// Someone else changed the file since etcdlet wrote it, and this
		// write undoes that before the periodic check came to it: it is
		// reported all the same, as the check would have.
		g.reportUndone(path, m, f)
	}
	g.track(path, content, mode)
	return true, f.data, nil
}

// Release stops managing a file and moves it (if present) to keepAt; it
// never deletes a file it can keep. keepAt "" leaves the file where it is.
// What is not read (see readFound) is renamed to keepAt as it is; where
// that fails (keepAt on another file system) a symlink, FIFO, socket or
// device is removed, having no content of its own to keep, and anything
// else is left in place with an error.
func (g *Guard) Release(path, keepAt string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.files, path)
	if keepAt == "" {
		return nil
	}
	f, err := readFound(path)
	if err != nil {
		return fmt.Errorf("release %s: %w", path, err)
	}
	if f.missing {
		return nil
	}
	if f.foreign != "" {
		return g.releaseForeign(path, keepAt, f)
	}
	// Copy, then remove: keepAt may be on another file system than path.
	if err := atomicfile.Write(keepAt, f.data, 0o600); err != nil {
		return fmt.Errorf("release %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("release %s: %w", path, err)
	}
	return nil
}

// releaseForeign moves away what Release found but did not read, so that
// the kubelet no longer finds it at path. The caller holds g.mu.
func (g *Guard) releaseForeign(path, keepAt string, f found) error {
	renameErr := os.Rename(path, keepAt)
	if renameErr == nil || errors.Is(renameErr, fs.ErrNotExist) {
		return nil
	}
	if f.mode.IsRegular() || f.mode.IsDir() {
		return fmt.Errorf("release %s: it %s, and cannot be moved to %s: %w", path, f.foreign, keepAt, renameErr)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release %s: it %s: %w", path, f.foreign, err)
	}
	g.opts.Log.Warn("a released file was not a regular file and could not be moved; removed", "file", path,
		"found", f.foreign, "keepAt", keepAt, "error", renameErr)
	return nil
}

// OptedOut reports whether a managed file currently opts out.
func (g *Guard) OptedOut(path string) bool {
	f, err := readFound(path)
	return err == nil && f.readable() && g.optsOut(path, f.data)
}

// Check compares every managed file with what etcdlet wrote and acts on
// a difference. It may wait for a file to hold still (see checkFile).
func (g *Guard) Check() {
	g.mu.Lock()
	paths := make([]string, 0, len(g.files))
	for path := range g.files {
		paths = append(paths, path)
	}
	g.mu.Unlock()
	for _, path := range paths {
		g.checkFile(path)
	}
}

// checkFile acts on a managed file that differs from what etcdlet wrote.
// Someone writing it in place (an editor, "echo >", os.WriteFile) truncates
// it first and writes after: acting on that half-written state would both
// misread the content (an opt-out annotation not written yet) and cut the
// writer off, its remaining writes landing in the file the atomic revert
// just unlinked. So a difference is acted on only when the file held
// still for the settle time; a file still changing is left to the event
// its next write brings, or to the periodic check.
func (g *Guard) checkFile(path string) {
	first, ok := g.differs(path)
	if !ok {
		return
	}
	settle := g.opts.Settle
	if first.readable() && len(first.data) == 0 {
		// Found empty: truncated by a writer that has not written yet,
		// most likely (nobody means a manifest to be empty). On a loaded
		// machine that writer may not run again for longer than the
		// settle time.
		settle = max(settle, EmptySettle)
	}
	time.Sleep(settle)
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.files[path]
	if m == nil {
		return // released meanwhile
	}
	now, err := readFound(path)
	if err != nil {
		g.opts.Log.Warn("cannot read a protected file", "file", path, "error", err)
		return
	}
	if now.matches(m) {
		m.reported = nil // e.g. etcdlet's own write meanwhile
		return
	}
	if !now.same(first) {
		return
	}
	g.act(path, m, now)
}

// differs reads a managed file and reports whether it differs from what
// etcdlet wrote.
func (g *Guard) differs(path string) (found, bool) {
	f, err := readFound(path)
	if err != nil {
		g.opts.Log.Warn("cannot read a protected file", "file", path, "error", err)
		return found{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.files[path]
	if m == nil {
		return found{}, false
	}
	if f.matches(m) {
		m.reported = nil
		return found{}, false
	}
	return f, true
}

// act reverts, restores or (protection off, opted out) reports a change
// someone else made. The caller holds g.mu.
func (g *Guard) act(path string, m *managed, f found) {
	diff := describe(path, m, f)
	if !g.Enabled() || (f.readable() && g.optsOut(path, f.data)) {
		if m.reported != nil && m.reported.sameContent(f) {
			return
		}
		m.reported = &f
		why := "protection is off"
		if g.Enabled() {
			why = "the file opts out of protection"
		}
		g.opts.Log.Info("a managed file was changed by someone else; left alone: "+why, "file", path, "action", string(Allowed), "diff", diff)
		g.report(Change{Path: path, Action: Allowed, Diff: diff})
		return
	}
	if err := writeFile(path, m.content, m.mode); err != nil {
		g.opts.Log.Error("cannot revert a change to a protected file", "file", path, "error", err)
		return
	}
	g.reportUndone(path, m, f)
}

// reportUndone logs and reports that someone else's change to a managed
// file (f, found where m was written) was undone: reverted, or restored
// when the file was gone. The caller holds g.mu.
func (g *Guard) reportUndone(path string, m *managed, f found) {
	action := Reverted
	if f.missing {
		action = Restored
	}
	m.reported = nil
	g.opts.Log.Warn("a managed file was changed by someone else; reverted", "file", path, "action", string(action), "diff", describe(path, m, f))
	g.report(Change{Path: path, Action: action, Diff: describe(path, m, f)})
}

// describe is the report of a change: a unified diff from etcdlet's
// content to what was found, or what was found where there is nothing to
// diff.
func describe(path string, m *managed, f found) string {
	switch {
	case f.missing:
		return UnifiedDiff(path+" (written by etcdlet)", "/dev/null", m.content, nil)
	case f.foreign != "":
		return fmt.Sprintf("%s %s; not read, so no diff", path, f.foreign)
	}
	if diff := UnifiedDiff(path+" (written by etcdlet)", path+" (found)", m.content, f.data); diff != "" {
		return diff
	}
	return fmt.Sprintf("mode %v, want %v", f.mode, m.mode)
}

// found is a managed file as found on disk: missing, read (data), or
// foreign.
type found struct {
	data []byte
	// mode is the permission bits of a file read; of a foreign one, its
	// whole mode (type included).
	mode    fs.FileMode
	modTime time.Time
	size    int64
	missing bool
	// foreign says why the path was not read, as the rest of a sentence
	// about it ("is a named pipe, want a regular file"): it is not a
	// regular file, or is over maxManagedFile. Its content is unknown, so
	// it never matches and never opts out: a revert replaces it.
	foreign string
}

// maxManagedFile bounds what is read of a managed file. A manifest is a
// few KiB, so 1 MiB is far above any rendering. A larger file is never
// read (its size on the open descriptor says so before any read): it is
// foreign content, reverted like an edit and reported without a diff.
const maxManagedFile = 1 << 20

// readFound reads a managed file as it is on disk, with
// config.ReadRegularNoFollow: it never follows a symlink at path and never
// blocks (a FIFO put in a manifest's place must not hang the guard with
// its lock held). A symlink, FIFO, directory or other non-regular file,
// and a file over maxManagedFile, is returned as foreign, described by
// lstat (which follows nothing); an error is left for what cannot be
// looked at at all (permissions, I/O). Every read of a managed file goes
// through here.
func readFound(path string) (found, error) {
	data, fi, err := config.ReadRegularNoFollow(path, maxManagedFile)
	switch {
	case err == nil:
		return found{data: data, mode: fi.Mode().Perm(), modTime: fi.ModTime(), size: fi.Size()}, nil
	case errors.Is(err, fs.ErrNotExist):
		return found{missing: true}, nil
	case errors.Is(err, config.ErrNotRegular), errors.Is(err, config.ErrTooLarge):
		return foreignFound(path, err.Error())
	default:
		return found{}, err // callers name the path
	}
}

// foreignFound describes a path that readFound does not read. Should the
// path change between the read and the lstat, the two checks around the
// settle time differ and nothing is done until it holds still.
func foreignFound(path, why string) (found, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return found{missing: true}, nil
	}
	if err != nil {
		return found{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// Where it points is worth a log line; it is never followed.
		if target, err := os.Readlink(path); err == nil {
			why = fmt.Sprintf("is a symbolic link to %q, want a regular file", target)
		}
	}
	return found{mode: fi.Mode(), modTime: fi.ModTime(), size: fi.Size(), foreign: why}, nil
}

// readable reports whether the file was found and read.
func (f found) readable() bool { return !f.missing && f.foreign == "" }

// matches reports whether the file is what etcdlet wrote.
func (f found) matches(m *managed) bool {
	return f.readable() && f.mode == m.mode && bytes.Equal(f.data, m.content)
}

// same reports whether two reads found the file unchanged.
func (f found) same(o found) bool {
	return f.sameContent(o) && f.mode == o.mode && f.modTime.Equal(o.modTime) && f.size == o.size
}

// sameContent reports whether two reads found the same content (the mode
// aside): a change left alone is reported again only when this changes.
func (f found) sameContent(o found) bool {
	return f.missing == o.missing && f.foreign == o.foreign && bytes.Equal(f.data, o.data)
}

func (g *Guard) report(c Change) {
	if g.opts.OnChange != nil {
		g.opts.OnChange(c)
	}
}

func (g *Guard) optsOut(path string, onDisk []byte) bool {
	return g.opts.OptOut != nil && g.opts.OptOut(path, onDisk)
}

func (g *Guard) track(path string, content []byte, mode fs.FileMode) {
	m, ok := g.files[path]
	if !ok {
		m = &managed{}
		g.files[path] = m
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
	m.content, m.mode = bytes.Clone(content), mode
}

// writeFile writes atomically, recreating a directory that was removed.
func writeFile(path string, content []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, content, mode)
}
