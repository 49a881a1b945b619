package etcdclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TaskLockHeldError says another task holds the cluster-wide task lock.
type TaskLockHeldError struct{ By LockHolder }

func (e *TaskLockHeldError) Error() string {
	return "another task runs in this cluster: " + e.By.TaskName()
}

// TaskLock is a taken task lock.
type TaskLock interface {
	// Lost is closed when the lock can no longer be confirmed (its lease
	// expired or could not be kept alive): the task must stop.
	Lost() <-chan struct{}
	// Release gives the lock up; releasing a lock that was lost is not an
	// error.
	Release(ctx context.Context) error
	// Abandon stops keeping the lock alive without giving it up (the
	// agent stops mid-task): it frees itself when its lease expires,
	// unless the restarted agent takes it over for the same task first.
	Abandon()
}

// TaskLocker takes the cluster-wide task lock (TaskLockKey): one task at
// a time per cluster. The lock is one key holding its LockHolder as JSON,
// on a lease of TTL kept alive while the task runs. An agent killed
// mid-task stops the keep-alive, so the lock frees itself after TTL unless
// the restarted agent takes it over for the same task first (the holder's
// Task is the same).
type TaskLocker struct {
	// Client returns a client for the cluster (its voters), owned by the
	// caller of Acquire's Held until Release.
	Client      func() (*clientv3.Client, error)
	Key         string
	TTL         time.Duration
	CallTimeout time.Duration
}

// Acquire takes the lock for h (a holder with its Task set), or fails
// with a *TaskLockHeldError naming the holder. A lock recorded for the
// same task is taken over.
func (l *TaskLocker) Acquire(ctx context.Context, h LockHolder) (TaskLock, error) {
	cli, err := l.Client()
	if err != nil {
		return nil, err
	}
	held, err := l.acquire(ctx, cli, h)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return held, nil
}

func (l *TaskLocker) acquire(ctx context.Context, cli *clientv3.Client, h LockHolder) (*taskLock, error) {
	value, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	defer cancel()
	lease, err := cli.Grant(callCtx, int64(l.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("task lock %s: grant lease: %w", l.Key, err)
	}
	revoke := func() {
		rctx, rcancel := context.WithTimeout(context.Background(), l.CallTimeout)
		defer rcancel()
		_, _ = cli.Revoke(rctx, lease.ID)
	}
	resp, err := cli.Txn(callCtx).
		If(clientv3.Compare(clientv3.CreateRevision(l.Key), "=", 0)).
		Then(clientv3.OpPut(l.Key, string(value), clientv3.WithLease(lease.ID))).
		Else(clientv3.OpGet(l.Key)).Commit()
	if err != nil {
		revoke()
		return nil, fmt.Errorf("task lock %s: %w", l.Key, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			revoke()
			return nil, fmt.Errorf("task lock %s: held, but the holder vanished meanwhile; retry", l.Key)
		}
		// Not ParseLockHolder: a record an older etcdlet wrote names the
		// task without a time, and the task is what counts here.
		var other LockHolder
		if err := json.Unmarshal(kvs[0].Value, &other); err != nil || other.Task == "" {
			revoke()
			return nil, fmt.Errorf("task lock %s holds %q, not a task's holder: %w", l.Key, kvs[0].Value, errors.Join(err, errors.New("no task named")))
		}
		if other.Task != h.Task {
			revoke()
			return nil, &TaskLockHeldError{By: other}
		}
		// The same task, left by this agent before a restart: take the key
		// over onto the new lease, if nobody changed it meanwhile.
		take, err := cli.Txn(callCtx).
			If(clientv3.Compare(clientv3.ModRevision(l.Key), "=", kvs[0].ModRevision)).
			Then(clientv3.OpPut(l.Key, string(value), clientv3.WithLease(lease.ID))).Commit()
		if err != nil || !take.Succeeded {
			revoke()
			return nil, fmt.Errorf("task lock %s: take over from the previous run of task %s: %w", l.Key, h.Task, errors.Join(err, errors.New("the key changed meanwhile")))
		}
	}
	keepCtx, stop := context.WithCancel(context.Background())
	alive, err := cli.KeepAlive(keepCtx, lease.ID)
	if err != nil {
		stop()
		revoke()
		return nil, fmt.Errorf("task lock %s: keep lease alive: %w", l.Key, err)
	}
	held := &taskLock{locker: l, cli: cli, lease: lease.ID, stop: stop, lost: make(chan struct{})}
	go held.watch(alive)
	return held, nil
}

type taskLock struct {
	locker *TaskLocker
	cli    *clientv3.Client
	lease  clientv3.LeaseID
	stop   context.CancelFunc
	lost   chan struct{}
	once   sync.Once
}

// watch drains keep-alive answers; the channel closes when the lease
// cannot be kept alive any more (expired, revoked, or the client gave up),
// or when Release stops it.
func (h *taskLock) watch(alive <-chan *clientv3.LeaseKeepAliveResponse) {
	for range alive {
	}
	h.once.Do(func() { close(h.lost) })
}

func (h *taskLock) Lost() <-chan struct{} { return h.lost }

// Release deletes the key if it is still on this lock's lease, then revokes
// the lease: both, so that nothing is left even if one call fails.
func (h *taskLock) Release(ctx context.Context) error {
	defer h.cli.Close()
	h.stop()
	ctx, cancel := context.WithTimeout(ctx, h.locker.CallTimeout)
	defer cancel()
	_, delErr := h.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(h.locker.Key), "=", h.lease)).
		Then(clientv3.OpDelete(h.locker.Key)).Commit()
	_, revErr := h.cli.Revoke(ctx, h.lease)
	if delErr != nil && revErr != nil {
		return fmt.Errorf("release task lock %s: %w", h.locker.Key, errors.Join(delErr, revErr))
	}
	return nil
}

func (h *taskLock) Abandon() {
	h.stop()
	h.cli.Close()
}
