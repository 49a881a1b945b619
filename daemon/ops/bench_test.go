package ops_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/ops"
)

// BenchmarkDefrag measures the rolling defragmentation task (Admit and
// Execute, threshold 0) on a 3-member cluster whose members each hold a
// backend of ETCDLET_BENCH_DEFRAG_MIB MiB (default 32), half of it free,
// against a floor measured in the same run on the same cluster: a direct
// Maintenance.Defragment of each member, one after the other. Both report
// ms/member (wall time / 3); the task also reports x-floor, its time over
// the floor's. The backend is fragmented again, outside the timer, before
// every measured run (the number of keys is calibrated once, so that the
// backend has the size asked for).
//
//	go test -run '^$' -bench Defrag ./daemon/ops/
func BenchmarkDefrag(b *testing.B) {
	mib := 32
	if v := os.Getenv("ETCDLET_BENCH_DEFRAG_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("ETCDLET_BENCH_DEFRAG_MIB=%q: want a number of MiB, 1 or more", v)
		}
		mib = n
	}
	members := etcdtest.Start(b, 3)
	urls := etcdtest.ClientURLs(members)
	spy := newSpy(b)
	cli := client(b, spy, urls)
	const valueSize = 16 << 10
	keys := mib << 20 / valueSize
	ctx := context.Background()
	// refragment fills each member's backend to about mib MiB and frees
	// every other key; it returns the average backend size.
	refragment := func(b *testing.B) float64 {
		fragment(b, cli, spy.Pool, urls, "/bench/", keys, valueSize, 2)
		var sum int64
		for _, ep := range urls {
			st, err := spy.Pool.Status(ctx, ep)
			if err != nil {
				b.Fatal(err)
			}
			sum += st.DbSize
		}
		return float64(sum) / float64(len(urls)) / (1 << 20)
	}
	// calibrate: bolt's pages and headers make the backend larger than
	// the values; scale the number of keys to the wanted size
	if size := refragment(b); size > 0 {
		keys = max(2, int(float64(keys)*float64(mib)/size))
	}
	perMember := func(d time.Duration, runs int) float64 {
		return float64(d) / float64(time.Millisecond) / float64(runs*len(urls))
	}

	var floor float64
	b.Run("floor", func(b *testing.B) {
		var spent time.Duration
		var size float64
		for range b.N {
			b.StopTimer()
			size = refragment(b)
			b.StartTimer()
			start := time.Now()
			for _, ep := range urls {
				if _, err := cli.Defragment(ctx, ep); err != nil {
					b.Fatal(err)
				}
			}
			spent += time.Since(start)
		}
		floor = perMember(spent, b.N)
		b.ReportMetric(floor, "ms/member")
		b.ReportMetric(size, "MiB/member")
	})
	b.Run("task", func(b *testing.B) {
		s := surveyor(spy.Pool, urls)
		var spent time.Duration
		var size float64
		for range b.N {
			b.StopTimer()
			size = refragment(b)
			h := newDefrag(b, s, map[string]string{ops.ParamThreshold: "0"}, (&recorder{}).env(nil))
			b.StartTimer()
			start := time.Now()
			if res := h.Admit(ctx); res.Error != nil {
				b.Fatalf("admit: %s: %v", res.Code, res.Error)
			}
			if res := h.Execute(ctx); res.Error != nil || res.Requeue {
				b.Fatalf("execute: requeue %v, %s: %v", res.Requeue, res.Code, res.Error)
			}
			spent += time.Since(start)
		}
		task := perMember(spent, b.N)
		b.ReportMetric(task, "ms/member")
		b.ReportMetric(size, "MiB/member")
		if floor > 0 {
			b.ReportMetric(task/floor, "x-floor")
		}
	})
}
