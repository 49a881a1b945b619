// Package memberlist provides the desired member list: the static list of
// the configuration, or the members file, watched with fsnotify so that a
// change is acted on at once. A list that breaks the address-list rules is
// rejected with its reasons and the last good list stays in force.
package memberlist

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/internal/filewatch"
)

// Source holds the desired list. It is safe for concurrent use.
//
// It also holds the list rules in force (members.*, cluster.replicas):
// a reload hands it new ones with SetRules, and whoever else applies
// those rules reads them with Rules. They are a value: a reload replaces
// them whole, and nobody writes into the ones in use.
type Source struct {
	log     *slog.Logger
	changes chan struct{}
	// watch reads the members file when it may have changed; its Settle
	// is how long the file's directories must be quiet first (the settle
	// constant; tests lengthen it).
	watch *filewatch.Watch
	// OnReload is called after every read of a changed list with the
	// members.source it was read from and why it was rejected, nil when
	// it was accepted (metrics, Events). It runs under the source's lock:
	// it must not call back into the source.
	OnReload func(source string, rejected error)
	// now is the clock that dates the members file's last modification.
	now func() time.Time

	// readMu makes each read and its verdict one step: two reads
	// racing (the watch and a reconcile pass) must not let the older
	// content be applied last.
	readMu sync.Mutex

	mu       sync.Mutex
	rules    config.ListRules
	current  []netip.Addr
	valid    bool   // a good list has been read (or restored)
	lastSeen string // hash of the last content acted on, to log once per change
	lastErr  error
}

// New returns a source under rules. fallback is the last list applied
// before a restart: it is in force until the configured source yields a
// good list.
func New(rules config.ListRules, log *slog.Logger, fallback []netip.Addr) *Source {
	s := &Source{log: log, rules: rules, changes: make(chan struct{}, 1), now: time.Now}
	s.watch = filewatch.New("members file", s.Rules().MembersFile, settle, log, func() { s.refresh(true) })
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

// Read reports whether the configured source has been read at least once,
// its list accepted or rejected, or found not to have one yet (the Etcd
// resource's, before its first good read); false while a members file is
// left for the watch to read once it settled.
func (s *Source) Read() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen != ""
}

// Changes receives a value when the watch found that the list in force
// changed (a Refresh returns that itself).
func (s *Source) Changes() <-chan struct{} { return s.changes }

// SetRules switches to the list rules of a reloaded configuration
// (SIGHUP) and reads the source they name at once: events the watch is
// waiting to act on concern the old file. Only a file modified within the
// settle time is left for the watch, which moves to the new file.
func (s *Source) SetRules(rules config.ListRules) {
	s.mu.Lock()
	s.rules = rules
	s.lastSeen = ""
	s.mu.Unlock()
	s.watch.Resync()
	if f := rules.MembersFile(); f != "" && s.recentlyModified(f) {
		return
	}
	s.refresh(false)
}

// Rules returns the list rules in force: those given to New, or the
// latest SetRules.
func (s *Source) Rules() config.ListRules {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rules
}

// settle is how long the members file's directories must be free of
// events before the watch reads the file: a tool that writes in several
// steps (truncate, then write) must not be read half-way, when a shortened
// list would look like removals.
const settle = 50 * time.Millisecond

// Refresh reads the configured source and applies the rules, and has
// Watch check that its watches still match the file's path (a directory
// removed and re-created loses its watch). It returns true when the list
// in force changed. A members file the watch is about to read, or one
// modified within the last moments, is left for the watch to read once
// it settled.
func (s *Source) Refresh() bool {
	s.watch.Resync()
	rules := s.Rules()
	if f := rules.MembersFile(); f != "" && s.unsettled(f) {
		return false
	}
	return s.refresh(false)
}

// unsettled tells whether the file may be mid-write: the watch saw events
// it has not read after yet, or the file was modified recently.
func (s *Source) unsettled(path string) bool {
	return s.watch.Pending() || s.recentlyModified(path)
}

