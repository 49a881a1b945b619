package clusterlist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/memberlist"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

const callTimeout = 2 * time.Second

// realCluster is a one-member etcd, a pool, and a client through it.
func realCluster(t *testing.T) (*etcdclient.Pool, *clientv3.Client, []string, uint64) {
	t.Helper()
	members := etcdtest.Start(t, 1)
	pool, err := etcdclient.NewPool(config.TLSFiles{}, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	eps := etcdtest.ClientURLs(members)
	cli, err := pool.NewMulti(eps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return pool, cli, eps, members[0].ClusterID()
}

func clusterRules(t *testing.T) config.ListRules {
	return config.ListRules{Members: config.Members{Source: config.SourceCluster}, StateDir: t.TempDir()}
}

// Edits on a real etcd: the first list only with set, the list rules on
// every result, a change in flight refused unless forced, and a
// compare-and-swap that never overwrites an edit made meanwhile.
func TestEditorOnARealCluster(t *testing.T) {
	_, cli, _, clusterID := realCluster(t)
	ctx := t.Context()
	// The etcdtest member is named m0, not etcd-main-127.0.0.1: to the
	// agents' naming it is a member no list names, so a list of
	// 127.0.0.1 is never carried out (in flight for good).
	ed := Editor{Rules: clusterRules(t), Scheme: identity.Scheme{Cluster: "etcd-main", PeerScheme: "http", ClientScheme: "http", PeerPort: 2380, ClientPort: 2379},
		Client: cli, ClusterID: clusterID, Timeout: callTimeout, By: "test"}

	if _, err := ed.Change(ctx, Edit{Add, addrs("127.0.0.1")}); !errors.Is(err, ErrNoList) || !strings.Contains(err.Error(), "'etcdlet members set <IP>...'") {
		t.Fatalf("add with no list stored: %v, want ErrNoList and what to do", err)
	}
	first, err := ed.Change(ctx, Edit{Set, addrs("127.0.0.1", "127.0.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	if got, found, err := Read(ctx, cli, clusterID, callTimeout); err != nil || !found || got.Revision != first.Revision ||
		strings.Join(got.Addresses, " ") != "127.0.0.1 127.0.0.2" || got.Change != "set 127.0.0.1 127.0.0.2" || got.By != "test" {
		t.Fatalf("read back %+v, %v, %v", got, found, err)
	}

	for _, tt := range []struct {
		edit Edit
		want string
	}{
		{Edit{Remove, addrs("127.0.0.1", "127.0.0.2")}, "an empty list never removes members"},
		{Edit{Add, addrs("192.0.2.7")}, `192.0.2.7": is not a loopback address, so etcd traffic on it needs TLS`},
		{Edit{Add, addrs("127.0.0.3")}, "a change of the member list is in flight, not carried out yet:\n  127.0.0.1: "},
	} {
		if _, err := ed.Change(ctx, tt.edit); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.edit, err, tt.want)
		}
	}
	// Taking back a join that cannot finish is allowed in flight.
	back, err := ed.Change(ctx, Edit{Remove, addrs("127.0.0.2")})
	if err != nil {
		t.Fatalf("taking back a join in flight: %v", err)
	}
	forced := ed
	forced.Force = true
	if _, err := forced.Change(ctx, Edit{Add, addrs("127.0.0.3")}); err != nil {
		t.Fatalf("--force: %v", err)
	}
	// An edit based on a revision that is no longer the list's is refused.
	if _, err := Commit(ctx, cli, clusterID, back.Revision, Record{Addresses: []string{"127.0.0.9"}}, callTimeout); !errors.Is(err, ErrChanged) {
		t.Fatalf("commit on an old revision: %v, want ErrChanged", err)
	}
	if _, err := Commit(ctx, cli, clusterID, 0, Record{Addresses: []string{"127.0.0.9"}}, callTimeout); !errors.Is(err, ErrChanged) {
		t.Fatalf("a first commit where a list is stored: %v, want ErrChanged", err)
	}
	if got, _, _ := Read(ctx, cli, clusterID, callTimeout); strings.Join(got.Addresses, " ") != "127.0.0.1 127.0.0.3" {
		t.Fatalf("the list after refused commits: %v, want 127.0.0.1 127.0.0.3", got.Addresses)
	}
	// A stored list that breaks the rules is replaced only by set.
	cur, _, _ := Read(ctx, cli, clusterID, callTimeout)
	if _, err := Commit(ctx, cli, clusterID, cur.Revision, Record{Addresses: []string{"127.0.0.01"}}, callTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := forced.Change(ctx, Edit{Add, addrs("127.0.0.4")}); err == nil || !strings.Contains(err.Error(), "only 'etcdlet members set' replaces it") {
		t.Errorf("add to a broken stored list: %v", err)
	}
	if _, err := ed.Change(ctx, Edit{Set, addrs("127.0.0.4")}); err != nil {
		t.Errorf("set over a broken stored list: %v", err)
	}
}

// Choose reads only the cluster this node belongs to, and before it
// belongs to one, only from endpoints that all answer for the same one.
func TestChooseNeverMixesClusters(t *testing.T) {
	_, cliA, epsA, idA := realCluster(t)
	_, _, epsB, idB := realCluster(t)
	ctx := t.Context()
	both := append(append([]string{}, epsA...), epsB...)
	silent := "http://127.0.0.1:1"
	for _, tt := range []struct {
		name   string
		eps    []string
		pinned uint64
		want   uint64
		err    string
	}{
		{"unpinned, one cluster", append([]string{silent}, epsA...), 0, idA, ""},
		{"unpinned, two clusters", both, 0, 0, "the endpoints answer for more than one cluster"},
		{"pinned among two", both, idB, idB, ""},
		{"pinned, only another answers", epsA, idB, 0, fmt.Sprintf("no endpoint answers for cluster %x, which this node belongs to", idB)},
		{"nobody answers", []string{silent}, 0, 0, "no member answers at " + silent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, answering, err := Choose(ctx, cliA, tt.eps, tt.pinned, callTimeout)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || id != tt.want || len(answering) != 1 {
				t.Fatalf("got %x %v %v, want %x", id, answering, err, tt.want)
			}
		})
	}
}

func runKeeper(t *testing.T, pool *etcdclient.Pool, eps []string, pinned uint64, rules config.ListRules) *Keeper {
	t.Helper()
	k := &Keeper{Rules: func() config.ListRules { return rules }, Dial: pool.NewMulti, Endpoints: func() []string { return eps },
		Pinned: func() uint64 { return pinned }, CallTimeout: callTimeout, Retry: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return k
}

func copyList(t *testing.T, rules config.ListRules) string {
	b, err := os.ReadFile(rules.MembersFile())
	if err != nil {
		return err.Error()
	}
	var lines []string
	for l := range strings.Lines(string(b)) {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return strings.Join(lines, " ")
}

// The keeper writes every good list to the agent's copy, keeps the last
// good one when the stored list is bad or deleted, and says why.
func TestKeeperFollowsTheList(t *testing.T) {
	pool, cli, eps, clusterID := realCluster(t)
	ctx := t.Context()
	rules := clusterRules(t)
	k := runKeeper(t, pool, eps, 0, rules)
	eventually.Nil(t, 10*time.Second, "the keeper says no list is stored", func() error {
		if err := k.Err(); !errors.Is(err, ErrNoList) {
			return fmt.Errorf("Err() = %v", err)
		}
		return nil
	})
	rev, err := Commit(ctx, cli, clusterID, 0, Record{Addresses: []string{"127.0.0.1", "::1"}}, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	wantCopy := func(want string) {
		t.Helper()
		eventually.Nil(t, 10*time.Second, "the copy holds "+want, func() error {
			if got := copyList(t, rules); got != want {
				return fmt.Errorf("copy %q", got)
			}
			return nil
		})
	}
	wantCopy("127.0.0.1 ::1")
	if b, _ := os.ReadFile(rules.MembersFile()); !strings.Contains(string(b), fmt.Sprintf("revision %d", rev)) {
		t.Errorf("the copy does not name the revision it holds:\n%s", b)
	}
	if fi, err := os.Stat(rules.MembersFile()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("copy mode %v (%v), want 0600", fi.Mode(), err)
	}
	rev, err = Commit(ctx, cli, clusterID, rev, Record{Addresses: []string{"127.0.0.1", "127.0.0.1"}}, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	eventually.Nil(t, 10*time.Second, "a bad list is refused with its reason", func() error {
		if err := k.Err(); err == nil || !strings.Contains(err.Error(), "duplicate of") {
			return fmt.Errorf("Err() = %v", err)
		}
		return nil
	})
	wantCopy("127.0.0.1 ::1")
	if _, err = Commit(ctx, cli, clusterID, rev, Record{Addresses: []string{"127.0.0.2"}}, callTimeout); err != nil {
		t.Fatal(err)
	}
	wantCopy("127.0.0.2")
	// The copy is written before Err is cleared: wait for both.
	eventually.Nil(t, 10*time.Second, "a good list in force clears the refusal", func() error {
		if err := k.Err(); err != nil {
			return fmt.Errorf("Err() = %v", err)
		}
		return nil
	})
	if _, err := cli.Delete(ctx, etcdclient.MemberListKey(clusterID)); err != nil {
		t.Fatal(err)
	}
	eventually.Nil(t, 10*time.Second, "a deleted list is reported", func() error {
		if err := k.Err(); !errors.Is(err, ErrNoList) {
			return fmt.Errorf("Err() = %v", err)
		}
		return nil
	})
	wantCopy("127.0.0.2")
}

// A node of the cluster that holds a copy (the founder's first list)
// stores it when no list is stored, also after the list was deleted; a
// node pinned to another cluster reads nothing from this one.
func TestKeeperPublishesTheFirstListAndReadsOnlyItsCluster(t *testing.T) {
	pool, cli, eps, clusterID := realCluster(t)
	ctx := t.Context()

	foreign := clusterRules(t)
	k := runKeeper(t, pool, eps, clusterID+1, foreign)
	eventually.Nil(t, 10*time.Second, "the keeper pinned elsewhere refuses", func() error {
		if err := k.Err(); err == nil || !strings.Contains(err.Error(), "a list from another cluster is never taken") {
			return fmt.Errorf("Err() = %v", err)
		}
		return nil
	})

	rules := clusterRules(t)
	if _, err := memberlist.KeepCopy(rules.MembersFile(), "# first\n", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	runKeeper(t, pool, eps, clusterID, rules)
	stored := func(what string) {
		t.Helper()
		eventually.Nil(t, 10*time.Second, what, func() error {
			s, found, err := Read(ctx, cli, clusterID, callTimeout)
			if err != nil || !found || strings.Join(s.Addresses, " ") != "127.0.0.1" {
				return fmt.Errorf("stored %+v, %v, %v", s, found, err)
			}
			return nil
		})
	}
	stored("the copy is stored")
	if _, err := cli.Delete(ctx, etcdclient.MemberListKey(clusterID)); err != nil {
		t.Fatal(err)
	}
	stored("the copy is stored again after the list was deleted")
	if _, err := os.Stat(filepath.Join(foreign.StateDir, config.ClusterMembersFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the keeper pinned to another cluster wrote a copy: %v", err)
	}
}

// The founder's first list is itself; never while a cluster answers at
// the seeds (that host joins it), and a copy already there stays.
func TestFirstList(t *testing.T) {
	pool, _, eps, clusterID := realCluster(t)
	ctx := t.Context()
	self := addrs("127.0.0.5")[0]

	rules := clusterRules(t)
	err := FirstList(ctx, rules, self, eps, pool.NewMulti, callTimeout)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cluster %x answers at members.seeds", clusterID)) ||
		!strings.Contains(err.Error(), "run 'etcdlet members add 127.0.0.5'") {
		t.Fatalf("with a cluster at the seeds: %v", err)
	}
	if got := copyList(t, rules); !strings.Contains(got, "no such file") {
		t.Errorf("a refused first list wrote a copy: %q", got)
	}
	if err := FirstList(ctx, rules, self, []string{"http://127.0.0.1:1"}, pool.NewMulti, callTimeout); err != nil {
		t.Fatalf("with silent seeds: %v", err)
	}
	if got := copyList(t, rules); got != "127.0.0.5" {
		t.Errorf("the first list is %q, want this host alone", got)
	}
	if err := FirstList(ctx, rules, addrs("127.0.0.6")[0], nil, pool.NewMulti, callTimeout); err != nil || copyList(t, rules) != "127.0.0.5" {
		t.Errorf("a second first list: %v, copy %q; want the copy kept", err, copyList(t, rules))
	}
}
