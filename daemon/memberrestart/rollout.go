package memberrestart

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// Delays of Rollout before it asks again.
const (
	// rolloutBusyRetry: another task holds the cluster-wide lock (another
	// host's restart, most likely, which takes seconds).
	rolloutBusyRetry = 5 * time.Second
	// rolloutRetryFirst and rolloutRetryMax bound the growing delay after
	// any other refusal or failure (a member not ready).
	rolloutRetryFirst = 2 * time.Second
	rolloutRetryMax   = time.Minute
)

// Rollout carries out the change the node holds (node.HeldChange) through
// member-restart tasks, one at a time, asking again while they are
// refused. Every host of the cluster does the same for its own member, so
// a new image or etcdlet package reaching them all at once rolls through
// the cluster one member at a time, in the order the hosts win the lock.
type Rollout struct {
	// Restart runs a member-restart task with params and returns it
	// completed.
	Restart func(ctx context.Context, params map[string]string) (task.Task, error)
	Log     *slog.Logger
	Now     func() time.Time

	mu      sync.Mutex
	running bool
	retryAt time.Time
	delay   time.Duration
}

// Offer starts a task for the change unless one runs or the last one
// ended too recently; no change (nil) resets the delay. The agent's loop
// offers what each pass holds.
func (r *Rollout) Offer(ctx context.Context, wg *sync.WaitGroup, h *node.HeldChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h == nil {
		if !r.running {
			r.retryAt, r.delay = time.Time{}, 0
		}
		return
	}
	if r.running || r.Now().Before(r.retryAt) {
		return
	}
	r.running = true
	params := map[string]string{ParamReason: h.Reason}
	if !h.Version.IsZero() {
		params[ParamVersion] = h.Version.String()
	}
	change := h.Reason
	wg.Go(func() {
		t, err := r.Restart(ctx, params)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.running = false
		if err == nil && t.Phase == task.Succeeded {
			r.retryAt, r.delay = time.Time{}, 0
			r.Log.Info("restarted the local member for a held change", "change", change, "task", t.ID)
			return
		}
		level, delay := slog.LevelInfo, min(max(2*r.delay, rolloutRetryFirst), rolloutRetryMax)
		why := t.LastOperation.Description
		if err != nil {
			why = err.Error()
		} else if n := len(t.LastErrors); n > 0 && t.LastErrors[n-1].Code == task.CodeDuplicateTask {
			// Not a refusal of this restart: its turn comes.
			level, delay = slog.LevelDebug, rolloutBusyRetry
		}
		r.delay, r.retryAt = delay, r.Now().Add(delay)
		r.Log.Log(ctx, level, "the restart for a held change did not run; asking again", "change", change, "task", t.ID, "state", string(t.Phase),
			"reason", why, "retryIn", delay.String())
	})
}
