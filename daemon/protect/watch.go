package protect

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultSettle is how long a changed file must hold still before the
// guard acts on it (Options.Settle): a change written in several steps
// finishes first.
const DefaultSettle = 100 * time.Millisecond

// EmptySettle is how long a file found empty must stay empty before the
// guard acts on it: a writer that truncated it (os.WriteFile, "echo >")
// may be descheduled between the truncation and its write for longer than
// DefaultSettle on a loaded machine, and a revert then loses its write.
const EmptySettle = 2 * time.Second

// Run watches the managed files' directories (files are replaced by
// rename, which a watch on the file itself would miss) and checks on every
// change to a managed file, and every Interval, until ctx ends.
func (g *Guard) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch managed files: %w", err)
	}
	defer w.Close()
	watched := map[string]bool{}
	rewatch := func() {
		g.mu.Lock()
		dirs := map[string]bool{}
		for path := range g.files {
			dirs[filepath.Dir(path)] = true
		}
		g.mu.Unlock()
		for dir := range dirs {
			// A directory removed and recreated needs a new watch; Add of a
			// watched directory is a no-op.
			if err := w.Add(dir); err == nil {
				watched[dir] = true
			} else {
				delete(watched, dir)
			}
		}
	}
	rewatch()
	ticker := time.NewTicker(g.opts.Interval)
	defer ticker.Stop()
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.kick:
			// A new directory to watch (a Write), or protection switched
			// back on: either way, look at the files now.
			rewatch()
			g.Check()
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if g.isManagedOrDir(ev.Name) {
				debounce = time.After(g.opts.Settle)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			g.opts.Log.Warn("watch of managed files failed; the periodic check still runs", "error", err)
		case <-debounce:
			debounce = nil
			g.Check()
			rewatch()
		case <-ticker.C:
			g.Check()
			rewatch()
		}
	}
}

// isManagedOrDir reports whether an event's path is a managed file or the
// directory of one.
func (g *Guard) isManagedOrDir(name string) bool {
	name = filepath.Clean(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	for path := range g.files {
		if path == name || filepath.Dir(path) == name {
			return true
		}
	}
	return false
}
