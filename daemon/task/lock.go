package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Holder is what the cluster-wide task lock records about its holder.
type Holder struct {
	Task  string    `json:"task"`
	Type  string    `json:"type"`
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
}

func (h Holder) String() string {
	return fmt.Sprintf("task %s (%s) on node %s since %s", h.Task, h.Type, h.Node, h.Since.UTC().Format(time.RFC3339))
}

// HeldError says another task holds the cluster-wide task lock.
type HeldError struct{ By Holder }

func (e *HeldError) Error() string { return "another task runs in this cluster: " + e.By.String() }

// Locker takes the cluster-wide task lock: one task at a time per cluster.
type Locker interface {
	// Acquire takes the lock for h, or fails with a *HeldError naming the
	// holder. A lock recorded for the same task (an agent restarted while
	// it ran the task) is taken over.
	Acquire(ctx context.Context, h Holder) (Held, error)
}

// Held is a taken lock.
type Held interface {
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

// EtcdLocker is the lock as one key in etcd (Key) holding the Holder as
// JSON, on a lease of TTL kept alive while the task runs. An agent killed
// mid-task stops the keep-alive, so the lock frees itself after TTL unless
// the restarted agent takes it over for the same task first.
type EtcdLocker struct {
	// Client returns a client for the cluster (its voters), owned by the
	// caller of Acquire's Held until Release.
	Client      func() (*clientv3.Client, error)
	Key         string
	TTL         time.Duration
	CallTimeout time.Duration
}

// Acquire implements Locker.
func (l *EtcdLocker) Acquire(ctx context.Context, h Holder) (Held, error) {
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

func (l *EtcdLocker) acquire(ctx context.Context, cli *clientv3.Client, h Holder) (*etcdHeld, error) {
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
		var other Holder
		if err := json.Unmarshal(kvs[0].Value, &other); err != nil {
			revoke()
			return nil, fmt.Errorf("task lock %s holds %q, not a task holder: %w", l.Key, kvs[0].Value, err)
		}
		if other.Task != h.Task {
			revoke()
			return nil, &HeldError{By: other}
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
	held := &etcdHeld{locker: l, cli: cli, lease: lease.ID, stop: stop, lost: make(chan struct{})}
	go held.watch(alive)
	return held, nil
}

type etcdHeld struct {
	locker *EtcdLocker
	cli    *clientv3.Client
	lease  clientv3.LeaseID
	stop   context.CancelFunc
	lost   chan struct{}
	once   sync.Once
}

// watch drains keep-alive answers; the channel closes when the lease
// cannot be kept alive any more (expired, revoked, or the client gave up),
// or when Release stops it.
func (h *etcdHeld) watch(alive <-chan *clientv3.LeaseKeepAliveResponse) {
	for range alive {
	}
	h.once.Do(func() { close(h.lost) })
}

func (h *etcdHeld) Lost() <-chan struct{} { return h.lost }

// Release deletes the key if it is still on this lock's lease, then revokes
// the lease: both, so that nothing is left even if one call fails.
func (h *etcdHeld) Release(ctx context.Context) error {
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

func (h *etcdHeld) Abandon() {
	h.stop()
	h.cli.Close()
}

// ReadHolder returns the lock's holder, nil when free.
func ReadHolder(ctx context.Context, cli *clientv3.Client, key string) (*Holder, error) {
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read task lock %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var h Holder
	if err := json.Unmarshal(resp.Kvs[0].Value, &h); err != nil {
		return nil, fmt.Errorf("task lock %s holds %q: %w", key, resp.Kvs[0].Value, err)
	}
	return &h, nil
}
