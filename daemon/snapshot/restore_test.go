package snapshot_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// TestRestore proves the data: a full snapshot and two deltas (puts,
// updates, deletes, a transaction) restored into a fresh data dir give an
// etcd whose every key, value and revision is the source's.
func TestRestore(t *testing.T) {
	src := cluster(t)
	ctx := t.Context()
	srv := storeKinds(t)[1] // versitygw: the path a real restore takes
	st := srv.open(t, "restore")
	r := rand.New(rand.NewPCG(3, 4))
	value := func() string { return strings.Repeat(fmt.Sprint(r.IntN(10)), r.IntN(200)) }
	for i := range 1000 {
		put(t, src, fmt.Sprintf("/registry/k%04d", i), value())
	}
	lease, err := src.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Put(ctx, "/registry/leased", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	o := snapshot.Options{TempDir: t.TempDir()}
	full, err := snapshot.TakeFull(ctx, src, st, o)
	if err != nil {
		t.Fatal(err)
	}

	for range 300 {
		put(t, src, fmt.Sprintf("/registry/k%04d", r.IntN(1300)), value())
	}
	for i := range 100 {
		if _, err := src.Delete(ctx, fmt.Sprintf("/registry/k%04d", 3*i)); err != nil {
			t.Fatal(err)
		}
	}
	d1, err := snapshot.TakeDelta(ctx, src, st, full, o)
	if err != nil || d1 == nil {
		t.Fatalf("delta: %v, %v", d1, err)
	}
	if _, err := src.Txn(ctx).Then(clientv3.OpPut("/registry/txn", "1"), clientv3.OpDelete("/registry/k0001"), clientv3.OpPut("/registry/k0002", "x")).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Delete(ctx, "/registry/k01", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	put(t, src, "/registry/last", "")
	d2, err := snapshot.TakeDelta(ctx, src, st, *d1, o)
	if err != nil || d2 == nil {
		t.Fatalf("delta: %v, %v", d2, err)
	}

	chainFull, deltas, err := snapshot.Chain(ctx, st, "")
	if err != nil || chainFull.SnapName != full.SnapName || names(deltas) != d1.SnapName+" "+d2.SnapName {
		t.Fatalf("chain: %s %s, %v", chainFull.SnapName, names(deltas), err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	// The leftover of an interrupted restore is replaced.
	if err := os.MkdirAll(filepath.Join(dataDir+".partial", "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	ro := snapshot.RestoreOptions{
		Store: st, Full: chainFull, Deltas: deltas, DataDir: dataDir,
		Name: "restored", PeerURL: "https://10.0.0.1:2380", InitialClusterToken: "etcdlet-restore", TempDir: t.TempDir(),
	}
	if rev, err := snapshot.Restore(ctx, ro); err != nil || rev != d2.LastRevision {
		t.Fatalf("restore: revision %d, %v; want %d", rev, err, d2.LastRevision)
	}
	emptyDir(t, ro.TempDir)
	if _, err := os.Stat(dataDir + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the .partial dir is still there: %v", err)
	}

	restored := startOn(t, dataDir, "restored")
	want, err := src.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got, err := restored.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Revision != want.Header.Revision || got.Header.Revision != d2.LastRevision {
		t.Errorf("restored revision %d, source %d, last delta %d", got.Header.Revision, want.Header.Revision, d2.LastRevision)
	}
	if len(got.Kvs) != len(want.Kvs) {
		t.Errorf("restored %d keys, source has %d", len(got.Kvs), len(want.Kvs))
	}
	for i := range min(len(got.Kvs), len(want.Kvs)) {
		g, w := got.Kvs[i], want.Kvs[i]
		if string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) ||
			g.CreateRevision != w.CreateRevision || g.ModRevision != w.ModRevision || g.Version != w.Version {
			t.Errorf("key %d: restored %s, source %s", i, g, w)
			break
		}
	}
	members, err := restored.MemberList(ctx)
	if err != nil || len(members.Members) != 1 || members.Members[0].Name != "restored" || members.Members[0].PeerURLs[0] != ro.PeerURL {
		t.Errorf("members %v, %v; want the one restored member advertising %s", members, err, ro.PeerURL)
	}

	// A data dir that exists is never overwritten.
	if _, err := snapshot.Restore(ctx, ro); err == nil || !strings.Contains(err.Error(), "the data dir exists") {
		t.Errorf("restore over an existing data dir: %v", err)
	}
	// A gap in the deltas is refused before anything is written.
	ro.DataDir, ro.Deltas = filepath.Join(t.TempDir(), "gap"), []snapshot.Snapshot{*d2}
	if _, err := snapshot.Restore(ctx, ro); err == nil || !strings.Contains(err.Error(), "revisions") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("restore with a gap: %v", err)
	}
	if _, err := os.Stat(ro.DataDir + ".partial"); !os.IsNotExist(err) {
		t.Errorf("a refused restore left %s.partial", ro.DataDir)
	}
}

// A restore with a revision bump never lets a revision go backwards for
// a client: the restored revision is the snapshots' plus the bump, and
// every revision up to it is compacted, so that a watch resumed from a
// revision the lost cluster served, or a read at one, gets a compaction
// error instead of old data. The keys keep their values and revisions;
// the old cluster's agent keys are dropped. With deltas (replayed first,
// then bumped) and without.
func TestRestoreBumpsTheRevision(t *testing.T) {
	src := cluster(t)
	ctx := t.Context()
	st := storeKinds(t)[0].open(t, "bump")
	o := snapshot.Options{TempDir: t.TempDir()}
	for i := range 50 {
		put(t, src, fmt.Sprintf("/registry/k%02d", i), "full")
	}
	put(t, src, "/etcdlet/_id/1/member-list", "old")
	full, err := snapshot.TakeFull(ctx, src, st, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		put(t, src, fmt.Sprintf("/registry/k%02d", i), "delta")
	}
	delta, err := snapshot.TakeDelta(ctx, src, st, full, o)
	if err != nil || delta == nil {
		t.Fatalf("delta: %v, %v", delta, err)
	}
	const bump = 1000
	for _, tc := range []struct {
		name   string
		deltas []snapshot.Snapshot
		last   int64 // the snapshots' revision
		value  string
	}{
		{"full only", nil, full.LastRevision, "full"},
		{"full and delta", []snapshot.Snapshot{*delta}, delta.LastRevision, "delta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			ro := snapshot.RestoreOptions{Store: st, Full: full, Deltas: tc.deltas, DataDir: dataDir, Name: "restored",
				PeerURL: "https://10.0.0.1:2380", TempDir: t.TempDir(), RevisionBump: bump, DropPrefixes: []string{"/etcdlet/"}}
			rev, err := snapshot.Restore(ctx, ro)
			if err != nil {
				t.Fatal(err)
			}
			emptyDir(t, ro.TempDir)
			// Past the bump: one more revision for the dropped agent keys
			// when they are dropped after it (full only).
			if rev < tc.last+bump || rev > tc.last+bump+1 {
				t.Fatalf("restored at revision %d, want %d (+1)", rev, tc.last+bump)
			}
			restored := startOn(t, dataDir, "restored")
			got, err := restored.Get(ctx, "/registry/k00")
			if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != tc.value || got.Header.Revision != rev {
				t.Fatalf("get after the restore: %v, %v; want %q at revision %d", got, err, tc.value, rev)
			}
			if got.Kvs[0].ModRevision > tc.last {
				t.Errorf("the key's mod revision %d moved past the snapshots' %d: keys keep their revisions", got.Kvs[0].ModRevision, tc.last)
			}
			if _, err := restored.Get(ctx, "/registry/k00", clientv3.WithRev(tc.last)); err == nil || !strings.Contains(err.Error(), "compacted") {
				t.Errorf("a read at the lost cluster's revision %d: %v, want a compaction error", tc.last, err)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp := <-restored.Watch(wctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(tc.last+1))
			if resp.CompactRevision < tc.last+bump {
				t.Errorf("a watch resumed from revision %d: compact revision %d, err %v, %d events; want it compacted at %d", tc.last+1, resp.CompactRevision, resp.Err(), len(resp.Events), tc.last+bump)
			}
			if agent, err := restored.Get(ctx, "/etcdlet/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || agent.Count != 0 {
				t.Errorf("the old cluster's agent keys: %v, %v; want them dropped", agent, err)
			}
		})
	}
}

// startOn starts etcd on a data dir, on ports of 127.0.0.1 the kernel
// picks, and returns a client of it.
func startOn(t *testing.T, dir, name string) *clientv3.Client {
	t.Helper()
	local := []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls, cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = local, local, local, local
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd on the restored data dir was not ready within 30s")
	}
	return client(t, "http://"+e.Clients[0].Addr().String())
}
