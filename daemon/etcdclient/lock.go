package etcdclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrLocked says another agent holds the writer lock.
var ErrLocked = errors.New("the writer lock is held by another agent")

// ErrLockLost says a lock that was taken is no longer held, or no longer
// has the lease time left that the next call needs.
var ErrLockLost = errors.New("the writer lock was lost")

// ErrListChanged says the member list in force changed after the change
// was planned: the call is not made, and the next pass plans again.
var ErrListChanged = errors.New("the member list changed since the change was planned")

// Locker takes the cluster-wide writer lock: one agent at a time changes
// membership. It also keeps the agents' Board, on the same lease.
// SessionLocker implements it with an etcd mutex; the simulator with its
// model.
type Locker interface {
	// TryLock takes the lock of the cluster clusterID through the given
	// endpoints (the cluster's voters), or fails at once with ErrLocked
	// when another holds it.
	TryLock(ctx context.Context, endpoints []string, clusterID uint64) (Lock, error)
	Board
	// Close releases the lock and everything held for it.
	Close()
}

// Lock is a taken writer lock.
type Lock interface {
	// Remaining confirms that the lock is still held and says how long
	// its lease is sure to last: a holder calls it before every membership
	// call and makes the call only when it fits in that time.
	Remaining(ctx context.Context) (time.Duration, error)
	Unlock(ctx context.Context) error
}

// leaseMargin is the part of the lease a call under the lock may not use:
// the call must end, and its answer be read, before another agent could
// take the lock on the lease's expiry.
const leaseMargin = time.Second

// UnderLock makes one call under lock: it confirms the lock and gives the
// call no more time than the lease is sure to last, less leaseMargin. A
// lease with no more than that left counts as lost (its keep-alive is not
// getting through): the call would start with its time already up, and
// fail as a timeout that says nothing of the cause.
//
// The deadline counts from before the confirmation was asked, not from its
// answer: the lease was measured after that moment, so it lasts at least
// until then plus what it said, however slow the answer came. A holder
// paused (SIGSTOP, a stalled VM) after the confirmation wakes past the
// deadline, and no call is sent on a context that is done: a paused holder
// never acts on a lock another agent may hold by now
// (TestAPausedHolderSendsNoCall).
func UnderLock(ctx context.Context, lock Lock, call func(context.Context) error) error {
	asked := time.Now()
	left, err := lock.Remaining(ctx)
	if err != nil {
		return err
	}
	if left <= leaseMargin {
		return fmt.Errorf("%w: its lease has %s left, too little for a call; its keep-alive is not getting through", ErrLockLost, left)
	}
	ctx, cancel := context.WithDeadline(ctx, asked.Add(left-leaseMargin))
	defer cancel()
	return call(ctx)
}

// SessionLocker is the writer lock as an etcd mutex (WriterLockKey of the
// cluster) on a lease of TTL, kept alive by a session while the agent
// lives. A writer killed mid-change releases it when its lease expires.
// Any error taking, confirming or releasing the lock closes the session,
// which revokes the lease: a lock never outlives the failure that left it
// in doubt. The agent's posts on the Board live on the same lease.
type SessionLocker struct {
	Pool *Pool
	TTL  time.Duration
	// CallTimeout bounds each call the locker makes.
	CallTimeout time.Duration
	// Holder names who takes the lock (an agent's node, an operator
	// command), written with the host, process and time into the lock
	// key's value for `etcdlet lock status`; the host name when empty.
	Holder string

	mu        sync.Mutex
	client    *clientv3.Client
	endpoints []string
	session   *concurrency.Session
	clusterID uint64 // the session's cluster
}

var _ Locker = (*SessionLocker)(nil)

// TryLock takes the mutex on a session whose client balances over the
// endpoints; the session is kept across passes and recreated when its
// lease is lost or the endpoints changed.
func (l *SessionLocker) TryLock(ctx context.Context, endpoints []string, clusterID uint64) (Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	session, err := l.sessionFor(ctx, endpoints, clusterID)
	if err != nil {
		return nil, err
	}
	key := WriterLockKey(clusterID)
	mutex := concurrency.NewMutex(session, key)
	lockCtx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	err = mutex.TryLock(lockCtx)
	cancel()
	switch {
	case errors.Is(err, concurrency.ErrLocked):
		return nil, ErrLocked
	case err != nil:
		// The lock key may or may not exist now: revoke the lease so that
		// it does not.
		l.closeSessionLocked()
		return nil, fmt.Errorf("take writer lock %s: %w", key, err)
	}
	if err := l.identify(ctx, session, mutex); err != nil {
		l.closeSessionLocked()
		return nil, err
	}
	return &sessionLock{locker: l, session: session, mutex: mutex}, nil
}

