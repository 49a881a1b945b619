package restore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
)

// The survivor of a two-member cluster, forced alone from its stopped
// data, restarts as the same member of the same cluster, alone, with
// every key written before; its old data dir is kept aside.
func TestForceAloneKeepsTheMemberAndItsWrites(t *testing.T) {
	members := etcdtest.Start(t, 2)
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdtest.ClientURLs(members), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 100 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/k%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	survivor := members[0]
	id, clusterID, dataDir := survivor.ID(), survivor.ClusterID(), survivor.Etcd.Config().Dir
	members[1].Close()
	survivor.Close()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	moved, _, err := ForceAlone(ctx, dataDir, survivor.Name, quiet, time.Now())
	if err != nil {
		t.Fatalf("ForceAlone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(moved, "member", "wal")); err != nil {
		t.Errorf("the old data dir is not kept aside at %s: %v", moved, err)
	}
	if _, err := os.Stat(dataDir + forcedSuffix); !os.IsNotExist(err) {
		t.Errorf("the work dir is left behind: %v", err)
	}

	e, err := embedded.Start(runtime.Spec{Name: survivor.Name, DataDir: dataDir,
		AdvertisePeerURL: survivor.PeerURL, ListenPeerURLs: []string{survivor.PeerURL},
		AdvertiseClientURL: survivor.ClientURL, ListenClientURLs: []string{survivor.ClientURL},
		InitialCluster: survivor.Name + "=" + survivor.PeerURL, InitialClusterState: runtime.StateExisting,
		ListenMetricsURL: "http://127.0.0.1:0", Token: "etcdtest", LogLevel: "error"}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.CloseServer(e)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("the forced member was not ready within 30s: it has no quorum alone")
	}
	alone, err := clientv3.New(clientv3.Config{Endpoints: []string{survivor.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	list, err := alone.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 1 || list.Members[0].ID != id || list.Members[0].PeerURLs[0] != survivor.PeerURL || list.Header.ClusterId != clusterID {
		t.Errorf("members %v of cluster %x, want only member %x (%s) of cluster %x", list.Members, list.Header.ClusterId, id, survivor.PeerURL, clusterID)
	}
	got, err := alone.Get(ctx, "/k", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || got.Count != 100 {
		t.Errorf("keys after the failover: %v, %v; want all 100", got, err)
	}
	if _, err := alone.Put(ctx, "/after", "v"); err != nil {
		t.Errorf("the forced member takes no write: %v", err)
	}
}

// A failover interrupted between moving the data dir aside and putting
// the forced copy in its place is finished by ResumeForced; a copy not
// marked complete, or a data dir that holds member data, is left alone.
func TestResumeForcedFinishesOnlyACompleteCopy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		marked     bool
		dataInDir  bool
		wantResume bool
	}{
		{"marked copy, empty data dir", true, false, true},
		{"copy not marked complete", false, false, false},
		{"the data dir holds member data", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			work := dataDir + forcedSuffix
			mkWAL := func(dir, content string) {
				if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "member", "wal", "0000000000000000-0000000000000000.wal"), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mkWAL(filepath.Join(work, "data"), "forced")
			if tc.marked {
				if err := os.WriteFile(filepath.Join(work, forcedMark), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.dataInDir {
				mkWAL(dataDir, "old")
			}
			resumed, err := ResumeForced(dataDir)
			if err != nil || resumed != tc.wantResume {
				t.Fatalf("ResumeForced = %v, %v; want %v", resumed, err, tc.wantResume)
			}
			wal, _ := os.ReadFile(filepath.Join(dataDir, "member", "wal", "0000000000000000-0000000000000000.wal"))
			switch {
			case tc.wantResume && string(wal) != "forced":
				t.Errorf("the data dir holds %q, want the forced copy", wal)
			case tc.dataInDir && string(wal) != "old":
				t.Errorf("the data dir holds %q, want its own data untouched", wal)
			}
			if _, err := os.Stat(work); tc.wantResume != os.IsNotExist(err) {
				t.Errorf("work dir after ResumeForced: %v", err)
			}
		})
	}
}
