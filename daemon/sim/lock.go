package sim

import (
	"context"
	"fmt"
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

func (l *locker) TryLock(_ context.Context, endpoints []string) (etcdclient.Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clusterBehind(endpoints)
	if c == nil {
		return nil, fmt.Errorf("take writer lock: %w", rpctypes.ErrGRPCNoLeader)
	}
	for _, al := range c.alarms {
		if al.kind == "NOSPACE" {
			return nil, fmt.Errorf("grant writer lock lease: %w", rpctypes.ErrGRPCNoSpace)
		}
		if al.kind == "CORRUPT" {
			return nil, fmt.Errorf("take writer lock: %w", rpctypes.ErrGRPCCorrupt)
		}
	}
	if h := c.lock; h != nil && l.w.now.Before(h.expires) && !(h.host == l.h.idx && h.gen == l.gen) {
		return nil, etcdclient.ErrLocked
	}
	c.lock = &lockHolder{host: l.h.idx, gen: l.gen, expires: l.w.now.Add(lockTTL)}
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
