package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdlet/etcdlet/config/trust/trusttest"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/test/s3test"
)

// storeKind makes a store of one kind under a prefix, and puts a raw
// object beside its snapshots (what another tool or a crash leaves).
type storeKind struct {
	name   string
	open   func(t *testing.T, prefix string) snapshot.Store
	putRaw func(t *testing.T, key string, data []byte)
	// uploads counts the multipart uploads begun and neither completed
	// nor aborted (S3 keeps their parts); nil for the local store.
	uploads func(t *testing.T) int
}

// storeKinds are the local directory and versitygw.
func storeKinds(t *testing.T) []storeKind {
	dir := t.TempDir()
	srv := s3test.Start(t)
	return []storeKind{
		{
			name: "local",
			open: func(t *testing.T, prefix string) snapshot.Store {
				st, err := snapshot.NewLocalStore(dir, prefix)
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			putRaw: func(t *testing.T, key string, data []byte) {
				name := filepath.Join(dir, filepath.FromSlash(key))
				if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, data, 0o600); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "s3",
			open: func(t *testing.T, prefix string) snapshot.Store {
				st, err := snapshot.NewS3Store(t.Context(), srv.S3Config(prefix))
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			putRaw: func(t *testing.T, key string, data []byte) {
				_, err := srv.Client().PutObject(t.Context(), &s3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader(data)})
				if err != nil {
					t.Fatal(err)
				}
			},
			uploads: func(t *testing.T) int {
				out, err := srv.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &srv.Bucket})
				if err != nil {
					t.Fatal(err)
				}
				return len(out.Uploads)
			},
		},
	}
}

func named(t *testing.T, name string) snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.ParseName(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// failingReader gives n bytes, then an error: an upload cut off midway.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("source broke")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

func TestStores(t *testing.T) {
	for _, kind := range storeKinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			ctx := t.Context()
			st := kind.open(t, "etcd")
			full := named(t, "Full-00000000-00000042-1764000000.gz")
			delta := named(t, "Incr-00000043-00000050-1764000100.gz")
			final := named(t, "Full-00000000-00000050-1764000200.gz.final")
			// Over two multipart parts, so S3 takes the multipart path.
			big := randomBytes(19<<20, 1)
			for s, data := range map[snapshot.Snapshot][]byte{full: big, delta: []byte("delta"), final: {}} {
				if err := st.Put(ctx, s, bytes.NewReader(data)); err != nil {
					t.Fatal(err)
				}
			}
			for s, data := range map[snapshot.Snapshot][]byte{full: big, delta: []byte("delta"), final: {}} {
				if got := get(t, st, s); sha256.Sum256(got) != sha256.Sum256(data) {
					t.Errorf("%s: got %d bytes back, put %d", s.SnapName, len(got), len(data))
				}
			}

			// What is not a v2 snapshot name stays out of the list: a
			// temporary file, a note, BR's legacy v1 layout, chunks, and a
			// store whose prefix only starts the same.
			for _, key := range []string{
				"etcd/v2/.Full-00000000-00000060-1764000300.gz.partial-1", "etcd/v2/README",
				"etcd/v1/Backup-1764000000/Full-00000000-00000001-1764000000",
				"etcd/v2/Full-00000000-00000070-1764000400.gz/0001", "etcd2/v2/Full-00000000-00000080-1764000500.gz",
			} {
				kind.putRaw(t, key, []byte("x"))
			}
			list, err := st.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := names(list), "Full-00000000-00000042-1764000000.gz Incr-00000043-00000050-1764000100.gz Full-00000000-00000050-1764000200.gz.final"; got != want {
				t.Errorf("list: %s, want %s", got, want)
			}
			if list[0].Prefix != "etcd/v2/" {
				t.Errorf("prefix %q, want BR's etcd/v2/", list[0].Prefix)
			}

			if err := st.Delete(ctx, delta); err != nil {
				t.Fatal(err)
			}
			if err := st.Delete(ctx, delta); err != nil {
				t.Errorf("deleting an absent snapshot: %v", err)
			}
			if _, err := st.Get(ctx, delta); !errors.Is(err, snapshot.ErrNotFound) || !strings.Contains(err.Error(), delta.SnapName) {
				t.Errorf("get deleted: %v, want ErrNotFound naming it", err)
			}
			if list, _ := st.List(ctx); len(list) != 2 {
				t.Errorf("after delete: %s", names(list))
			}

			// Another prefix in the same place is another store.
			other := kind.open(t, "/etcd/other/")
			if list, err := other.List(ctx); err != nil || len(list) != 0 {
				t.Errorf("other prefix lists %s, %v", names(list), err)
			}
		})
	}
}

