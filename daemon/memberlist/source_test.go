package memberlist

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// fileConfig is a node with secured etcd traffic (the certificate files
// are not read here), so lists of any address are accepted.
func fileConfig(path string, replicas int) config.ListRules {
	return fileNode(path, replicas).ListRules()
}

func fileNode(path string, replicas int) *config.Config {
	cfg := &config.Config{Members: config.Members{Source: config.SourceFile, File: path}}
	cfg.Etcd.TLS.Client = config.TLSFiles{CertFile: "/pki/server.crt", KeyFile: "/pki/server.key", CAFile: "/pki/ca.crt"}
	cfg.Etcd.TLS.Peer = config.TLSFiles{CertFile: "/pki/peer.crt", KeyFile: "/pki/peer.key", CAFile: "/pki/ca.crt"}
	if replicas > 0 {
		cfg.Cluster.Replicas = &replicas
	}
	return cfg
}

func write(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // how tools replace the file
		t.Fatal(err)
	}
}

// writeSettled writes a file that was last modified a while ago, as one
// present before the agent started.
func writeSettled(t *testing.T, path, content string) {
	t.Helper()
	write(t, path, content)
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// waitList waits until a change notification comes with the list in
// force equal to want. A notification for an earlier read (the watch's
// own read after it moved) may come first; it is passed over.
func waitList(t *testing.T, s *Source, want string) {
	t.Helper()
	deadline := time.After(watchDeadline)
	for {
		select {
		case <-s.Changes():
			if current(s) == want {
				return
			}
		case <-deadline:
			t.Fatalf("list %q not noticed within %s: the list in force is %q (error %v)", want, watchDeadline, current(s), s.Err())
		}
	}
}

func current(s *Source) string {
	addrs, _ := s.Current()
	out := ""
	for _, a := range addrs {
		out += a.String() + " "
	}
	return out
}

func TestWatchFollowsTheFileAndKeepsTheLastGoodList(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "members")
	writeSettled(t, path, "192.0.2.1\n192.0.2.2\n192.0.2.3\n")
	var rejected atomic.Int32
	s := New(fileConfig(path, 3), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	s.OnReload = func(_ string, err error) {
		if err != nil {
			rejected.Add(1)
		}
	}
	if !s.Refresh() || current(s) != "192.0.2.1 192.0.2.2 192.0.2.3 " {
		t.Fatalf("initial list: %q", current(s))
	}
	watch(t, s)

	write(t, path, "192.0.2.1\n192.0.2.2\n192.0.2.4\n")
	waitList(t, s, "192.0.2.1 192.0.2.2 192.0.2.4 ")

	// A list that breaks the rules is rejected; the last good one stays.
	write(t, path, "192.0.2.1\n192.0.2.2\n")
	_, _ = eventually.Within(watchDeadline, 10*time.Millisecond, func() error {
		if rejected.Load() == 0 {
			return errors.New("not rejected yet")
		}
		return nil
	})
	if rejected.Load() != 1 || s.Err() == nil {
		t.Fatalf("bad list not rejected (rejected=%d, err=%v)", rejected.Load(), s.Err())
	}
	if current(s) != "192.0.2.1 192.0.2.2 192.0.2.4 " {
		t.Errorf("a rejected list replaced the good one: %q", current(s))
	}
	// Removing the file is a rejection too, never an empty list.
	os.Remove(path)
	s.Refresh()
	if current(s) != "192.0.2.1 192.0.2.2 192.0.2.4 " || s.Err() == nil {
		t.Errorf("a missing file changed the list: %q", current(s))
	}

	// A reload that names another file reads it at once (the reload's own
	// read: the pass that follows uses it, no notification needed) and
	// moves the watch there.
	other := filepath.Join(t.TempDir(), "endpoints")
	writeSettled(t, other, "192.0.2.7\n192.0.2.8\n192.0.2.9\n")
	s.SetRules(fileConfig(other, 3))
	if current(s) != "192.0.2.7 192.0.2.8 192.0.2.9 " {
		t.Fatalf("after the reload: %q", current(s))
	}
	write(t, other, "192.0.2.7\n192.0.2.8\n192.0.2.6\n")
	waitList(t, s, "192.0.2.7 192.0.2.8 192.0.2.6 ")
}

// A reconcile pass does not read a file modified a moment ago: it may be
// half-written (truncated, not yet filled), and a shortened list looks like
// removals. The same content is read once it has held still. No watch runs
// here, so only the pass's own read can change the list.
func TestRefreshLeavesAFileModifiedJustNow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "members")
	writeSettled(t, path, "192.0.2.1\n192.0.2.2\n192.0.2.3\n")
	s := New(fileConfig(path, 3), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if !s.Refresh() || current(s) != "192.0.2.1 192.0.2.2 192.0.2.3 " {
		t.Fatalf("initial list: %q (error %v)", current(s), s.Err())
	}
	// A valid list of the configured length: only its age can hold it off.
	// The clock is the file's own time, so a slow machine cannot age it.
	if err := os.WriteFile(path, []byte("192.0.2.1\n192.0.2.2\n192.0.2.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return fi.ModTime().Add(settle / 2) }
	if s.Refresh() || current(s) != "192.0.2.1 192.0.2.2 192.0.2.3 " || s.Err() != nil {
		t.Fatalf("a file modified just now was read: %q (error %v)", current(s), s.Err())
	}
	s.now = func() time.Time { return fi.ModTime().Add(settle) }
	if !s.Refresh() || current(s) != "192.0.2.1 192.0.2.2 192.0.2.4 " {
		t.Errorf("the same file, settled, was not read: %q (error %v)", current(s), s.Err())
	}
}

func TestFallbackListIsInForceUntilAGoodRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "members")
	writeSettled(t, path, "not-an-ip\n")
	s := New(fileConfig(path, 0), slog.New(slog.NewTextHandler(io.Discard, nil)), []netip.Addr{netip.MustParseAddr("192.0.2.1")})
	s.Refresh()
	if addrs, ok := s.Current(); !ok || len(addrs) != 1 {
		t.Errorf("the list from the state file must stay in force: %v %v", addrs, ok)
	}
	empty := New(fileConfig(path, 0), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	empty.Refresh()
	if _, ok := empty.Current(); ok {
		t.Error("with no good list ever read, there must be none in force")
	}
}

// keptConfig takes the list from a source the agent keeps a copy of in
// stateDir (the Etcd resource, the cluster).
func keptConfig(source, stateDir string, replicas int) config.ListRules {
	cfg := fileNode("", replicas)
	cfg.Members = config.Members{Source: source}
	cfg.Agent.StateDir = stateDir
	return cfg.ListRules()
}

// With the Etcd resource or the cluster as the source, a copy of its list
// that does not exist yet is no list yet, not a list to refuse: nothing is
// rejected (no error, no Event through OnReload), the list in force stays,
// and the source counts as read. A copy that is there but breaks the rules
// is refused like any members file, and a members file that is missing
// still is.
func TestNoCopyOfAKeptListIsNoListYet(t *testing.T) {
	restored := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")}
	tests := []struct {
		name     string
		restored []netip.Addr // the list in force before (from the state file)
		replicas int
		copy     string // content of the copy, "" for none
		want     string // the list in force afterwards
		rejected bool
	}{
		{name: "first start", want: ""},
		{name: "restart with a list restored", restored: restored, want: "192.0.2.1 192.0.2.2 192.0.2.3 "},
		{name: "copy read", copy: "192.0.2.4\n192.0.2.5\n192.0.2.6\n", want: "192.0.2.4 192.0.2.5 192.0.2.6 "},
		{name: "copy that breaks the rules", replicas: 3, copy: "192.0.2.4\n", want: "", rejected: true},
	}
	for _, source := range []string{config.SourceEtcdResource, config.SourceCluster} {
		for _, tc := range tests {
			t.Run(source+"/"+tc.name, func(t *testing.T) {
				cfg := keptConfig(source, t.TempDir(), tc.replicas)
				if tc.copy != "" {
					writeSettled(t, cfg.MembersFile(), tc.copy)
				}
				s := New(cfg, slog.New(slog.DiscardHandler), tc.restored)
				var reloads []error
				s.OnReload = func(got string, err error) {
					if got != source {
						t.Errorf("OnReload names source %q, want %q", got, source)
					}
					reloads = append(reloads, err)
				}
				s.Refresh()
				if got := current(s); got != tc.want {
					t.Errorf("list in force %q, want %q", got, tc.want)
				}
				if !s.Read() {
					t.Error("the source does not count as read")
				}
				switch {
				case tc.rejected && (s.Err() == nil || len(reloads) != 1 || reloads[0] == nil):
					t.Errorf("a bad copy: error %v, reloads %v; want it rejected once", s.Err(), reloads)
				case !tc.rejected && (s.Err() != nil || slices.ContainsFunc(reloads, func(err error) bool { return err != nil })):
					t.Errorf("error %v, reloads %v; want nothing rejected", s.Err(), reloads)
				case tc.copy == "" && len(reloads) > 0:
					t.Errorf("reloads %v without a list read; want none", reloads)
				}
			})
		}
	}

	t.Run("missing members file", func(t *testing.T) {
		s := New(fileConfig(filepath.Join(t.TempDir(), "members"), 0), slog.New(slog.DiscardHandler), restored)
		s.Refresh()
		if s.Err() == nil || !strings.Contains(s.Err().Error(), "no such file") {
			t.Errorf("a missing members file: error %v, want it rejected", s.Err())
		}
	})
}
