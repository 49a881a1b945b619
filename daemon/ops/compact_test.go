package ops_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

func newCompact(t testing.TB, s ops.Surveyor, params map[string]string) task.Handler {
	t.Helper()
	h, err := ops.NewCompactType(s, 1000, time.Minute).New(task.Task{ID: "compact-1", Type: "compact", Params: params}, (&recorder{}).env(nil))
	if err != nil {
		t.Fatalf("new compact handler with %v: %v", params, err)
	}
	return h
}

// The compaction keeps exactly the last `retain` revisions readable; run
// again it succeeds ("already compacted") instead of failing the task;
// with a window that covers the whole history it compacts nothing.
func TestCompaction(t *testing.T) {
	members := etcdtest.Start(t, 3)
	urls := etcdtest.ClientURLs(members)
	spy := newSpy(t)
	cli := client(t, spy, urls)
	ctx := context.Background()
	// given a key written 20 times
	for i := range 20 {
		if _, err := cli.Put(ctx, "/k", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	// every member has applied it (the handler reads a follower's revision)
	eventually.Nil(t, 10*time.Second, "every member reaches revision "+strconv.FormatInt(rev, 10), func() error {
		for _, ep := range urls {
			st, err := spy.Status(ctx, ep)
			if err != nil {
				return err
			}
			if st.Header.Revision != rev {
				return errors.New(ep + " lags")
			}
		}
		return nil
	})
	s := surveyor(spy, urls)

	run := func(t *testing.T, retain string) (task.Result, []int64) {
		t.Helper()
		spy.reset()
		h := newCompact(t, s, map[string]string{ops.ParamRetain: retain})
		if res := h.Admit(ctx); res.Error != nil {
			t.Fatalf("admit: %s: %v", res.Code, res.Error)
		}
		res := h.Execute(ctx)
		if res.Error != nil || res.Requeue {
			t.Fatalf("execute: requeue %v, %s: %v", res.Requeue, res.Code, res.Error)
		}
		_, _, compacts := spy.calls()
		return res, compacts
	}

	t.Run("a window covering the whole history compacts nothing", func(t *testing.T) {
		for _, retain := range []string{strconv.FormatInt(rev, 10), "1000000000"} {
			res, compacts := run(t, retain)
			out := decode[ops.CompactOutcome](t, res.Output)
			if len(compacts) != 0 || out.CompactedTo != 0 || out.Skipped == "" {
				t.Errorf("retain %s at revision %d: compacted to %v, output %+v; want skipped", retain, rev, compacts, out)
			}
		}
		if _, err := cli.Get(ctx, "/k", clientv3.WithRev(2)); err != nil {
			t.Errorf("revision 2 is no longer readable: %v", err)
		}
	})

	t.Run("compacts to the current revision less retain", func(t *testing.T) {
		res, compacts := run(t, "5")
		out := decode[ops.CompactOutcome](t, res.Output)
		if out.Revision != rev || out.CompactedTo != rev-5 || len(compacts) != 1 || compacts[0] != rev-5 {
			t.Fatalf("output %+v, compactions %v; want revision %d compacted to %d", out, compacts, rev, rev-5)
		}
		if _, err := cli.Get(ctx, "/k", clientv3.WithRev(rev-6)); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Errorf("revision %d, below the window, is still readable: %v", rev-6, err)
		}
		got, err := cli.Get(ctx, "/k", clientv3.WithRev(rev-5))
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != strconv.Itoa(20-6) {
			t.Errorf("revision %d, the oldest kept, reads %v (%v)", rev-5, got, err)
		}
	})

	t.Run("run again it succeeds as already compacted", func(t *testing.T) {
		res, _ := run(t, "5")
		out := decode[ops.CompactOutcome](t, res.Output)
		if out.CompactedTo != 0 || !strings.Contains(out.Skipped, "already compacted") {
			t.Errorf("output %+v, want skipped as already compacted", out)
		}
	})
}

// Bad retain values are refused when the task is created, naming the
// parameter.
func TestCompactRejectsBadParameters(t *testing.T) {
	s := surveyor(nil, nil) // never called: the parameters are checked first
	tests := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{name: "negative retain", params: map[string]string{ops.ParamRetain: "-1"}, want: ops.ParamRetain},
		{name: "retain not a number", params: map[string]string{ops.ParamRetain: "ten"}, want: ops.ParamRetain},
		{name: "retain a fraction", params: map[string]string{ops.ParamRetain: "1.5"}, want: ops.ParamRetain},
		{name: "retain empty", params: map[string]string{ops.ParamRetain: ""}, want: ops.ParamRetain},
		{name: "unknown parameter", params: map[string]string{"revision": "10"}, want: "revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ops.NewCompactType(s, 1000, time.Minute).New(task.Task{ID: "compact-1", Type: "compact", Params: tt.params}, (&recorder{}).env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("params %v: error %v, want one naming %q", tt.params, err, tt.want)
			}
		})
	}
}
