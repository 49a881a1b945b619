// Package memberlist provides the desired member list: the static list of
// the configuration, or the members file, watched with fsnotify so that a
// change is acted on at once. A list that breaks the address-list rules is
// rejected with its reasons and the last good list stays in force.
package memberlist

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/etcdlet/etcdlet/config"
)

// Source holds the desired list. It is safe for concurrent use.
type Source struct {
	log     *slog.Logger
	changes chan struct{}
	rewatch chan struct{}
	// watching is closed once Watch has set up its watch.
	watching chan struct{}
	// OnReload is called after every read with whether the list was
	// accepted (for metrics).
	OnReload func(accepted bool)

	mu       sync.Mutex
	cfg      *config.Config
	current  []netip.Addr
	valid    bool   // a good list has been read (or restored)
	lastSeen string // hash of the last content acted on, to log once per change
	lastErr  error
}

// New returns a source for cfg. fallback is the last list applied before a
// restart: it is in force until the configured source yields a good list.
func New(cfg *config.Config, log *slog.Logger, fallback []netip.Addr) *Source {
	s := &Source{log: log, cfg: cfg, changes: make(chan struct{}, 1), rewatch: make(chan struct{}, 1), watching: make(chan struct{})}
	if len(fallback) > 0 {
		s.current, s.valid = fallback, true
	}
	return s
}

// Current returns the list in force and whether there is one at all.
func (s *Source) Current() ([]netip.Addr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.current), s.valid
}

// Err is the reason the latest read was rejected, nil if it was accepted.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Changes receives a value when the list in force changed.
func (s *Source) Changes() <-chan struct{} { return s.changes }

// SetConfig switches to a reloaded configuration (SIGHUP) and re-reads.
func (s *Source) SetConfig(cfg *config.Config) {
	s.mu.Lock()
	s.cfg = cfg
	s.lastSeen = ""
	s.mu.Unlock()
	select {
	case s.rewatch <- struct{}{}:
	default:
	}
	s.Refresh()
}

// settle is how long a members file must be unchanged before it is read:
// a tool that writes in several steps (truncate, then write) must not be
// read half-way, when a shortened list would look like removals.
const settle = 50 * time.Millisecond

// Refresh reads the configured source and applies the rules. It returns
// true when the list in force changed. A members file modified within the
// last moments is left for the watch to read once it settled.
func (s *Source) Refresh() bool {
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	if cfg.Members.Source == config.SourceFile {
		if fi, err := os.Stat(cfg.Members.File); err == nil && time.Since(fi.ModTime()) < settle {
			return false
		}
	}
	addrs, errs := cfg.DesiredMembers()
	key := fingerprint(addrs, errs)

	s.mu.Lock()
	defer s.mu.Unlock()
	if key == s.lastSeen {
		return false
	}
	s.lastSeen = key
	if len(errs) > 0 {
		s.lastErr = errs
		s.log.Error("member list rejected; the last good list stays in force",
			"source", cfg.Members.Source, "file", cfg.Members.File, "problems", errs.Error(), "inForce", addrStrings(s.current))
		s.reloaded(false)
		return false
	}
	s.lastErr = nil
	s.reloaded(true)
	if s.valid && slices.Equal(addrs, s.current) {
		return false
	}
	s.log.Info("member list changed", "from", addrStrings(s.current), "to", addrStrings(addrs))
	s.current, s.valid = addrs, true
	select {
	case s.changes <- struct{}{}:
	default:
	}
	return true
}

func (s *Source) reloaded(accepted bool) {
	if s.OnReload != nil {
		s.OnReload(accepted)
	}
}

// Watch re-reads the members file whenever it changes, until ctx ends.
// It watches the file's directory, not the file: tools replace such files
// by renaming a new one over them, which a watch on the old inode misses.
// A reload that names another file moves the watch.
func (s *Source) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch members file: %w", err)
	}
	defer w.Close()
	watched := ""
	rewatch := func() (string, error) {
		s.mu.Lock()
		file := ""
		if s.cfg.Members.Source == config.SourceFile {
			file = filepath.Clean(s.cfg.Members.File)
		}
		s.mu.Unlock()
		dir := ""
		if file != "" {
			dir = filepath.Dir(file)
		}
		if dir == watched {
			return file, nil
		}
		if watched != "" {
			_ = w.Remove(watched)
		}
		watched = ""
		if dir != "" {
			if err := w.Add(dir); err != nil {
				return file, fmt.Errorf("watch members file directory %s: %w", dir, err)
			}
			watched = dir
		}
		return file, nil
	}
	file, err := rewatch()
	if err != nil {
		return err
	}
	close(s.watching)
	// Read once the file has been quiet for the settle time, so a change
	// written in several steps is read once, complete.
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.rewatch:
			if file, err = rewatch(); err != nil {
				s.log.Warn("cannot watch the members file; changes are picked up on the next reconcile pass", "error", err)
			}
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Clean(ev.Name) == file {
				debounce = time.After(settle)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Warn("members file watch error; changes are picked up on the next reconcile pass", "error", err)
		case <-debounce:
			debounce = nil
			s.Refresh()
		}
	}
}

func fingerprint(addrs []netip.Addr, errs config.Errors) string {
	h := sha256.New()
	for _, a := range addrs {
		fmt.Fprintln(h, a)
	}
	fmt.Fprintln(h, "--")
	fmt.Fprint(h, errs.Error())
	return string(h.Sum(nil))
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}
