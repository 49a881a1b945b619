// Package test holds etcdlet's end-to-end tests: agents run as processes of
// the built binary with embedded etcd on 127.0.x.y addresses, and every
// scenario asserts the final member list through the etcd API, that data
// dirs of removed members still exist, and that a writer kept writing.
// The tests run in parallel (go test -parallel), each on its own addresses.
package test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/test/harness"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcdlet-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, err = harness.BuildBinary(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Each test gets its own 127.0.<net>.0/24 so no two tests share an address.
const (
	netBootstrap = 10 + iota
	netAddRemove
	netReplace
	netStale
	netKillJoin
	netRace
	netBadReload
	netTLS
	netRestartAll
	netPacemaker
	netStaticPod
	netProtection
	netProtectionOff
	netNotify
	netKubeAPIServer
	netPortTaken
)

// maxWriteGap bounds how long the cluster may refuse writes during a
// membership change, derived from the members' configuration: one leader
// election, which takes up to two election timeouts (followers wait one
// before they campaign, a split vote costs another), plus the timeout of
// the write that was under way when the cluster stopped answering. A change
// that cost quorum leaves the cluster unwritable for far longer.
const maxWriteGap = 2*harness.ElectionTimeout + harness.WriteTimeout

const convergeTimeout = 60 * time.Second

// startCluster starts agents 1..n at the same instant with members 1..n
// and waits until they form a healthy cluster.
func startCluster(t *testing.T, net int, n int, opts ...func(*harness.Options)) (*harness.Cluster, *clientv3.Client) {
	t.Helper()
	o := harness.Options{Net: net}
	for _, f := range opts {
		f(&o)
	}
	c := harness.NewCluster(t, binary, t.TempDir(), o)
	ns := seq(1, n)
	c.WriteMembers(ns...)
	for _, i := range ns {
		c.WriteConfig(i)
	}
	for _, i := range ns {
		c.Start(i)
	}
	cli := c.Client()
	c.Wait(cli, convergeTimeout, ns...)
	return c, cli
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// checkWrites asserts the writer never saw the cluster unwritable for
// longer than one leader election.
func checkWrites(t *testing.T, w *harness.Writer) {
	t.Helper()
	w.Stop()
	r := w.Report()
	t.Logf("writer: %d writes, %d failed, longest gap %s", r.Writes, r.Failures, r.MaxGap)
	if r.Writes == 0 {
		t.Fatalf("writer made no successful write (last error %v)", r.LastErr)
	}
	if r.MaxGap > maxWriteGap {
		t.Errorf("the cluster refused writes for %s (ending %s), longer than one leader election (%s); last error %v",
			r.MaxGap, r.GapEnd.Format(time.RFC3339Nano), maxWriteGap, r.LastErr)
	}
}

// movedAside returns the data dirs etcdlet moved aside for agent n.
func movedAside(t *testing.T, c *harness.Cluster, n int) []string {
	t.Helper()
	matches, err := filepath.Glob(c.DataDir(n) + ".etcdlet-moved-*")
	if err != nil {
		t.Fatal(err)
	}
	return matches
}

// requireKeptData asserts that a moved-aside data dir still holds etcd's
// write-ahead log: the data was kept, not deleted.
func requireKeptData(t *testing.T, dirs []string) {
	t.Helper()
	if len(dirs) == 0 {
		t.Fatal("no data dir was moved aside")
	}
	for _, d := range dirs {
		wals, _ := filepath.Glob(filepath.Join(d, "member", "wal", "*.wal"))
		if len(wals) == 0 {
			t.Errorf("moved-aside data dir %s holds no WAL; data was lost", d)
		}
	}
}
