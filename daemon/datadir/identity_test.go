package datadir

import (
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// The identity read from the WAL is the one the member ran with, while it
// runs and after it stopped.
func TestReadIdentityOfARealMember(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := ReadIdentity(dir); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("no data dir: %v, want ErrNoIdentity", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	peer, client := freeURL(t), freeURL(t)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var closeOnce sync.Once
	stop := func() { closeOnce.Do(e.Close) } // Close must run once
	defer stop()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready within 30s")
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

func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
