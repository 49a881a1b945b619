package snapshot_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/internal/testbin"
)

// The member etcdbrctl restores, and the store it reads: BR's Local
// provider reads $HOME/<container>/<prefix>/v2/.
const (
	brMember         = "m1"
	brPeerURL        = "http://127.0.0.1:23801"
	brInitialCluster = brMember + "=" + brPeerURL
	brClusterToken   = "etcd-cluster"
	brContainer      = "backups"
	brPrefix         = "etcd-main"
)

// TestEtcdbrctlRestoresEtcdletSnapshots: BR's own restore (etcdbrctl
// restore, its Local provider) reads the snapshots etcdlet writes, a full
// snapshot in every compression and a full snapshot followed by deltas,
// and the data it restores is the source cluster's.
func TestEtcdbrctlRestoresEtcdletSnapshots(t *testing.T) {
	bin := testbin.Executable(t, "ETCDLET_ETCDBRCTL", "", "export ETCDLET_ETCDBRCTL=$(hack/etcdbrctl.sh) (builds BR's etcdbrctl once into the cache) or run make test")
	src := cluster(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(5, 6))
	value := func() string { return strings.Repeat(fmt.Sprint(r.IntN(10)), 1+r.IntN(100)) }
	for i := range 300 {
		put(t, src, fmt.Sprintf("/registry/k%04d", i), value())
	}
	compressions := []snapshot.Compression{snapshot.Gzip, snapshot.LZW, snapshot.Zlib, snapshot.None}

	t.Run("full", func(t *testing.T) {
		for _, c := range compressions {
			t.Run(string(c), func(t *testing.T) {
				home, st := brStore(t)
				full, err := snapshot.TakeFull(ctx, src, st, snapshot.Options{Compression: c, TempDir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(full.SnapName, c.Suffix()) {
					t.Fatalf("snapshot %s does not end in %q", full.SnapName, c.Suffix())
				}
				dataDir := etcdbrctlRestore(t, bin, home)

				restored := startRestored(t, dataDir)
				got, err := restored.Get(ctx, "", clientv3.WithPrefix())
				if err != nil {
					t.Fatal(err)
				}
				if got.Header.Revision != full.LastRevision {
					t.Errorf("restored revision %d, want the snapshot's %d", got.Header.Revision, full.LastRevision)
				}
				compareKeyspace(t, got.Kvs, sourceAt(t, src, full.LastRevision))
			})
		}
	})

	// Each chain is a full snapshot and two deltas, all in one compression.
	t.Run("deltas", func(t *testing.T) {
		for _, c := range compressions {
			t.Run(string(c), func(t *testing.T) {
				home, st := brStore(t)
				o := snapshot.Options{Compression: c, TempDir: t.TempDir()}
				full, err := snapshot.TakeFull(ctx, src, st, o)
				if err != nil {
					t.Fatal(err)
				}

				// New keys, overwrites, deletes, a transaction of several
				// events at one revision, a key deleted and created again.
				for range 100 {
					put(t, src, fmt.Sprintf("/registry/k%04d", r.IntN(400)), value())
				}
				for range 20 {
					if _, err := src.Delete(ctx, fmt.Sprintf("/registry/k%04d", r.IntN(400))); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := src.Txn(ctx).Then(
					clientv3.OpPut("/registry/txn-"+string(c), value()),
					clientv3.OpDelete(fmt.Sprintf("/registry/k%04d", r.IntN(400))),
					clientv3.OpPut(fmt.Sprintf("/registry/k%04d", r.IntN(400)), value()),
				).Commit(); err != nil {
					t.Fatal(err)
				}
				recreated := fmt.Sprintf("/registry/k%04d", r.IntN(300))
				put(t, src, recreated, "before")
				if _, err := src.Delete(ctx, recreated); err != nil {
					t.Fatal(err)
				}
				put(t, src, recreated, "after")
				d1, err := snapshot.TakeDelta(ctx, src, st, full, o)
				if err != nil || d1 == nil {
					t.Fatalf("first delta: %v, %v", d1, err)
				}

				// A range delete: many events at one revision.
				if _, err := src.Delete(ctx, fmt.Sprintf("/registry/k%03d", r.IntN(40)), clientv3.WithPrefix()); err != nil {
					t.Fatal(err)
				}
				for range 50 {
					put(t, src, fmt.Sprintf("/registry/k%04d", r.IntN(400)), value())
				}
				put(t, src, "/registry/empty-"+string(c), "")
				if _, err := src.Delete(ctx, fmt.Sprintf("/registry/k%04d", r.IntN(400))); err != nil {
					t.Fatal(err)
				}
				d2, err := snapshot.TakeDelta(ctx, src, st, *d1, o)
				if err != nil || d2 == nil {
					t.Fatalf("second delta: %v, %v", d2, err)
				}
				if latest, deltas, err := snapshot.Latest(ctx, st); err != nil || latest == nil || latest.SnapName != full.SnapName || names(deltas) != d1.SnapName+" "+d2.SnapName {
					t.Fatalf("the store's latest chain is %v %s (%v), want %s %s %s", latest, names(deltas), err, full.SnapName, d1.SnapName, d2.SnapName)
				}

				dataDir := etcdbrctlRestore(t, bin, home)

				// etcd 3.7 does not start on a WAL BR's embedded etcd 3.5
				// wrote, so read the restored database itself.
				got, rev := boltKeyspace(t, filepath.Join(dataDir, "member", "snap", "db"))
				if rev != d2.LastRevision {
					t.Errorf("restored revision %d, want the last delta's %d", rev, d2.LastRevision)
				}
				compareKeyspace(t, got, sourceAt(t, src, d2.LastRevision))

				if c == snapshot.None {
					// The control: BR does check the sha256 trailer of
					// the deltas it applies, so the success above means it
					// accepted etcdlet's.
					name := filepath.Join(st.String(), d2.SnapName)
					b, err := os.ReadFile(name)
					if err != nil {
						t.Fatal(err)
					}
					b[len(b)/2] ^= 1
					if err := os.WriteFile(name, b, 0o600); err != nil {
						t.Fatal(err)
					}
					out, err := runEtcdbrctlRestore(t, bin, home, filepath.Join(t.TempDir(), "corrupt.etcd"))
					if err == nil || !strings.Contains(out, "expected sha256") {
						t.Errorf("etcdbrctl restore with a corrupt delta: %v, want exit 1 and a sha256 mismatch\n%s", err, out)
					}
				}
			})
		}
	})
}

// brStore returns a HOME for etcdbrctl and the etcdlet store its Local
// provider reads there.
func brStore(t *testing.T) (string, *snapshot.LocalStore) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	// BR keeps only files whose path contains "v1" or "v2" and parses a
	// path as the legacy v1 layout when it contains "v1/" anywhere: a v1
	// or v2 in the directories above the store makes it skip or misread
	// every snapshot and find no base snapshot.
	if strings.Contains(home, "v1") || strings.Contains(home, "v2") {
		t.Fatalf("the temporary directory %s contains v1 or v2, which BR's Local provider misreads; set TMPDIR elsewhere", home)
	}
	st, err := snapshot.NewLocalStore(filepath.Join(home, brContainer), brPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, brContainer, brPrefix, "v2"); st.String() != want {
		t.Fatalf("the store is at %s, BR reads %s", st, want)
	}
	return home, st
}

// etcdbrctlRestore runs etcdbrctl restore from the Local store under home
// into a new data dir, which it returns.
func etcdbrctlRestore(t *testing.T, bin, home string) string {
	t.Helper()
	dataDir := filepath.Join(filepath.Dir(home), "restored.etcd")
	start := time.Now()
	out, err := runEtcdbrctlRestore(t, bin, home, dataDir)
	if err != nil {
		t.Fatalf("etcdbrctl restore: %v\n%s", err, out)
	}
	// BR exits 0 having done nothing when it finds no base snapshot.
	if _, err := os.Stat(filepath.Join(dataDir, "member", "snap", "db")); err != nil {
		t.Fatalf("etcdbrctl restore exited 0 but restored no database: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Successfully restored the etcd data directory") {
		t.Errorf("etcdbrctl restore did not report success:\n%s", out)
	}
	t.Logf("etcdbrctl restore took %v", time.Since(start).Round(time.Millisecond))
	return dataDir
}

// runEtcdbrctlRestore runs etcdbrctl restore from the Local store under
// home into dataDir and returns its output (it logs to stderr).
func runEtcdbrctlRestore(t *testing.T, bin, home, dataDir string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "restore",
		"--storage-provider=Local", "--store-container="+brContainer, "--store-prefix="+brPrefix,
		"--data-dir="+dataDir, "--restoration-temp-snapshots-dir="+filepath.Join(tmp, "restore.tmp"),
		"--name="+brMember, "--initial-cluster="+brInitialCluster, "--initial-advertise-peer-urls="+brPeerURL,
		"--initial-cluster-token="+brClusterToken, "--snapstore-temp-directory="+filepath.Join(tmp, "sstmp"))
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }), "HOME="+home)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// startRestored starts etcd as the restored member on its data dir, on
// ports of 127.0.0.1 the kernel picks, and returns a client of it.
func startRestored(t *testing.T, dataDir string) *clientv3.Client {
	t.Helper()
	local := []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}
	peer, err := url.Parse(brPeerURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = brMember, dataDir
	cfg.InitialCluster, cfg.InitialClusterToken = brInitialCluster, brClusterToken
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = local, local
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = local, []url.URL{*peer}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd on the data dir etcdbrctl restored: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd on the data dir etcdbrctl restored: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd on the data dir etcdbrctl restored was not ready within 30s")
	}
	return client(t, "http://"+e.Clients[0].Addr().String())
}

