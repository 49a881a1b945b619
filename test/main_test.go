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
	netGrowDown
	netForeign
	netAlarm
	netSnapOnly
	netOrphan
	netLearnerTimeout
	netApprove
	netFlapping
	netMount
	netCorrupt
	netPeerAuth
	netCertsIssue
	netDruid
	netAPIOutage
	netProtectionSwitch
	netPacemakerWriter
	netSnapshotS3
	netTaskKill
	netDefrag
	netDruidOpsTask
	netRestore
	netSchedule
	netChangeIP
	netRollingRestart
	netMetrics
	netReadyz
	netStatusExit
	netMemberCommands
	netLockCommands
	netEtcdctl
	netCertsKubeadm
	netReadyNoList
	netHTTP2
	netBackupAPIAuth
	netBackupHistory
	netLeasePolicy
	netPeerWake
	netForgedPromise
	netTrust
	netRollout1s
	netRollout45s
	netListFlap
	netListsDisagree
	netStaleList
	netClaimant
	netOtherName
	netExplicit
	netFounder
	netNeverBootstrap
	netRebootstrap
	netCertsAutoRenew
	netClusterList
	netSurvivors
	netIdle
	netRecover
	netVersion
	netDowngrade
	netVersionChange
	netRollingUpgrade
	netReplaceKeyspace
	netDiskSpace
)

// maxWriteGap is how long the cluster may refuse writes while etcdlet
// changes membership, derived from the members' election timeout. An action
// of etcdlet that cost quorum (stopping or removing a member the cluster
// needs) leaves it unable to write until that member is back, which in
// these scenarios is never: the writer sees no write succeed again. What
// else makes writes wait ends within a few election timeouts: an election
// takes at most two, and a loaded machine's stalls delay raft by about as
// much. The shorter gap a good handover gives (no election at all) is a
// figure, measured by make bench, not a bound a test can hold on any machine.
const maxWriteGap = 10 * harness.ElectionTimeout

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

// checkWrites asserts that the cluster kept quorum through the change the
// test made: writes succeed again after it, and the cluster never refused
// writes for longer than maxWriteGap.
func checkWrites(t *testing.T, w *harness.Writer) {
	t.Helper()
	after := time.Now()
	harness.Eventually(t, maxWriteGap, "a write succeeds after the membership change", func() error {
		if r := w.Report(); r.LastOK.Before(after) {
			return errorf("no write since %s; last error %v", after.Format(time.RFC3339Nano), r.LastErr)
		}
		return nil
	})
	w.Stop()
	r := w.Report()
	t.Logf("writer: %d writes, %d failed, longest gap %s", r.Writes, r.Failures, r.MaxGap)
	if r.MaxGap > maxWriteGap {
		t.Errorf("the cluster refused writes for %s (ending %s), longer than an election and a loaded machine explain (%s): quorum was lost; last error %v",
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
