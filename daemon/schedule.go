package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// schedule starts one loop per configured schedule. Every agent of the
// cluster runs them; what keeps a shared store at one snapshot per interval
// is the store itself (a full snapshot is skipped when the store has one
// younger than the interval), and what keeps defrag and compaction at one
// run per interval is a record in etcd of the last success.
func (o *opsTasks) schedule(ctx context.Context, wg *sync.WaitGroup) {
	b, t := o.cfg.Backup.Schedule, o.cfg.Tasks
	every := func(interval time.Duration, due func(context.Context) bool, req task.Request) {
		if interval <= 0 {
			return
		}
		wg.Go(func() { o.every(ctx, interval, due, req) })
	}
	every(b.Full, func(ctx context.Context) bool { return o.snapshotDue(ctx, snapshot.KindFull, b.Full) },
		task.Request{Type: "snapshot", Params: map[string]string{ops.ParamKind: "full"}, Source: "schedule"})
	every(b.Delta, func(ctx context.Context) bool { return o.snapshotDue(ctx, snapshot.KindDelta, b.Delta) },
		task.Request{Type: "snapshot", Params: map[string]string{ops.ParamKind: "delta"}, Source: "schedule"})
	every(t.Defrag.Schedule, func(ctx context.Context) bool { return o.recordedDue(ctx, "defrag", t.Defrag.Schedule) },
		task.Request{Type: "defrag", Source: "schedule"})
	every(t.Compact.Schedule, func(ctx context.Context) bool { return o.recordedDue(ctx, "compact", t.Compact.Schedule) },
		task.Request{Type: "compact", Source: "schedule"})
}

// every submits req each interval when due says so, and waits for it; a
// rejection (another task runs) is retried at the next tick.
func (o *opsTasks) every(ctx context.Context, interval time.Duration, due func(context.Context) bool, req task.Request) {
	// A tenth of the interval, so that agents started together spread out
	// and the check of the store sees the others' snapshots.
	tick := time.NewTicker(max(interval/10, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !due(ctx) {
			continue
		}
		t, ok, err := o.runner.Submit(req)
		if err != nil || !ok {
			o.log.Debug("scheduled task not started", "type", req.Type, "error", err, "state", t.Phase)
			continue
		}
		if t, err = o.runner.Wait(ctx, t.ID); err == nil && t.Phase == task.Succeeded && req.Type != "snapshot" {
			o.record(ctx, req.Type, t.LastTransitionTime)
		}
	}
}

// snapshotDue: a full snapshot when the store's newest is older than the
// interval; a delta when the newest object (full or delta) is, and there
// is a full one to build on.
func (o *opsTasks) snapshotDue(ctx context.Context, kind string, interval time.Duration) bool {
	if o.store == nil {
		return false
	}
	full, deltas, err := snapshot.Latest(ctx, o.store)
	if err != nil {
		o.log.Warn("cannot list the snapshot store; the scheduled snapshot waits", "store", o.store.String(), "error", err)
		return false
	}
	newest := full
	if kind == snapshot.KindDelta {
		if full == nil {
			return false
		}
		if len(deltas) > 0 {
			newest = &deltas[len(deltas)-1]
		}
	}
	return newest == nil || time.Since(newest.CreatedOn) >= interval*9/10
}

// recordedDue reads the cluster-wide record of the last success.
func (o *opsTasks) recordedDue(ctx context.Context, typ string, interval time.Duration) bool {
	cli, err := o.client()
	if err != nil {
		return false
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, o.cfg.Agent.CallTimeout)
	defer cancel()
	resp, err := cli.Get(cctx, scheduleKey(o.cfg.Cluster.Name, typ))
	if err != nil {
		o.log.Warn("cannot read when the scheduled task last ran; it waits", "type", typ, "error", err)
		return false
	}
	if len(resp.Kvs) == 0 {
		return true
	}
	last, err := time.Parse(time.RFC3339, string(resp.Kvs[0].Value))
	return err != nil || time.Since(last) >= interval*9/10
}

func (o *opsTasks) record(ctx context.Context, typ string, at time.Time) {
	cli, err := o.client()
	if err != nil {
		return
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, o.cfg.Agent.CallTimeout)
	defer cancel()
	if _, err := cli.Put(cctx, scheduleKey(o.cfg.Cluster.Name, typ), at.UTC().Format(time.RFC3339)); err != nil {
		o.log.Warn("cannot record the scheduled task's run; another agent may repeat it", "type", typ, "error", err)
	}
}