// sourceAt is the source's whole keyspace at rev, sorted by key.
func sourceAt(t *testing.T, cli *clientv3.Client, rev int64) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(t.Context(), "", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

// boltKeyspace reads the live keys of an etcd database, sorted by key, and
// its revision, from the revisions in its "key" bucket: a key is its main
// revision (8 bytes, big-endian), '_', its sub revision (8 bytes), and a
// 't' when the revision deleted the key.
func boltKeyspace(t *testing.T, name string) ([]*mvccpb.KeyValue, int64) {
	t.Helper()
	db, err := bolt.Open(name, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	live := map[string]*mvccpb.KeyValue{}
	var rev int64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New(`no "key" bucket`)
		}
		// Keys sort as their revisions: a bolt cursor walks them in
		// revision order, so the last event of a key wins.
		return b.ForEach(func(k, v []byte) error {
			tombstone := len(k) == 18 && k[17] == 't'
			if len(k) != 17 && !tombstone || k[8] != '_' {
				return fmt.Errorf("%x is not a revision key", k)
			}
			main := int64(binary.BigEndian.Uint64(k[:8]))
			if main < rev {
				return fmt.Errorf("revision %d after %d", main, rev)
			}
			rev = main
			kv := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(v, kv); err != nil {
				return fmt.Errorf("revision %x: %w", k, err)
			}
			if tombstone {
				delete(live, string(kv.Key))
			} else {
				live[string(kv.Key)] = kv
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	kvs := make([]*mvccpb.KeyValue, 0, len(live))
	for _, kv := range live {
		kvs = append(kvs, kv)
	}
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return kvs, rev
}

// compareKeyspace fails the test unless the restored keys, values and
// revisions are the source's.
func compareKeyspace(t *testing.T, got, want []*mvccpb.KeyValue) {
	t.Helper()
	if len(want) < 100 {
		t.Fatalf("the source has only %d keys", len(want))
	}
	i, j, bad := 0, 0, 0
	for (i < len(got) || j < len(want)) && bad < 5 {
		switch {
		case j == len(want) || i < len(got) && string(got[i].Key) < string(want[j].Key):
			t.Errorf("restored key %q is not in the source", got[i].Key)
			i, bad = i+1, bad+1
		case i == len(got) || string(want[j].Key) < string(got[i].Key):
			t.Errorf("source key %q was not restored", want[j].Key)
			j, bad = j+1, bad+1
		default:
			g, w := got[i], want[j]
			if !bytes.Equal(g.Value, w.Value) || g.CreateRevision != w.CreateRevision || g.ModRevision != w.ModRevision || g.Version != w.Version || g.Lease != w.Lease {
				t.Errorf("key %q: restored value %q create %d mod %d version %d lease %d, source %q %d %d %d %d",
					g.Key, g.Value, g.CreateRevision, g.ModRevision, g.Version, g.Lease, w.Value, w.CreateRevision, w.ModRevision, w.Version, w.Lease)
				bad++
			}
			i, j = i+1, j+1
		}
	}
	if len(got) != len(want) {
		t.Errorf("restored %d keys, the source has %d", len(got), len(want))
	}
}
