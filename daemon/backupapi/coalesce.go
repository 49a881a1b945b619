package backupapi

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// Coalesce wraps b so that no rate of requests fills the snapshot store
// or keeps the one task slot busy:
//   - a full snapshot (not final) ordered within minFull of the newest full
//     one in the store gets that one, as etcd-backup-restore answers a
//     repeated final request with the final snapshot it has;
//   - requests of the same kind while one runs wait for it and share its
//     outcome: one snapshot of a kind in flight at a time.
//
// A snapshot in flight is not cancelled when the request that started it
// goes away: the others share it, and the task has its own timeout.
func Coalesce(b Backend, minFull time.Duration, now func() time.Time) Backend {
	return &coalescing{Backend: b, minFull: minFull, now: now, flights: map[string]*flight{}}
}

type coalescing struct {
	Backend
	minFull time.Duration
	now     func() time.Time

	mu      sync.Mutex
	flights map[string]*flight // by kind and final
}

type flight struct {
	done chan struct{}
	out  json.RawMessage
	err  error
	// shared counts the requests that joined it after the first (under
	// the coalescing's mutex).
	shared int
}

func (c *coalescing) TakeSnapshot(ctx context.Context, kind string, final bool) (json.RawMessage, error) {
	if out, ok := c.recentFull(ctx, kind, final); ok {
		return out, nil
	}
	key := kind + "/" + strconv.FormatBool(final)
	c.mu.Lock()
	f, running := c.flights[key]
	if !running {
		f = &flight{done: make(chan struct{})}
		c.flights[key] = f
		go func() {
			f.out, f.err = c.Backend.TakeSnapshot(context.WithoutCancel(ctx), kind, final)
			c.mu.Lock()
			delete(c.flights, key)
			c.mu.Unlock()
			close(f.done)
		}()
	} else {
		f.shared++
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.out, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// recentFull is the newest full snapshot in the store when a new full one
// (not final) would come within minFull of it.
func (c *coalescing) recentFull(ctx context.Context, kind string, final bool) (json.RawMessage, bool) {
	if kind != kindFull || final || c.minFull <= 0 {
		return nil, false
	}
	full, _, err := c.Latest(ctx)
	if err != nil || full == nil || c.now().Sub(full.CreatedOn) >= c.minFull {
		return nil, false
	}
	out, err := json.Marshal(full)
	return out, err == nil
}