// LockHolder is what a lock key's value says about its holder, for the
// writer lock and the task lock alike. etcd records no time and no owner
// of a key, so the holder writes them.
type LockHolder struct {
	Holder   string    `json:"holder"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Acquired time.Time `json:"acquired"`
	// Task and Type name the task that holds the task lock; empty for the
	// writer lock.
	Task string `json:"task,omitempty"`
	Type string `json:"type,omitempty"`
}

// newLockHolder is who this process is, holding a lock now: holder (an
// agent's node, an operator command; the host name when empty), this
// host and process.
func newLockHolder(holder string, now time.Time) LockHolder {
	host, _ := os.Hostname()
	return LockHolder{Holder: cmp.Or(holder, host), Host: host, PID: os.Getpid(), Acquired: now.UTC()}
}

// TaskName names the task holding the task lock, for a person.
func (h LockHolder) TaskName() string {
	return fmt.Sprintf("task %s (%s) on node %s since %s", h.Task, h.Type, cmp.Or(h.Host, h.Holder, "unnamed"), h.Acquired.UTC().Format(time.RFC3339))
}

// ParseLockHolder reads a lock key's value; ok is false for a value that
// names no holder (written by an etcdlet before holders were recorded, or
// not yet: the key is created empty and identified right after).
func ParseLockHolder(value []byte) (h LockHolder, ok bool) {
	if err := json.Unmarshal(value, &h); err != nil || h.Acquired.IsZero() {
		return LockHolder{}, false
	}
	return h, true
}

// identify writes who holds the lock into the lock key's value, on the
// same lease and only while the key is still the one this mutex created:
// a lock broken in between is not re-created.
func (l *SessionLocker) identify(ctx context.Context, session *concurrency.Session, mutex *concurrency.Mutex) error {
	value, err := json.Marshal(newLockHolder(l.Holder, time.Now()))
	if err != nil {
		return fmt.Errorf("record writer lock holder: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	defer cancel()
	resp, err := session.Client().Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(mutex.Key()), "=", mutex.Header().Revision)).
		Then(clientv3.OpPut(mutex.Key(), string(value), clientv3.WithLease(session.Lease()))).
		Commit()
	switch {
	case err != nil:
		return fmt.Errorf("record writer lock holder in %s: %w", mutex.Key(), err)
	case !resp.Succeeded:
		return fmt.Errorf("%w: key %s was deleted right after it was taken", ErrLockLost, mutex.Key())
	}
	return nil
}

// sessionFor is the session through the endpoints, which must answer for
// cluster clusterID: its lease and every key on it belong to one cluster.
func (l *SessionLocker) sessionFor(ctx context.Context, endpoints []string, clusterID uint64) (*concurrency.Session, error) {
	if err := l.clientFor(endpoints); err != nil {
		return nil, err
	}
	if l.session != nil && l.clusterID != clusterID {
		l.closeSessionLocked() // another cluster's (a restore, a re-bootstrap)
	}
	if l.session != nil {
		select {
		case <-l.session.Done():
			l.session = nil
		default:
		}
	}
	if l.session == nil {
		// Grant the lease with this pass's timeout, then hand it to a
		// session whose keep-alive lives as long as the client: the
		// session's own context would otherwise bound both.
		grantCtx, cancel := context.WithTimeout(ctx, l.CallTimeout)
		defer cancel()
		lease, err := l.client.Grant(grantCtx, int64(l.TTL/time.Second))
		if err != nil {
			return nil, fmt.Errorf("grant writer lock lease: %w", err)
		}
		if got := lease.ClusterId; got != clusterID {
			_, _ = l.client.Revoke(grantCtx, lease.ID)
			return nil, fmt.Errorf("grant writer lock lease: the endpoints answer for cluster %x, not %x", got, clusterID)
		}
		s, err := concurrency.NewSession(l.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(l.TTL/time.Second)))
		if err != nil {
			return nil, fmt.Errorf("create writer lock session: %w", err)
		}
		l.session, l.clusterID = s, clusterID
	}
	return l.session, nil
}

// clientFor makes the locker's client balance over the endpoints.
func (l *SessionLocker) clientFor(endpoints []string) error {
	if l.client == nil {
		c, err := l.Pool.NewMulti(endpoints)
		if err != nil {
			return err
		}
		l.client, l.endpoints = c, endpoints
	} else if !slices.Equal(l.endpoints, endpoints) {
		l.client.SetEndpoints(endpoints...)
		l.endpoints = endpoints
	}
	return nil
}

// closeSessionLocked revokes the session's lease (deleting any lock key
// on it) and forgets the session. The caller holds l.mu.
func (l *SessionLocker) closeSessionLocked() {
	if l.session == nil {
		return
	}
	// Stop the keep-alive, then revoke the lease within CallTimeout, not
	// within the session's TTL as session.Close would: without quorum a
	// revoke never succeeds, and the agent's stop (systemctl stop, a host
	// shutting down) would wait out the TTL for nothing. An unrevoked
	// lease expires after TTL anyway, since its keep-alive stopped here.
	l.session.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), l.CallTimeout)
	_, _ = l.session.Client().Revoke(ctx, l.session.Lease())
	cancel()
	l.session = nil
}

// Close releases the session (and with it any lock) and the client.
func (l *SessionLocker) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeSessionLocked()
	if l.client != nil {
		_ = l.client.Close()
		l.client = nil
	}
}

type sessionLock struct {
	locker  *SessionLocker
	session *concurrency.Session
	mutex   *concurrency.Mutex
}

// Remaining reads the lock key (linearizable) and its lease's time to
// live: the key must still be this session's, created at the revision the
// lock was taken.
func (s *sessionLock) Remaining(ctx context.Context) (time.Duration, error) {
	client := s.session.Client()
	ctx, cancel := context.WithTimeout(ctx, s.locker.CallTimeout)
	defer cancel()
	resp, err := client.Get(ctx, s.mutex.Key())
	if err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != s.mutex.Header().Revision ||
		clientv3.LeaseID(resp.Kvs[0].Lease) != s.session.Lease()) {
		err = fmt.Errorf("%w: key %s is gone or no longer this agent's", ErrLockLost, s.mutex.Key())
	}
	var ttl *clientv3.LeaseTimeToLiveResponse
	if err == nil {
		ttl, err = client.TimeToLive(ctx, s.session.Lease())
	}
	if err == nil && ttl.TTL <= 0 {
		err = fmt.Errorf("%w: its lease expired", ErrLockLost)
	}
	if err != nil {
		s.drop()
		if !errors.Is(err, ErrLockLost) {
			err = fmt.Errorf("%w: confirm writer lock %s: %v", ErrLockLost, s.mutex.Key(), err)
		}
		return 0, err
	}
	return time.Duration(ttl.TTL) * time.Second, nil
}

// Unlock deletes the lock key; when that fails, the session is closed,
// which revokes the lease and the key with it.
func (s *sessionLock) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.locker.CallTimeout)
	defer cancel()
	if err := s.mutex.Unlock(ctx); err != nil {
		s.drop()
		return fmt.Errorf("release writer lock %s (its session was closed, revoking the lease): %w", s.mutex.Key(), err)
	}
	return nil
}

// drop closes the lock's session if it is still the locker's current one.
func (s *sessionLock) drop() {
	s.locker.mu.Lock()
	defer s.locker.mu.Unlock()
	if s.locker.session == s.session {
		s.locker.closeSessionLocked()
	}
}

// RefusesWrites reports whether err says the cluster takes no writes
// because of an alarm: "database space exceeded" (NOSPACE) or "corrupt
// cluster" (CORRUPT). A writer lock's lease and key are writes too, while
// membership changes still go through.
func RefusesWrites(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch rpctypes.ErrorDesc(e) {
		case rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace), rpctypes.ErrorDesc(rpctypes.ErrGRPCCorrupt):
			return true
		}
	}
	return false
}

// LeaderLock stands in for the writer lock while the cluster takes no
// writes (an alarm): only the agent whose member leads may act, and it
// confirms before every call that its member still leads and that an
// alarm is still raised. Leadership is unique per raft term, and etcd
// applies membership changes one at a time, each checked against quorum
// (strict reconfiguration), so a brief overlap at a leader change cannot
// cost quorum either. Once the last alarm is cleared the writer lock can
// be taken again, and an agent may hold it: the leader's stand-in ends
// there, or there would be two writers (the simulator found a retry of
// the leader's disarm, made after the alarm it cleared was gone).
type LeaderLock struct {
	Cluster  Cluster
	Endpoint string // the local member's client URL
	MemberID uint64
	// Hold is how long a confirmation lasts (one call's timeout).
	Hold time.Duration
}

// Remaining confirms that the local member leads and an alarm is raised.
func (l LeaderLock) Remaining(ctx context.Context) (time.Duration, error) {
	s, err := l.Cluster.Status(ctx, l.Endpoint)
	if err != nil {
		return 0, fmt.Errorf("%w: confirm the local member leads: %v", ErrLockLost, err)
	}
	if s.Leader != l.MemberID {
		return 0, fmt.Errorf("%w: the local member no longer leads", ErrLockLost)
	}
	if !slices.ContainsFunc(s.Errors, func(e string) bool { _, ok := ParseAlarm(e); return ok }) {
		return 0, fmt.Errorf("%w: no alarm is raised any more: the cluster takes writes, and the writer lock is to be taken", ErrLockLost)
	}
	return l.Hold, nil
}

// Unlock does nothing: leadership is not released.
func (LeaderLock) Unlock(context.Context) error { return nil }
