package consent

import (
	"testing"
	"time"
)

func TestWakeDelay(t *testing.T) {
	const interval = time.Second
	now := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	tests := []struct {
		name string
		last time.Time
		want time.Duration
	}{
		{"the first wake-up is signalled at once", time.Time{}, 0},
		{"right after a signal: at the end of the interval", now, interval},
		{"within the interval: at its end", now.Add(-interval / 4), 3 * interval / 4},
		{"an interval after the last signal: at once", now.Add(-interval), 0},
		{"long after: at once", now.Add(-time.Hour), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wakeDelay(tt.last, now, interval); got != tt.want {
				t.Errorf("wakeDelay = %s, want %s", got, tt.want)
			}
		})
	}
}

// A wake-up is signalled at once, a burst of them within the interval
// after it gives one more signal at the interval's end (none is lost),
// and nothing more is scheduled after that.
func TestWakesCoalesceABurst(t *testing.T) {
	const interval = 200 * time.Millisecond
	w := NewWakes(interval)
	w.Wake()
	first := time.Now()
	select {
	case <-w.C():
	default:
		t.Fatal("the first wake-up was not signalled at once")
	}
	for range 100 {
		w.Wake()
	}
	select {
	case <-w.C():
		t.Fatal("a wake-up within the interval was signalled at once")
	default:
	}
	select {
	case <-w.C():
		if d := time.Since(first); d < interval {
			t.Errorf("the burst was signalled %s after the first signal, within the interval %s", d, interval)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the burst within the interval was never signalled: a wake-up was lost")
	}
	w.mu.Lock()
	pending := w.pending
	w.mu.Unlock()
	if pending != nil {
		t.Error("another signal is scheduled after the burst's one")
	}
}

// Under a flood, signals come at most one per interval: during the flood
// at most flood/interval + 1, and then one more at the end of the
// interval after the last signal, for the wake-ups since (none is lost).
func TestWakesBoundAFlood(t *testing.T) {
	const (
		interval = 50 * time.Millisecond
		flood    = time.Second
	)
	w := NewWakes(interval)
	signals := 0
	end := time.Now().Add(flood)
	for time.Now().Before(end) {
		w.Wake()
		select {
		case <-w.C():
			signals++
		default:
		}
	}
	t.Logf("a flood of %s gave %d signals at an interval of %s", flood, signals, interval)
	if most := int(flood/interval) + 1; signals > most || signals < 2 {
		t.Fatalf("a flood of %s gave %d signals, want 2 to %d (one per %s)", flood, signals, most, interval)
	}
	// The last wake-up was either signalled at once (its signal counted
	// above: a loaded machine can leave more than an interval between two
	// turns of the loop) or is due at the end of the interval.
	w.mu.Lock()
	due := w.pending != nil || len(w.c) > 0
	w.mu.Unlock()
	if !due {
		return
	}
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the flood's last wake-ups were never signalled")
	}
}
