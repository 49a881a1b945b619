package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// lockTTL is the writer lock's lease TTL in the model (agent.lockTTL).
const lockTTL = 15 * time.Second

// lockHolder is a cluster's writer lock: the agent incarnation holding it
// and when its lease runs out (kept alive while that agent lives and can
// reach the cluster; see world.settle).
type lockHolder struct {
	host, gen int
	expires   time.Time
}

// locker is one agent's etcdclient.Locker in the model.
type locker struct {
	w   *world
	h   *host
	gen int
	mu  *sync.Mutex
}

var _ etcdclient.Locker = (*locker)(nil)

func (l *locker) TryLock(_ context.Context, endpoints []string, clusterID uint64) (etcdclient.Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clusterBehind(endpoints)
	if c == nil {
		return nil, fmt.Errorf("take writer lock: %w", rpctypes.ErrGRPCNoLeader)
	}
	if c.id != clusterID {
		return nil, fmt.Errorf("take writer lock: the endpoints answer for cluster %x, not %x", c.id, clusterID)
	}
	for _, al := range c.alarms {
		if al.kind == "NOSPACE" {
			return nil, fmt.Errorf("grant writer lock lease: %w", rpctypes.ErrGRPCNoSpace)
		}
		if al.kind == "CORRUPT" {
			return nil, fmt.Errorf("take writer lock: %w", rpctypes.ErrGRPCCorrupt)
		}
	}
	if h := c.lock; h != nil && l.w.now.Before(h.expires) && (h.host != l.h.idx || h.gen != l.gen) {
		return nil, etcdclient.ErrLocked
	}
	c.lock = &lockHolder{host: l.h.idx, gen: l.gen, expires: l.w.now.Add(lockTTL)}
	if l.w.armed.listChanges && l.w.onLock != nil {
		l.w.armed.listChanges = false
		l.w.onLock(l.h)
	}
	return &modelLock{l: l, c: c}, nil
}

// clusterBehind is the cluster a quorate endpoint of the list answers for.
func (l *locker) clusterBehind(endpoints []string) *cluster {
	api := &etcdAPI{w: l.w, from: l.h}
	for _, ep := range endpoints {
		if h, err := api.target(ep); err == nil && l.w.quorate(h.proc.c, h) {
			return h.proc.c
		}
	}
	return nil
}

func (l *locker) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.w.clusters {
		if h := c.lock; h != nil && h.host == l.h.idx && h.gen == l.gen {
			c.lock = nil
		}
	}
}

// boardEntry is a key on a cluster's Board: a post lives on its agent
// incarnation's lease (kept alive like the lock's), a record for good.
type boardEntry struct {
	value     []byte
	leased    bool
	host, gen int
	expires   time.Time
}

// Post puts a leased entry through a quorate endpoint of the cluster.
func (l *locker) Post(_ context.Context, endpoints []string, clusterID uint64, key string, value []byte) (int64, error) {
	return l.put(endpoints, clusterID, key, value, true)
}

// Record puts an entry for good.
func (l *locker) Record(_ context.Context, endpoints []string, clusterID uint64, key string, value []byte) error {
	_, err := l.put(endpoints, clusterID, key, value, false)
	return err
}

func (l *locker) put(endpoints []string, clusterID uint64, key string, value []byte, leased bool) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, err := l.boardOf(endpoints, clusterID)
	if err != nil {
		return 0, err
	}
	for _, al := range c.alarms {
		if al.kind == "NOSPACE" || al.kind == "CORRUPT" {
			return 0, fmt.Errorf("post %s: %w", key, rpctypes.ErrGRPCNoSpace)
		}
	}
	if c.board == nil {
		c.board = map[string]boardEntry{}
	}
	c.rev++
	c.board[key] = boardEntry{value: slices.Clone(value), leased: leased, host: l.h.idx, gen: l.gen, expires: l.w.now.Add(lockTTL)}
	return c.rev, nil
}

// Read returns the live entries under prefix.
func (l *locker) Read(_ context.Context, endpoints []string, clusterID uint64, prefix string) (map[string][]byte, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, err := l.boardOf(endpoints, clusterID)
	if err != nil {
		return nil, 0, err
	}
	out := map[string][]byte{}
	for key, e := range c.board {
		if strings.HasPrefix(key, prefix) && (!e.leased || l.w.now.Before(e.expires)) {
			out[key] = slices.Clone(e.value)
		}
	}
	return out, c.rev, nil
}

// Watch calls nothing: the schedule decides when each agent passes, and a
// pass woken by another agent's post is one the schedule can make anyway.
func (l *locker) Watch(context.Context, []string, uint64, string, int64, func(string)) {}

// boardOf is the cluster behind the endpoints, which must be clusterID.
func (l *locker) boardOf(endpoints []string, clusterID uint64) (*cluster, error) {
	c := l.clusterBehind(endpoints)
	switch {
	case c == nil:
		return nil, fmt.Errorf("board: %w", rpctypes.ErrGRPCNoLeader)
	case c.id != clusterID:
		return nil, fmt.Errorf("board: the endpoints answer for cluster %x, not %x", c.id, clusterID)
	}
	return c, nil
}

type modelLock struct {
	l *locker
	c *cluster
}

func (m *modelLock) held() bool {
	h := m.c.lock
	return h != nil && h.host == m.l.h.idx && h.gen == m.l.gen && m.l.w.now.Before(h.expires)
}

func (m *modelLock) Remaining(context.Context) (time.Duration, error) {
	m.l.mu.Lock()
	pause := m.l.w.armed.pauseUnderLock && m.l.w.onPause != nil
	m.l.w.armed.pauseUnderLock = false
	m.l.mu.Unlock()
	if pause {
		m.l.w.onPause(m.l.h) // the others pass meanwhile, taking the model's lock in turn
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	if !m.held() || !m.l.w.quorate(m.c, m.l.h) {
		return 0, fmt.Errorf("%w: in the model", etcdclient.ErrLockLost)
	}
	return m.c.lock.expires.Sub(m.l.w.now), nil
}

func (m *modelLock) Unlock(context.Context) error {
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	if m.held() {
		m.c.lock = nil
	}
	return nil
}
