// Package filewatch notices, with fsnotify, every change to the file a
// path names: written in place, replaced by a rename, or re-pointed
// through symlinks (a Kubernetes ConfigMap volume). The members file and
// the configuration file are watched with it.
package filewatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch calls Changed whenever the file Path names may have changed, once
// its directories have been quiet for Settle. It watches directories, not
// the file: tools replace such files by renaming a new one over them,
// which a watch on the old inode misses. When the path is a symlink (a
// chain, a ConfigMap volume's ..data), the directory of every hop is
// watched too, and the set is worked out again after every event. Any
// event in those directories leads to a call once the burst is over, so
// Changed must itself tell whether the content changed.
type Watch struct {
	// What names the file in the log ("members file").
	What string
	// Path returns the path to watch now; "" for none. It may change:
	// Resync has the watch follow it.
	Path func() string
	// Settle is how long the file's directories must be free of events
	// before Changed is called: a tool that writes in several steps
	// (truncate, then write) must not be read half-way. A file renamed
	// over the path is complete and is read at once. Set before Run.
	Settle time.Duration
	// Changed is called on Run's goroutine after a settled change.
	Changed func()
	Log     *slog.Logger

	resync  chan struct{}
	ready   chan struct{}
	pending atomic.Bool
}

// settleLimit bounds the wait for quiet, in settle times, so that steady
// events on other files in a watched directory cannot hold a read off.
const settleLimit = 4

// New returns a watch; Run starts it.
func New(what string, path func() string, settle time.Duration, log *slog.Logger, changed func()) *Watch {
	return &Watch{What: what, Path: path, Settle: settle, Changed: changed, Log: log,
		resync: make(chan struct{}, 1), ready: make(chan struct{})}
}

// Resync has Run check its watches against the path as it is now (after
// the path changed, or a directory was removed and re-created, which
// loses its watch). It never blocks.
func (w *Watch) Resync() {
	select {
	case w.resync <- struct{}{}:
	default:
	}
}

// Pending tells whether the watch saw events it has not called Changed
// after yet: the file may be mid-write.
func (w *Watch) Pending() bool { return w.pending.Load() }

// Ready is closed once Run has set up its watches.
func (w *Watch) Ready() <-chan struct{} { return w.ready }

// Run watches until ctx ends.
func (w *Watch) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.What, err)
	}
	defer fw.Close()
	dirs := newDirWatch(fw, w.Log, w.What)
	deb := newDebounce(w.Settle, settleLimit*w.Settle)
	defer deb.stop()
	defer w.pending.Store(false)
	path := func() string {
		if p := w.Path(); p != "" {
			return filepath.Clean(p)
		}
		return ""
	}
	dirs.sync(path())
	close(w.ready)
	arm := func() {
		w.pending.Store(true)
		deb.arm(time.Now())
	}
	changed := func() {
		// Follow a re-pointed symlink before reading, so that a later
		// edit at the new target is seen too.
		dirs.sync(path())
		w.Changed()
		w.pending.Store(false)
	}
	var previous fsnotify.Event
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.resync:
			if dirs.sync(path()) {
				arm()
			}
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			dirs.saw(ev)
			replaced := renamedOver(previous, ev, path())
			previous = ev
			if replaced {
				// A file renamed over the watched one is complete: the
				// tool wrote it under another name first. Read it now;
				// nothing is left to settle.
				deb.stop()
				deb.fired()
				changed()
				continue
			}
			arm()
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			// Events may have been dropped (queue overflow): read anyway.
			w.Log.Warn(w.What+" watch error; reading it again", "error", err)
			arm()
		case <-deb.C():
			deb.fired()
			changed()
		}
	}
}

// renamedOver reports whether ev, following previous, is a file renamed
// over file within its directory: inotify reports the move as
// IN_MOVED_FROM on the old name, then IN_MOVED_TO on the new one, which
// fsnotify delivers as Rename, then Create. A Create without that Rename
// is a file created in place, which may still be written to.
func renamedOver(previous, ev fsnotify.Event, file string) bool {
	return file != "" && ev.Name == file && ev.Op == fsnotify.Create &&
		previous.Op == fsnotify.Rename && previous.Name != file && filepath.Dir(previous.Name) == filepath.Dir(file)
}

// maxSymlinks is the kernel's limit on symlinks followed in one lookup.
const maxSymlinks = 40

// resolution is what a file path depends on right now.
type resolution struct {
	// dirs are the directories whose entries decide which file the path
	// names: the directory of every symlink met on the way and that of
	// the file itself. A change to any of them can change what is read.
	dirs []string
	// err says why the lookup stopped before reaching the file's
	// directory (a directory on the way is missing, say). A missing file
	// in an existing directory is not an error here: reading reports it.
	err error
}

