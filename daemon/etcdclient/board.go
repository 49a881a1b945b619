package etcdclient

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Board is the agents' notice board in a cluster's keyspace (under
// ClusterKeys). An agent posts what others must know before they act (the
// member list it acts on) on its session's lease, so that a post goes when
// its agent does; the writer records facts that must outlive it (under
// which list it removed a member) without a lease.
type Board interface {
	// Post puts value at key on this agent's lease and returns the
	// revision of the put.
	Post(ctx context.Context, endpoints []string, clusterID uint64, key string, value []byte) (int64, error)
	// Record puts value at key, for good.
	Record(ctx context.Context, endpoints []string, clusterID uint64, key string, value []byte) error
	// Read returns every key under prefix with its value, linearizably,
	// and the revision it read at.
	Read(ctx context.Context, endpoints []string, clusterID uint64, prefix string) (map[string][]byte, int64, error)
	// Watch calls changed with the key of every change under prefix after
	// revision after (but a delete before the watch runs: see
	// SessionLocker.Watch), from a goroutine of its own, until ctx ends or
	// the watch fails. It returns at once; a watch that fails only stops
	// calling, so a caller keeps its own timer as the fallback.
	Watch(ctx context.Context, endpoints []string, clusterID uint64, prefix string, after int64, changed func(key string))
}

var _ Board = (*SessionLocker)(nil)

// Post puts value on the session's lease (granted if there is none yet).
func (l *SessionLocker) Post(ctx context.Context, endpoints []string, clusterID uint64, key string, value []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	session, err := l.sessionFor(ctx, endpoints, clusterID)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	defer cancel()
	resp, err := session.Client().Put(ctx, key, string(value), clientv3.WithLease(session.Lease()))
	if err != nil {
		return 0, fmt.Errorf("post %s: %w", key, err)
	}
	if err := sameCluster(resp.Header.ClusterId, clusterID); err != nil {
		return 0, fmt.Errorf("post %s: %w", key, err)
	}
	return resp.Header.Revision, nil
}

// Record puts value without a lease.
func (l *SessionLocker) Record(ctx context.Context, endpoints []string, clusterID uint64, key string, value []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	session, err := l.sessionFor(ctx, endpoints, clusterID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	defer cancel()
	resp, err := session.Client().Put(ctx, key, string(value))
	if err == nil {
		err = sameCluster(resp.Header.ClusterId, clusterID)
	}
	if err != nil {
		return fmt.Errorf("record %s: %w", key, err)
	}
	return nil
}

// Read reads the keys under prefix (a linearizable range read). It needs
// no lease: a look that posts nothing (etcdlet status) grants none.
func (l *SessionLocker) Read(ctx context.Context, endpoints []string, clusterID uint64, prefix string) (map[string][]byte, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.clientFor(endpoints); err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	defer cancel()
	resp, err := l.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err == nil {
		err = sameCluster(resp.Header.ClusterId, clusterID)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", prefix, err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out, resp.Header.Revision, nil
}

// Watch watches prefix through the locker's client. It requires a leader,
// so that a member cut off from the others ends the watch instead of
// holding it silent; and it stops at an answer from another cluster.
//
// The watch starts at the current revision, and what changed between
// after and that revision is read once, keys only: etcd sends a watch
// that starts in the past its events only on its next catch-up round,
// up to 100 ms later (its watchers' sync period), which is longer than
// what this watch is for. The read sees puts, not deletes: a post
// withdrawn in that gap is seen by the caller's next read instead.
func (l *SessionLocker) Watch(ctx context.Context, endpoints []string, clusterID uint64, prefix string, after int64, changed func(key string)) {
	l.mu.Lock()
	err := l.clientFor(endpoints)
	client := l.client
	l.mu.Unlock()
	if err != nil {
		return
	}
	events := client.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	go func() {
		for resp := range events {
			if resp.Err() != nil || sameCluster(resp.Header.ClusterId, clusterID) != nil {
				return
			}
			if resp.Created && resp.Header.Revision > after {
				if err := changedSince(ctx, client, l.CallTimeout, prefix, after, resp.Header.Revision, changed); err != nil {
					return
				}
			}
			for _, ev := range resp.Events {
				changed(string(ev.Kv.Key))
			}
		}
	}()
}

// changedSince calls changed with every key under prefix put after
// revision after, as of revision at.
func changedSince(ctx context.Context, client *clientv3.Client, timeout time.Duration, prefix string, after, at int64, changed func(key string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMinModRev(after+1), clientv3.WithRev(at))
	if err != nil {
		return err
	}
	for _, kv := range resp.Kvs {
		changed(string(kv.Key))
	}
	return nil
}

func sameCluster(got, want uint64) error {
	if got != want {
		return fmt.Errorf("the endpoints answer for cluster %x, not %x", got, want)
	}
	return nil
}