// TestPutIsAtomic: an upload that fails midway leaves nothing under the
// snapshot's name, in either store.
func TestPutIsAtomic(t *testing.T) {
	for _, kind := range storeKinds(t) {
		t.Run(kind.name, func(t *testing.T) {
			st := kind.open(t, "atomic")
			s := named(t, "Full-00000000-00000042-1764000000.gz")
			err := st.Put(t.Context(), s, &failingReader{n: 20 << 20})
			if err == nil || !strings.Contains(err.Error(), "source broke") || !strings.Contains(err.Error(), s.SnapName) {
				t.Fatalf("put: %v, want the source's error naming the snapshot", err)
			}
			if list, err := st.List(t.Context()); err != nil || len(list) != 0 {
				t.Errorf("after a failed put the store lists %s, %v", names(list), err)
			}
			if _, err := st.Get(t.Context(), s); !errors.Is(err, snapshot.ErrNotFound) {
				t.Errorf("get after a failed put: %v", err)
			}
			if kind.uploads != nil && kind.uploads(t) != 0 {
				t.Errorf("%d multipart uploads left behind", kind.uploads(t))
			}
			// A name List would not parse back is refused.
			if err := st.Put(t.Context(), snapshot.Snapshot{SnapName: "../Full-00000000-00000042-1764000000.gz"}, strings.NewReader("x")); err == nil {
				t.Error("put of a name with a '/' succeeded")
			}
		})
	}
}

func TestLocalStoreModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	st, err := snapshot.NewLocalStore(dir, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	s := named(t, "Full-00000000-00000042-1764000000.gz")
	if err := st.Put(t.Context(), s, strings.NewReader("db")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{
		dir:                              os.ModeDir | 0o700,
		filepath.Join(dir, "etcd", "v2"): os.ModeDir | 0o700,
		filepath.Join(dir, "etcd", "v2", s.SnapName): 0o600,
	} {
		if fi, err := os.Stat(name); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v, want %v", name, fi.Mode(), err, want)
		}
	}
	if st.String() != filepath.Join(dir, "etcd", "v2") {
		t.Errorf("String() = %s", st)
	}
	if _, err := snapshot.NewLocalStore(dir, "../up"); err == nil {
		t.Error("a prefix leaving the directory was accepted")
	}
}