// resolve follows path component by component, as open(2) does, and
// records the directories that decide what it names. Kubernetes
// ConfigMap and Secret volumes are the case in point: members ->
// ..data/members, ..data -> ..2026_11_21_..., and an update re-points
// ..data, so the directory the file lives in changes with every update.
// Every directory returned is a real path (no symlinks in it).
func resolve(path string) resolution {
	var r resolution
	addDir := func(dir string) {
		if !slices.Contains(r.dirs, dir) {
			r.dirs = append(r.dirs, dir)
		}
	}
	if !filepath.IsAbs(path) {
		wd, err := os.Getwd()
		if err != nil {
			r.err = fmt.Errorf("resolve %s: %w", path, err)
			return r
		}
		path = wd + "/" + path // not filepath.Join: that would clean ".." lexically
	}
	todo := components(path)
	cur, links := "/", 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			cur = filepath.Dir(cur) // cur has no symlinks, so this is the kernel's "..".
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		last := len(todo) == 0
		switch {
		case err != nil && last && errors.Is(err, os.ErrNotExist):
			addDir(cur) // the file may yet be created here
			return r
		case err != nil:
			addDir(cur) // watch the deepest directory there is, for the rest to appear
			r.err = fmt.Errorf("resolve %s: %w", path, err)
			return r
		case fi.Mode()&os.ModeSymlink != 0:
			addDir(cur)
			if links++; links > maxSymlinks {
				r.err = fmt.Errorf("resolve %s: too many levels of symbolic links", path)
				return r
			}
			target, err := os.Readlink(next)
			if err != nil {
				r.err = fmt.Errorf("resolve %s: %w", path, err)
				return r
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			todo = append(components(target), todo...)
		case last:
			addDir(cur)
		case !fi.IsDir():
			addDir(cur)
			r.err = fmt.Errorf("resolve %s: %s is not a directory", path, next)
			return r
		default:
			cur = next
		}
	}
	return r
}

// components splits a path into the names a lookup walks, without the
// empty and "." ones. ".." is kept: it must be applied after the symlinks
// before it are followed, so the path must not be cleaned lexically.
func components(path string) []string {
	var out []string
	for _, c := range strings.Split(path, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// dirWatch keeps an fsnotify watch on each directory a file path depends
// on. It is used by the Run goroutine only.
type dirWatch struct {
	fs   *fsnotify.Watcher
	log  *slog.Logger
	what string // the file watched, for the log ("members file")
	// watched maps each watched directory to what it was when the watch
	// was added, to notice a directory replaced under the same name.
	watched map[string]os.FileInfo
	lost    bool // a warning that the watch is lost has been logged
}

func newDirWatch(fs *fsnotify.Watcher, log *slog.Logger, what string) *dirWatch {
	return &dirWatch{fs: fs, log: log, what: what, watched: map[string]os.FileInfo{}}
}

// sync points the watches at what path depends on now and reports whether
// it added any. A caller then re-reads the file: a change made while a
// directory was not watched raised no event.
func (w *dirWatch) sync(path string) bool {
	var r resolution
	if path != "" {
		r = resolve(path)
	}
	w.dropStale(r.dirs)
	added, problem := false, r.err
	for _, dir := range r.dirs {
		if _, ok := w.watched[dir]; ok {
			continue
		}
		// Stat before adding: if the directory is swapped in between, the
		// next sync sees the mismatch and adds the watch again.
		fi, err := os.Stat(dir)
		if err == nil {
			err = w.fs.Add(dir)
		}
		if err != nil {
			problem = errors.Join(problem, fmt.Errorf("watch %s: %w", dir, err))
			continue
		}
		w.watched[dir] = fi
		added = true
	}
	w.report(path, problem)
	return added
}

// dropStale removes the watches on directories that are no longer wanted,
// that fsnotify no longer has (the directory was removed or renamed), or
// whose name now stands for another directory.
func (w *dirWatch) dropStale(want []string) {
	active := w.fs.WatchList()
	for dir, was := range w.watched {
		now, err := os.Stat(dir)
		if slices.Contains(want, dir) && slices.Contains(active, dir) && err == nil && os.SameFile(was, now) {
			continue
		}
		_ = w.fs.Remove(dir) // fails when the kernel dropped it with its directory
		delete(w.watched, dir)
	}
}

// saw notes an event on a watched directory itself: once it is removed
// or renamed, its watch is gone, whatever name it is re-created under.
func (w *dirWatch) saw(ev fsnotify.Event) {
	if _, ok := w.watched[ev.Name]; ok && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		delete(w.watched, ev.Name)
	}
}

// report logs once when the watch is lost and once when it is back, so a
// directory that stays gone does not flood the log.
func (w *dirWatch) report(path string, problem error) {
	switch {
	case path == "":
		w.lost = false // nothing to watch
	case problem != nil && !w.lost:
		w.lost = true
		w.log.Warn(w.what+" watch lost; watching for its directory to come back", "file", path, "watching", w.dirs(), "error", problem)
	case problem == nil && w.lost:
		w.lost = false
		w.log.Info(w.what+" watch restored", "file", path, "watching", w.dirs())
	}
}

func (w *dirWatch) dirs() []string {
	out := make([]string, 0, len(w.watched))
	for dir := range w.watched {
		out = append(out, dir)
	}
	slices.Sort(out)
	return out
}

// debounce fires once events have stopped for quiet, and at the latest
// limit after the first of a burst, so a directory that never falls
// silent (other files in it written all the time) cannot hold a read off.
type debounce struct {
	quiet, limit time.Duration
	timer        *time.Timer
	first        time.Time
	armed        bool
}

func newDebounce(quiet, limit time.Duration) *debounce {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &debounce{quiet: quiet, limit: limit, timer: t}
}

// arm (re)starts the wait for quiet after an event at now.
func (d *debounce) arm(now time.Time) {
	if !d.armed {
		d.armed, d.first = true, now
	}
	d.timer.Reset(max(0, min(d.quiet, d.first.Add(d.limit).Sub(now))))
}

// fired ends the burst; the next event starts a new one.
func (d *debounce) fired() { d.armed = false }

// C receives when the debounce fires; nil (never) while it is not armed.
func (d *debounce) C() <-chan time.Time {
	if !d.armed {
		return nil
	}
	return d.timer.C
}

func (d *debounce) stop() { d.timer.Stop() }
