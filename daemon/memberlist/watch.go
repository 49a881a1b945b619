package memberlist

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// maxSymlinks is the kernel's limit on symlinks followed in one lookup.
const maxSymlinks = 40

// resolution is what a members file path depends on right now.
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

// dirWatch keeps an fsnotify watch on each directory a members file path
// depends on. It is used by the Watch goroutine only.
type dirWatch struct {
	fs  *fsnotify.Watcher
	log *slog.Logger
	// watched maps each watched directory to what it was when the watch
	// was added, to notice a directory replaced under the same name.
	watched map[string]os.FileInfo
	lost    bool // a warning that the watch is lost has been logged
}

func newDirWatch(fs *fsnotify.Watcher, log *slog.Logger) *dirWatch {
	return &dirWatch{fs: fs, log: log, watched: map[string]os.FileInfo{}}
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
		w.lost = false // the static source has nothing to watch
	case problem != nil && !w.lost:
		w.lost = true
		w.log.Warn("members file watch lost; watching for its directory to come back, and each reconcile pass re-reads the file meanwhile",
			"file", path, "watching", w.dirs(), "error", problem)
	case problem == nil && w.lost:
		w.lost = false
		w.log.Info("members file watch restored", "file", path, "watching", w.dirs())
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