// recentlyModified: the file was modified within the settle time. A
// modification time in the future (a file copied with its times from a
// host whose clock is ahead) says nothing about a write going on, so it
// never holds a read off.
func (s *Source) recentlyModified(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	age := s.now().Sub(fi.ModTime())
	return age >= 0 && age < s.watch.Settle
}

// refresh reads the configured source now and acts on what it finds.
// notify says whether a change is announced on Changes: for the watch's
// reads, not for a reconcile pass's own Refresh, which uses the list it
// read at once (announcing it would run a second, redundant pass).
func (s *Source) refresh(notify bool) bool {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	rules := s.Rules()
	if NoCopyYet(rules) {
		s.waitForCopy(rules)
		return false
	}
	addrs, errs := rules.DesiredMembers() // never blocks: see config.ReadMembersFile
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
			"source", rules.Members.Source, "file", rules.MembersFile(), "problems", errs.Error(), "inForce", identity.AddrStrings(s.current))
		s.reloaded(rules, errs)
		return false
	}
	s.lastErr = nil
	s.reloaded(rules, nil)
	if s.valid && slices.Equal(addrs, s.current) {
		return false
	}
	s.log.Info("member list changed", "from", identity.AddrStrings(s.current), "to", identity.AddrStrings(addrs))
	s.current, s.valid = addrs, true
	if notify {
		select {
		case s.changes <- struct{}{}:
		default:
		}
	}
	return true
}

func (s *Source) reloaded(rules config.ListRules, rejected error) {
	if s.OnReload != nil {
		s.OnReload(rules.Members.Source, rejected)
	}
}

// noCopy is the key of a read that found no copy of a kept list (never
// a fingerprint: those are sha256 sums).
const noCopy = "no copy of the kept list"

// NoCopyYet tells whether, with a list the agent keeps a copy of
// (members.source etcd-resource or cluster), the copy does not exist. Its
// keeper writes it at the first good read, so until then there is no
// list yet: that is a wait, not a list to refuse. A list that breaks the
// rules is refused, and reported, by the keeper, and is never written; a
// copy that is there but unreadable or bad is refused here.
func NoCopyYet(rules config.ListRules) bool {
	if rules.Members.Source != config.SourceEtcdResource && rules.Members.Source != config.SourceCluster {
		return false
	}
	_, err := os.Lstat(rules.MembersFile())
	return errors.Is(err, fs.ErrNotExist)
}

// waitForCopy records that the keeper has no list yet: the list in force
// (one restored from before a restart, or none) stays, and nothing is
// rejected.
func (s *Source) waitForCopy(rules config.ListRules) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastSeen == noCopy {
		return
	}
	s.lastSeen, s.lastErr = noCopy, nil
	s.log.Info(NoCopyReason(rules), "file", rules.MembersFile(), "inForce", identity.AddrStrings(s.current))
}

// NoCopyReason says that there is no kept list yet, and where it comes
// from.
func NoCopyReason(rules config.ListRules) string {
	if rules.Members.Source == config.SourceCluster {
		return "no member list read from the cluster yet: it is read from the listed members and members.seeds; a host that is not listed joins once 'etcdlet members add <its IP>' on a member lists it"
	}
	return "no member list from the Etcd resource yet; waiting for its first good read"
}

// Watch re-reads the members file whenever it may have changed, until ctx
// ends (see filewatch.Watch); the list is acted on only when its content
// changed. Between events, each reconcile pass's Refresh reads it too.
func (s *Source) Watch(ctx context.Context) error { return s.watch.Run(ctx) }

func fingerprint(addrs []netip.Addr, errs config.Errors) string {
	h := sha256.New()
	for _, a := range addrs {
		fmt.Fprintln(h, a)
	}
	fmt.Fprintln(h, "--")
	fmt.Fprint(h, errs.Error())
	return string(h.Sum(nil))
}
