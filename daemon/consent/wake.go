package consent

import (
	"sync"
	"time"
)

// WakeInterval is the least time between two passes that wake-ups
// cause. A wake-up only spares a node the writer just added as a learner
// the wait for its next pass (agent.reconcileInterval, 5 s by default),
// and the writer sends one per learner it adds; within a second the
// learner starts all the same. Whatever the rate of wake-ups, a flood
// then costs at most one pass a second more than an idle agent runs.
const WakeInterval = time.Second

// Wakes coalesces wake-ups: it signals on C at once when the previous
// signal is at least an interval old, and otherwise once at the end of
// that interval, for every wake-up that came meanwhile. So no wake-up is
// lost (each is followed by a signal, and the pass it leads to, no later
// than an interval after it), and any rate of them gives at most one
// signal per interval. It never delays anything else the agent's loop
// waits on.
type Wakes struct {
	c        chan struct{}
	interval time.Duration

	mu      sync.Mutex
	last    time.Time   // when the latest signal was sent
	pending *time.Timer // the signal due at the end of the quiet interval
}

// NewWakes coalesces wake-ups to at most one signal per interval.
func NewWakes(interval time.Duration) *Wakes {
	return &Wakes{c: make(chan struct{}, 1), interval: interval}
}

// C receives a signal for every wake-up or burst of them.
func (w *Wakes) C() <-chan struct{} { return w.c }

// Wake records a wake-up. It never blocks.
func (w *Wakes) Wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending != nil {
		return // the signal due at the end of the quiet interval covers it
	}
	if d := wakeDelay(w.last, time.Now(), w.interval); d > 0 {
		w.pending = time.AfterFunc(d, w.fire)
		return
	}
	w.signal()
}

func (w *Wakes) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = nil
	w.signal()
}

// signal leaves a signal for the loop; one already waiting there stands
// for this one too (the pass it leads to starts after this wake-up).
func (w *Wakes) signal() {
	w.last = time.Now()
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// wakeDelay is how long after now a wake-up may be signalled when the
// previous signal was sent at last (zero: never): 0 for at once.
func wakeDelay(last, now time.Time, interval time.Duration) time.Duration {
	if last.IsZero() {
		return 0
	}
	return max(0, last.Add(interval).Sub(now))
}
