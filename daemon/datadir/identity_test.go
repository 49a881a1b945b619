package datadir

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// The identity read from the WAL is the one the member ran with, while it
// runs and after it stopped.
func TestReadIdentityOfARealMember(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := ReadIdentity(dir); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("no data dir: %v, want ErrNoIdentity", err)
	}
	e, _, stop := startMember(t, dir, 1, func(*embed.Config) {})
	want := Identity{MemberID: uint64(e.Server.MemberID()), ClusterID: uint64(e.Server.Cluster().ID())}
	if got, err := ReadIdentity(dir); err != nil || got != want {
		t.Errorf("while running: %+v, %v; want %+v", got, err, want)
	}
	stop()
	if got, err := ReadIdentity(dir); err != nil || got != want {
		t.Errorf("after stopping: %+v, %v; want %+v", got, err, want)
	}
}

// etcd cuts its write-ahead log into files of wal.SegmentSizeBytes (64 MB);
// every file after the first continues the checksum of the one before.
// The identity is read from the newest file, also once the log was cut
// (a cluster that took more than 64 MB of writes since its last
// snapshot: a 1 GiB keyspace, or a busy week).
func TestReadIdentityAfterTheLogWasCut(t *testing.T) {
	defer func(size int64) { wal.SegmentSizeBytes = size }(wal.SegmentSizeBytes)
	wal.SegmentSizeBytes = 16 << 10
	dir := filepath.Join(t.TempDir(), "data")
	e, client, stop := startMember(t, dir, 5, func(*embed.Config) {})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	value := strings.Repeat("v", 1<<10)
	for i := range 64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("/key/%d", i), value)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal")); len(files) < 3 {
		t.Fatalf("the log was not cut: %d files, want 3 or more (%v)", len(files), files)
	}
	want := Identity{MemberID: uint64(e.Server.MemberID()), ClusterID: uint64(e.Server.Cluster().ID())}
	if got, err := ReadIdentity(dir); err != nil || got != want {
		t.Errorf("while running: %+v, %v; want %+v", got, err, want)
	}
	stop()
	if got, err := ReadIdentity(dir); err != nil || got != want {
		t.Errorf("after stopping: %+v, %v; want %+v", got, err, want)
	}
}

// startMember starts a one-member etcd on dir, at memberURL(host, …),
// with tweak applied to its configuration, and waits until it is ready;
// stop stops it (once, whoever calls it; the test's end does too).
func startMember(t *testing.T, dir string, host int, tweak func(*embed.Config)) (e *embed.Etcd, client url.URL, stop func()) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir, cfg.LogLevel = dir, "error"
	peer, client := memberURL(host, 2380), memberURL(host, 2379)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	tweak(cfg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var closeOnce sync.Once
	stop = func() { closeOnce.Do(e.Close) } // Close must run once
	t.Cleanup(stop)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready within 30s")
	}
	return e, client, stop
}

// memberURL is a URL on a loopback address of this package's own,
// 127.62.0.0/24, with etcd's ports: no other test binds there, and a port
// below the ephemeral range cannot be taken by an outgoing connection in
// the moment between finding it free and binding it.
func memberURL(host, port int) url.URL {
	return url.URL{Scheme: "http", Host: net.JoinHostPort(fmt.Sprintf("127.62.0.%d", host), strconv.Itoa(port))}
}

// etcd creates its backend before it asks its peers for the cluster, so a
// join that fails (here: no peer answers; in a campaign: the new
// cluster had not decided its version yet) leaves member/snap/db without
// a WAL. That backend is no member's data: the node must retry on it,
// not move it aside (each retry would count against etcd.moveAsideLimit).
// A backend that applied entries stays data without its WAL.
func TestInspectTellsAFailedFirstStartFromData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	peer, client := memberURL(2, 2380), memberURL(2, 2379)
	absent := memberURL(3, 2380)
	cfg := embed.NewConfig()
	cfg.Dir, cfg.LogLevel = dir, "error"
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.Name + "=" + peer.String() + ",absent=" + absent.String()
	cfg.ClusterState = embed.ClusterStateFlagExisting
	if e, err := embed.StartEtcd(cfg); err == nil {
		e.Close()
		t.Fatal("a join whose only peer does not answer started")
	}
	if _, err := os.Stat(filepath.Join(dir, "member", "snap", "db")); err != nil {
		t.Fatalf("the failed start left no backend, nothing to tell apart: %v", err)
	}
	c, err := Inspect(dir)
	if err != nil || c.HasData() {
		t.Fatalf("after a failed first start: %+v, %v; want no data", c, err)
	}

	// Held by another process (here: another open of it), the backend
	// cannot be read for certain: it counts.
	held, err := bolt.Open(filepath.Join(dir, "member", "snap", "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Inspect(dir); err != nil || !c.Backend {
		t.Errorf("a backend held open elsewhere: %+v, %v; want data", c, err)
	}
	held.Close()

	// etcd starts on it as on an empty data dir; what it then applies is
	// data, also once the WAL is gone (a copy of the backend alone).
	cfg.InitialCluster, cfg.ClusterState = cfg.Name+"="+peer.String(), embed.ClusterStateFlagNew
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcd does not start on the backend a failed start left: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("etcd not ready within 30s")
	}
	e.Close()
	if err := os.Rename(filepath.Join(dir, "member", "wal"), filepath.Join(t.TempDir(), "wal")); err != nil {
		t.Fatal(err)
	}
	if c, err := Inspect(dir); err != nil || !c.HasData() || c.WAL {
		t.Errorf("a backend that applied entries, without its WAL: %+v, %v; want data", c, err)
	}
}