// A local store is opened only in a directory only root can change: a
// planted object became the "newest full snapshot" restore used.
func TestLocalStoreMustBeTrusted(t *testing.T) {
	trusttest.RequireRoot(t)
	mkdir := func(t *testing.T, path string, mode os.FileMode, uid int) string {
		trusttest.Dir(t, path, mode)
		trusttest.Chown(t, path, uid, uid)
		return path
	}
	const nobody = trusttest.Nobody
	tests := []struct {
		name string
		// place makes the layout under root and returns the store's directory.
		place   func(t *testing.T, root string) string
		wantErr string // "": opens
	}{
		{"private directory", func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "snapshots"), 0o700, 0)
		}, ""},
		{"another user's directory", func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "snapshots"), 0o700, nobody)
		}, "ROOT/snapshots: ROOT/snapshots is owned by uid 65534"},
		{"group-writable directory", func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "snapshots"), 0o770, 0)
		}, "ROOT/snapshots: ROOT/snapshots is writable by group (mode 0770)"},
		{"not created yet, in another user's directory", func(t *testing.T, root string) string {
			return filepath.Join(mkdir(t, filepath.Join(root, "home"), 0o755, nobody), "snapshots")
		}, "ROOT/home/snapshots does not exist yet; ROOT/home, where it would be created: ROOT/home is owned by uid 65534"},
		{"a prefix directory planted by another user", func(t *testing.T, root string) string {
			dir := mkdir(t, filepath.Join(root, "snapshots"), 0o700, 0)
			mkdir(t, filepath.Join(dir, "etcd", "v2"), 0o700, nobody)
			return dir
		}, "ROOT/snapshots/etcd/v2: ROOT/snapshots/etcd/v2 is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			_, err := snapshot.NewLocalStore(tt.place(t, root), "etcd")
			want := strings.ReplaceAll(tt.wantErr, "ROOT", root)
			switch {
			case want == "" && err != nil:
				t.Fatalf("NewLocalStore = %v, want it opened", err)
			case want != "" && (err == nil || !strings.HasPrefix(err.Error(), "local snapshot store (backup.store.directory) must be a directory only root can change: "+want)):
				t.Fatalf("NewLocalStore = %v, want the refusal %q", err, want)
			}
		})
	}
}

func TestS3StoreConfig(t *testing.T) {
	srv := s3test.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		edit func(*snapshot.S3Config)
		err  string
	}{
		{"no bucket", func(c *snapshot.S3Config) { c.Bucket = "" }, "no bucket given"},
		{"no secret", func(c *snapshot.S3Config) { c.SecretAccessKey = "" }, "secret access key"},
		{"wrong secret", func(c *snapshot.S3Config) { c.SecretAccessKey = "wrong" }, "head bucket"},
		{"missing bucket", func(c *snapshot.S3Config) { c.Bucket = "nope" }, "head bucket"},
		{"bad CA file", func(c *snapshot.S3Config) { c.CAFile = "/nonexistent" }, "read CA file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := srv.S3Config("p")
			tc.edit(&c)
			if _, err := snapshot.NewS3Store(ctx, c); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
	st, err := snapshot.NewS3Store(ctx, srv.S3Config("/a/b/"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://etcdlet-test/a/b (" + srv.Endpoint + ")"; st.String() != want {
		t.Errorf("String() = %s, want %s", st, want)
	}
}

func get(t *testing.T, st snapshot.Store, s snapshot.Snapshot) []byte {
	t.Helper()
	rc, err := st.Get(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func names(list []snapshot.Snapshot) string {
	var n []string
	for _, s := range list {
		n = append(n, s.SnapName)
	}
	return strings.Join(n, " ")
}

// TestS3VersionedBucket: on a bucket with versioning (object lock needs
// it), List keeps each key's oldest version, as BR does, and Get and
// Delete address that version.
func TestS3VersionedBucket(t *testing.T) {
	srv := s3test.Start(t, s3test.Versioned())
	ctx := t.Context()
	st, err := snapshot.NewS3Store(ctx, srv.S3Config("etcd"))
	if err != nil {
		t.Fatal(err)
	}
	s := named(t, "Full-00000000-00000042-1764000000.gz")
	for _, content := range []string{"first", "second"} {
		if err := st.Put(ctx, s, strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 1 || list[0].VersionID == nil {
		t.Fatalf("list: %+v, %v; want one snapshot with a version", list, err)
	}
	if got := string(get(t, st, list[0])); got != "first" {
		t.Errorf("get the listed version: %q, want the oldest, first", got)
	}
	if err := st.Delete(ctx, list[0]); err != nil {
		t.Fatal(err)
	}
	list, err = st.List(ctx)
	if err != nil || len(list) != 1 || string(get(t, st, list[0])) != "second" {
		t.Fatalf("after deleting the oldest version: %+v, %v", list, err)
	}
}
