package snapshot_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/test/harness"
	"github.com/etcdlet/etcdlet/test/s3test"
)

// BenchmarkFullSnapshot measures TakeFull from an etcd holding
// ETCDLET_BENCH_SNAPSHOT_MIB MiB (default 64) to a directory and to
// versitygw, against floors measured in the same run: what `etcdctl
// snapshot save` does (clientv3's snapshot.SaveWithVersion to a file), and
// that plus a plain PutObject of the file to the same S3. MB/s is database
// bytes per second; x-floor is the time over the floor's.
//
//	go test -run '^$' -bench FullSnapshot -benchtime 3x ./daemon/snapshot/
func BenchmarkFullSnapshot(b *testing.B) {
	mib := 64
	if v := os.Getenv("ETCDLET_BENCH_SNAPSHOT_MIB"); v != "" {
		var err error
		if mib, err = strconv.Atoi(v); err != nil || mib <= 0 {
			b.Fatalf("ETCDLET_BENCH_SNAPSHOT_MIB=%q: want a positive number of MiB", v)
		}
	}
	m := etcdtest.Start(b, 1)[0]
	cli := client(b, m.ClientURL)
	fill(b, cli, mib<<20)
	srv := s3test.Start(b)
	tmp := b.TempDir()
	ctx := context.Background()
	dbPath := filepath.Join(tmp, "etcdctl.db")
	save := func(b *testing.B) int64 {
		cfg := clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second}
		if _, err := clientsnapshot.SaveWithVersion(ctx, zap.NewNop(), cfg, dbPath); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(dbPath)
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	dbSize := save(b)
	b.Logf("database: %.1f MiB", float64(dbSize)/(1<<20))

	floors := map[string]time.Duration{}
	report := func(b *testing.B, floor string) {
		perOp := b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(dbSize)/1e6/perOp.Seconds(), "MB/s")
		if floor == "" {
			floors[b.Name()] = perOp
		} else if f := floors[floor]; f > 0 {
			b.ReportMetric(perOp.Seconds()/f.Seconds(), "x-floor")
		}
		b.ReportMetric(0, "ns/op") // the MB/s say it; ns/op of a multi-second op says little
	}
	saveName := b.Name() + "/floor-etcdctl-save"
	uploadName := b.Name() + "/floor-etcdctl-save+putobject"

	b.Run("floor-etcdctl-save", func(b *testing.B) {
		for b.Loop() {
			save(b)
		}
		report(b, "")
	})
	b.Run("floor-etcdctl-save+putobject", func(b *testing.B) {
		s3c := srv.Client()
		for i := 0; b.Loop(); i++ {
			save(b)
			f, err := os.Open(dbPath)
			if err != nil {
				b.Fatal(err)
			}
			key := fmt.Sprintf("floor/%d.db", i)
			_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: f})
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
		report(b, "")
	})

	local, err := snapshot.NewLocalStore(filepath.Join(tmp, "local"), "bench")
	if err != nil {
		b.Fatal(err)
	}
	remote, err := snapshot.NewS3Store(ctx, srv.S3Config("bench"))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store snapshot.Store
		c     snapshot.Compression
		floor string
	}{
		{"local/gzip", local, snapshot.Gzip, saveName},
		{"local/none", local, snapshot.None, saveName},
		{"s3/gzip", remote, snapshot.Gzip, uploadName},
		{"s3/none", remote, snapshot.None, uploadName},
	} {
		b.Run(tc.name, func(b *testing.B) {
			at := time.Unix(t0, 0)
			for b.Loop() {
				// A new name each time, as snapshots taken a second apart get.
				at = at.Add(time.Second)
				s, err := snapshot.TakeFull(ctx, cli, tc.store, snapshot.Options{Compression: tc.c, TempDir: tmp, Now: func() time.Time { return at }})
				if err != nil {
					b.Fatal(err)
				}
				if err := tc.store.Delete(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
			report(b, tc.floor)
		})
	}
}

// fill writes about size bytes of values that compress like Kubernetes
// objects do.
func fill(b *testing.B, cli *clientv3.Client, size int) {
	if err := harness.Fill(context.Background(), cli, size); err != nil {
		b.Fatal(err)
	}
}
