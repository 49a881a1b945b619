package daemon

import (
	"context"
	"sync/atomic"
	"time"
)

// heartbeat tells the systemd watchdog whether the agent's loop is alive,
// on its own schedule rather than the loop's: a settled agent passes only
// every agent.idleInterval, which may be longer than WatchdogSec, and
// waiting for the next pass is not being stuck. The loop is alive while
// it waits, and while it works as long as its work made progress within
// the watchdog interval (a pass, a member restart that reports progress).
type heartbeat struct {
	busy     atomic.Bool
	progress atomic.Int64 // unix nanoseconds of the last progress
}

// working marks the loop busy from now on.
func (h *heartbeat) working(now time.Time) {
	h.progress.Store(now.UnixNano())
	h.busy.Store(true)
}

// waiting marks the loop waiting for its next pass or event.
func (h *heartbeat) waiting() { h.busy.Store(false) }

// progressed records progress of long work (a restart waiting for etcd).
func (h *heartbeat) progressed(now time.Time) { h.progress.Store(now.UnixNano()) }

// alive is whether the loop counts as alive at now.
func (h *heartbeat) alive(now time.Time, within time.Duration) bool {
	return !h.busy.Load() || now.Sub(time.Unix(0, h.progress.Load())) < within
}

// feedWatchdog pings the watchdog every interval while the loop is alive;
// a loop stuck in one piece of work for longer stops the pings, and
// systemd restarts the agent WatchdogSec after the last one.
func (a *Agent) feedWatchdog(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if a.beat.alive(now, every) {
				a.notifier.Watchdog()
			}
		}
	}
}
