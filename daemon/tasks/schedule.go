package tasks

import (
	"context"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// schedule starts one loop per configured schedule. Every agent of the
// cluster runs them; what keeps a shared store at one snapshot per interval
// is the store itself (a full snapshot is skipped when the store has one
// younger than the interval), and what keeps defrag and compaction at one
// run per interval is a record in etcd of the last success.
func (o *Service) schedule(ctx context.Context, wg *sync.WaitGroup) {
	b, t := o.set.Backup.Schedule, o.set.Tasks
	every := func(interval time.Duration, due func(context.Context) bool, req task.Request) {
		if interval <= 0 {
			return
		}
		wg.Go(func() { o.every(ctx, interval, due, req) })
	}
	// Agents whose schedules fire together may all find a snapshot due;
	// the task checks again under the cluster-wide lock, so they take one.
	scheduled := func(kind string, interval time.Duration) task.Request {
		return task.Request{Type: "snapshot", Source: "schedule",
			Params: map[string]string{ops.ParamKind: kind, ops.ParamIfOlderThan: dueAfter(interval).String()}}
	}
	every(b.Full, func(ctx context.Context) bool { return o.snapshotDue(ctx, snapshot.KindFull, b.Full) }, scheduled("full", b.Full))
	every(b.Delta, func(ctx context.Context) bool { return o.snapshotDue(ctx, snapshot.KindDelta, b.Delta) }, scheduled("delta", b.Delta))
	every(t.Defrag.Schedule, func(ctx context.Context) bool { return o.recordedDue(ctx, "defrag", t.Defrag.Schedule) },
		task.Request{Type: "defrag", Source: "schedule"})
	every(t.Compact.Schedule, func(ctx context.Context) bool { return o.recordedDue(ctx, "compact", t.Compact.Schedule) },
		task.Request{Type: "compact", Source: "schedule"})
}

// every submits req each interval when due says so, and waits for it.
// When another task holds the slot, it waits for the slot instead of the
// next tick, and the API orders nothing meanwhile (scheduleWaiting): a
// client that orders snapshot after snapshot through the API would
// otherwise hold the slot at every tick, and the schedule would never run.
func (o *Service) every(ctx context.Context, interval time.Duration, due func(context.Context) bool, req task.Request) {
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
		t, ok, err := o.submitScheduled(ctx, req, due)
		if err != nil || !ok {
			o.log.Debug("scheduled task not started", "type", req.Type, "error", err, "state", t.Phase)
			continue
		}
		if t, err = o.runner.Wait(ctx, t.ID); err == nil && t.Phase == task.Succeeded && req.Type != "snapshot" {
			o.record(ctx, req.Type, t.LastTransitionTime)
		}
	}
}

// slotPoll is how often a due scheduled task looks whether the task slot
// is free: a task's steps take seconds at least.
const slotPoll = time.Second

// submitScheduled submits a due scheduled task as soon as the task slot is
// free. It gives up when the task is no longer due (a snapshot ordered
// through the API is a snapshot too) or ctx ends.
func (o *Service) submitScheduled(ctx context.Context, req task.Request, due func(context.Context) bool) (task.Task, bool, error) {
	if _, busy := o.activeTask(); busy {
		o.scheduleWaiting.Add(1)
		defer o.scheduleWaiting.Add(-1)
		poll := time.NewTicker(slotPoll)
		defer poll.Stop()
		for busy {
			select {
			case <-ctx.Done():
				return task.Task{}, false, ctx.Err()
			case <-poll.C:
			}
			if _, busy = o.activeTask(); !busy && !due(ctx) {
				return task.Task{}, false, nil
			}
		}
	}
	return o.runner.Submit(req)
}

// activeTask is the task of this node that holds the task slot, if any.
func (o *Service) activeTask() (task.Task, bool) {
	tasks, err := o.runner.List()
	if err != nil {
		return task.Task{}, false
	}
	for _, t := range tasks {
		if !t.Phase.Completed() {
			return t, true
		}
	}
	return task.Task{}, false
}

// snapshotDue: a full snapshot when the store's newest is older than
// dueAfter(interval); a delta when the newest object (full or delta) is,
// and there is a full one to build on. The snapshot task checks the same
// again under the cluster-wide task lock (ops.ParamIfOlderThan).
func (o *Service) snapshotDue(ctx context.Context, kind string, interval time.Duration) bool {
	if o.store == nil {
		return false
	}
	newest, ok, err := snapshot.Newest(ctx, o.store, kind)
	if err != nil {
		o.log.Warn("cannot list the snapshot store; the scheduled snapshot waits", "store", o.store.String(), "error", err)
		return false
	}
	if !ok {
		return kind == snapshot.KindFull
	}
	return time.Since(newest.CreatedOn) >= dueAfter(interval)
}

// dueAfter is how old the newest snapshot may be before a scheduled one
// is due: a little less than the interval, so that the agents' ticks
// (a tenth of it) do not push a snapshot a whole tick late.
func dueAfter(interval time.Duration) time.Duration { return interval * 9 / 10 }

// recordedDue reads the cluster-wide record of the last success.
func (o *Service) recordedDue(ctx context.Context, typ string, interval time.Duration) bool {
	cli, err := o.client()
	if err != nil {
		return false
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, o.set.CallTimeout)
	defer cancel()
	resp, err := cli.Get(cctx, etcdclient.ScheduleKey(o.set.Cluster, typ))
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

func (o *Service) record(ctx context.Context, typ string, at time.Time) {
	cli, err := o.client()
	if err != nil {
		return
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, o.set.CallTimeout)
	defer cancel()
	if _, err := cli.Put(cctx, etcdclient.ScheduleKey(o.set.Cluster, typ), at.UTC().Format(time.RFC3339)); err != nil {
		o.log.Warn("cannot record the scheduled task's run; another agent may repeat it", "type", typ, "error", err)
	}
}
