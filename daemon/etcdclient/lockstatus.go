package etcdclient

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LockStatus is the writer lock or the task lock as read from etcd, for
// `etcdlet lock`.
type LockStatus struct {
	// Lock is which lock: LockWriter or LockTask.
	Lock string `json:"lock"`
	// Prefix is the writer lock's prefix, or the task lock's key.
	Prefix string `json:"prefix"`
	Held   bool   `json:"held"`
	// Key is the holder's mutex key; Lease its lease, in hex.
	Key            string           `json:"key,omitempty"`
	Lease          string           `json:"lease,omitempty"`
	LeaseID        clientv3.LeaseID `json:"-"`
	CreateRevision int64            `json:"createRevision,omitempty"`
	Revision       int64            `json:"revision"`
	Holder         *LockHolder      `json:"holder,omitempty"`
	GrantedTTL     int64            `json:"grantedTTLSeconds,omitempty"`
	RemainingTTL   int64            `json:"remainingTTLSeconds,omitempty"`
	HeldFor        string           `json:"heldFor,omitempty"`
	Stale          bool             `json:"stale"`
	// Why says why the lock is or is not stale.
	Why string `json:"why,omitempty"`
	// Waiting counts other contenders' keys (a contender deletes its
	// key at once when the lock is held, so this is rarely non-zero).
	Waiting int `json:"waiting,omitempty"`
}

// ReadLock reads the lock keys under prefix (WriterLockKey) and the
// holder's lease, linearizably. The holder is the key created first, as in
// etcd's mutex.
func ReadLock(ctx context.Context, cli *clientv3.Client, prefix string) (LockStatus, error) {
	st := LockStatus{Lock: LockWriter, Prefix: prefix}
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return st, fmt.Errorf("read writer lock %s: %w", prefix, err)
	}
	st.Revision = resp.Header.Revision
	if len(resp.Kvs) == 0 {
		return st, nil
	}
	kv := resp.Kvs[0]
	st.Waiting = len(resp.Kvs) - 1
	return st, st.readHolder(ctx, cli, kv)
}

// Which lock a LockStatus is about.
const (
	LockWriter = "writer lock"
	LockTask   = "task lock"
)

// ReadTaskLock reads the task lock (TaskLockKey) and its holder's lease,
// linearizably.
func ReadTaskLock(ctx context.Context, cli *clientv3.Client, key string) (LockStatus, error) {
	st := LockStatus{Lock: LockTask, Prefix: key}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return st, fmt.Errorf("read task lock %s: %w", key, err)
	}
	st.Revision = resp.Header.Revision
	if len(resp.Kvs) == 0 {
		return st, nil
	}
	return st, st.readHolder(ctx, cli, resp.Kvs[0])
}

// readHolder fills in the holder's key, record and lease.
func (st *LockStatus) readHolder(ctx context.Context, cli *clientv3.Client, kv *mvccpb.KeyValue) error {
	st.Held, st.Key, st.CreateRevision = true, string(kv.Key), kv.CreateRevision
	st.LeaseID = clientv3.LeaseID(kv.Lease)
	st.Lease = strconv.FormatInt(kv.Lease, 16)
	if h, ok := ParseLockHolder(kv.Value); ok {
		st.Holder = &h
	}
	if st.LeaseID == clientv3.NoLease {
		return nil
	}
	ttl, err := cli.TimeToLive(ctx, st.LeaseID)
	if err != nil {
		return fmt.Errorf("read %s lease %s: %w", st.Lock, st.Lease, err)
	}
	st.GrantedTTL, st.RemainingTTL = ttl.GrantedTTL, ttl.TTL
	return nil
}

// Judge says whether a held lock is stale, and why: on a lease that is
// gone, or (the writer lock) held for longer than twice its lease's TTL (a
// locked section ends within one; the second covers clocks that differ
// between hosts). A task holds the task lock for as long as it runs,
// within its own timeout, so only a lost lease makes that one stale.
func (st *LockStatus) Judge(now time.Time) {
	switch {
	case !st.Held:
		st.Why = "the lock is free"
	case st.LeaseID == clientv3.NoLease || st.RemainingTTL < 0:
		// etcd answers -1 for a lease that is gone; 0 is a live lease
		// with less than a second left before its next keep-alive.
		st.Stale, st.Why = true, "its lease is gone: the key outlived its holder"
	case st.Holder == nil:
		st.Why = "the key's value names no holder and no time (an etcdlet older than this one took it): its age is unknown; it is released when its lease expires"
	case st.Lock == LockTask:
		st.HeldFor = now.Sub(st.Holder.Acquired).Round(time.Second).String()
		st.Why = fmt.Sprintf("held for %s by a running task, whose keep-alive holds the lease; the task's timeout ends it", st.HeldFor)
	default:
		held := now.Sub(st.Holder.Acquired)
		limit := 2 * time.Duration(st.GrantedTTL) * time.Second
		st.HeldFor = held.Round(time.Second).String()
		if held > limit {
			st.Stale, st.Why = true, fmt.Sprintf("held for %s, longer than twice its lease's TTL (%s): no holder's locked section lasts that long", st.HeldFor, limit/2)
		} else {
			st.Why = fmt.Sprintf("held for %s, within twice its lease's TTL (%s): the holder may be mid-change", st.HeldFor, limit/2)
		}
	}
}

// HolderName names the holder for a person.
func (st LockStatus) HolderName() string {
	if st.Holder == nil {
		return "an unnamed holder"
	}
	h := st.Holder
	if h.Task != "" {
		return fmt.Sprintf("task %s (%s), %s (host %s, pid %d)", h.Task, h.Type, h.Holder, h.Host, h.PID)
	}
	return fmt.Sprintf("%s (host %s, pid %d)", h.Holder, h.Host, h.PID)
}

// MayBreak is the rule of `etcdlet lock break`: with yes a stale lock
// only, with force any.
func (st LockStatus) MayBreak(yes, force bool) error {
	switch {
	case !yes && !force:
		return fmt.Errorf("refused: breaking the %s needs --yes (only a stale lock) or --force (any lock)", st.Lock)
	case !st.Held || force || st.Stale:
		return nil
	}
	return fmt.Errorf("refused: the lock is not stale (%s); wait for it, or pass --force", st.Why)
}

// BreakLock revokes the holder's lease (deleting the key and ending the
// holder's session), or for a key without a lease deletes it, in both
// cases only if it is still the key that was read.
func BreakLock(ctx context.Context, cli *clientv3.Client, st LockStatus, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if st.LeaseID != clientv3.NoLease {
		if _, err := cli.Revoke(ctx, st.LeaseID); err != nil {
			return fmt.Errorf("break %s: revoke lease %s: %w", st.Lock, st.Lease, err)
		}
		return nil
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(st.Key), "=", st.CreateRevision)).
		Then(clientv3.OpDelete(st.Key)).Commit()
	switch {
	case err != nil:
		return fmt.Errorf("break %s: delete %s: %w", st.Lock, st.Key, err)
	case !resp.Succeeded:
		return fmt.Errorf("break %s: %s changed since it was read; look again", st.Lock, st.Key)
	}
	return nil
}

// ClusterIDOf asks the endpoints of cli which cluster they answer for:
// every answer carries its cluster's ID.
func ClusterIDOf(ctx context.Context, cli *clientv3.Client) (uint64, error) {
	resp, err := cli.Get(ctx, ClusterKeys(0), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("ask the cluster for its ID: %w", err)
	}
	return resp.Header.ClusterId, nil
}
