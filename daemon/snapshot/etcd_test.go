package snapshot_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// cluster starts a one-member etcd and returns a client bound to it.
func cluster(t testing.TB) *clientv3.Client {
	t.Helper()
	m := etcdtest.Start(t, 1)[0]
	return client(t, m.ClientURL)
}

func client(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func put(t testing.TB, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := cli.Put(context.Background(), key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// emptyDir fails the test if the snapshot left temporary files behind.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d temporary files left in %s, e.g. %s", len(entries), dir, entries[0].Name())
	}
}

func TestTakeFull(t *testing.T) {
	cli := cluster(t)
	var rev int64
	for i := range 100 {
		rev = put(t, cli, fmt.Sprintf("/registry/k%03d", i), strings.Repeat("v", i))
	}
	kinds := storeKinds(t)
	for _, tc := range []struct {
		store int
		c     snapshot.Compression
		final bool
	}{
		{0, snapshot.Gzip, false}, {0, snapshot.LZW, false}, {0, snapshot.Zlib, true}, {0, snapshot.None, false},
		{1, snapshot.Gzip, false}, {1, snapshot.None, true},
	} {
		t.Run(fmt.Sprintf("%s/%s/final=%v", kinds[tc.store].name, tc.c, tc.final), func(t *testing.T) {
			st := kinds[tc.store].open(t, "full-"+string(tc.c))
			tmp := t.TempDir()
			at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
			s, err := snapshot.TakeFull(t.Context(), cli, st, snapshot.Options{Compression: tc.c, TempDir: tmp, Final: tc.final, Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			emptyDir(t, tmp)
			want := fmt.Sprintf("Full-00000000-%08d-%d%s", rev, at.Unix(), tc.c.Suffix())
			if tc.final {
				want += ".final"
			}
			if s.SnapName != want || s.Kind != snapshot.KindFull || s.LastRevision != rev || s.IsFinal != tc.final || !s.CreatedOn.Equal(at) {
				t.Errorf("snapshot %+v, want name %s", s, want)
			}
			list, err := st.List(t.Context())
			if err != nil || len(list) != 1 || list[0].SnapName != want {
				t.Fatalf("list: %s, %v", names(list), err)
			}
			db := filepath.Join(t.TempDir(), "db")
			readFullTo(t, st, list[0], db)
			status, err := etcdutl.NewV3(zap.NewNop()).Status(db)
			if err != nil {
				t.Fatal(err)
			}
			if status.Revision < rev || status.TotalKey < 100 {
				t.Errorf("the stored database is at revision %d with %d keys, want %d and 100", status.Revision, status.TotalKey, rev)
			}
		})
	}
}

func readFullTo(t *testing.T, st snapshot.Store, s snapshot.Snapshot, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := snapshot.ReadFull(t.Context(), st, s, f); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size()%512 != 32 {
		t.Errorf("%d bytes: not a database with its sha256 trailer", fi.Size())
	}
}

// TestReadFullChecksSHA: a byte flipped in the stored database, whether the
// object is compressed or not, fails the read with a sha256 error.
func TestReadFullChecksSHA(t *testing.T) {
	cli := cluster(t)
	put(t, cli, "k", "v")
	dir := t.TempDir()
	st, err := snapshot.NewLocalStore(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c       snapshot.Compression
		corrupt func([]byte) []byte
		err     string
	}{
		{snapshot.None, flip, "sha256 mismatch"},
		{snapshot.Gzip, func(b []byte) []byte { return gz(t, flip(ungz(t, b))) }, "sha256 mismatch"},
		{snapshot.None, func(b []byte) []byte { return b[:len(b)-1] }, "not a multiple of 512 plus a 32-byte sha256 trailer"},
	} {
		t.Run(string(tc.c)+"/"+tc.err, func(t *testing.T) {
			s, err := snapshot.TakeFull(t.Context(), cli, st, snapshot.Options{Compression: tc.c, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(dir, "v2", s.SnapName)
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, tc.corrupt(b), 0o600); err != nil {
				t.Fatal(err)
			}
			err = snapshot.ReadFull(t.Context(), st, s, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), s.SnapName) {
				t.Errorf("error %v, want %q naming the snapshot", err, tc.err)
			}
			if err := st.Delete(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// flip flips a byte in the middle of the database (not its trailer).
func flip(b []byte) []byte {
	b = bytes.Clone(b)
	b[len(b)/2] ^= 0x40
	return b
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ungz(t *testing.T, b []byte) []byte {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantEvent is an event as a test expects it.
type wantEvent struct {
	typ        mvccpb.Event_EventType
	key, value string
	rev        int64
}

func TestTakeDelta(t *testing.T) {
	cli := cluster(t)
	ctx := t.Context()
	for _, kind := range storeKinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			k := func(name string) string { return kind.name + "/" + name }
			for i := range 4 {
				put(t, cli, k(fmt.Sprint(i)), "v")
			}
			st := kind.open(t, "delta")
			tmp := t.TempDir()
			o := snapshot.Options{Compression: snapshot.LZW, TempDir: tmp}
			full, err := snapshot.TakeFull(ctx, cli, st, o)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := snapshot.TakeDelta(ctx, cli, st, full, o); d != nil || err != nil {
				t.Fatalf("a delta without events: %+v, %v", d, err)
			}

			var want []wantEvent
			rev := put(t, cli, k("1"), "changed")
			want = append(want, wantEvent{mvccpb.Event_PUT, k("1"), "changed", rev})
			resp, err := cli.Delete(ctx, k("2"))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, wantEvent{mvccpb.Event_DELETE, k("2"), "", resp.Header.Revision})
			txn, err := cli.Txn(ctx).Then(clientv3.OpPut(k("new"), "\x00binary\xff"), clientv3.OpDelete(k("3")), clientv3.OpPut(k("empty"), "")).Commit()
			if err != nil {
				t.Fatal(err)
			}
			r := txn.Header.Revision
			want = append(want, wantEvent{mvccpb.Event_PUT, k("new"), "\x00binary\xff", r}, wantEvent{mvccpb.Event_DELETE, k("3"), "", r}, wantEvent{mvccpb.Event_PUT, k("empty"), "", r})

			d, err := snapshot.TakeDelta(ctx, cli, st, full, o)
			if err != nil {
				t.Fatal(err)
			}
			emptyDir(t, tmp)
			if d == nil || d.Kind != snapshot.KindDelta || d.StartRevision != full.LastRevision+1 || d.LastRevision != r || !strings.HasSuffix(d.SnapName, ".Z") {
				t.Fatalf("delta %+v, want revisions %d-%d", d, full.LastRevision+1, r)
			}
			events, err := snapshot.ReadDelta(ctx, st, *d)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(events); got != describeWant(want) {
				t.Errorf("events\n%s\nwant\n%s", got, describeWant(want))
			}
			if again, err := snapshot.TakeDelta(ctx, cli, st, *d, o); again != nil || err != nil {
				t.Errorf("a second delta without events: %+v, %v", again, err)
			}
			full2, deltas, err := snapshot.Latest(ctx, st)
			if err != nil || full2 == nil || full2.SnapName != full.SnapName || names(deltas) != d.SnapName {
				t.Errorf("latest: %v, %s, %v", full2, names(deltas), err)
			}
		})
	}
}

func describe(events []*mvccpb.Event) string {
	var b strings.Builder
	for _, ev := range events {
		fmt.Fprintf(&b, "%s %q=%q @%d\n", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
	}
	return b.String()
}

func describeWant(want []wantEvent) string {
	var b strings.Builder
	for _, w := range want {
		fmt.Fprintf(&b, "%s %q=%q @%d\n", w.typ, w.key, w.value, w.rev)
	}
	return b.String()
}

func TestTakeDeltaAfterCompaction(t *testing.T) {
	cli := cluster(t)
	ctx := t.Context()
	st, err := snapshot.NewLocalStore(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	o := snapshot.Options{TempDir: t.TempDir()}
	put(t, cli, "a", "1")
	full, err := snapshot.TakeFull(ctx, cli, st, o)
	if err != nil {
		t.Fatal(err)
	}
	put(t, cli, "a", "2")
	rev := put(t, cli, "a", "3")
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	d, err := snapshot.TakeDelta(ctx, cli, st, full, o)
	if d != nil || !errors.Is(err, snapshot.ErrCompacted) || !strings.Contains(err.Error(), "a full snapshot is needed") || !strings.Contains(err.Error(), full.SnapName) {
		t.Errorf("delta after compaction: %+v, %v; want ErrCompacted naming %s", d, err, full.SnapName)
	}
	if list, _ := st.List(ctx); len(list) != 1 {
		t.Errorf("the store holds %s", names(list))
	}
	emptyDir(t, o.TempDir)
}
