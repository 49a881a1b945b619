package daemon

import (
	"testing"
	"time"
)

// The loop is alive while it waits, however long; while it works, only
// as long as its work made progress within the watchdog interval.
func TestHeartbeat(t *testing.T) {
	const every = 15 * time.Second
	start := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	var h heartbeat
	steps := []struct {
		name string
		do   func()
		at   time.Duration
		want bool
	}{
		{"before the first pass begins", func() {}, 0, true},
		{"a pass just begun", func() { h.working(at(0)) }, time.Second, true},
		{"a pass still running within the interval", func() {}, every - time.Millisecond, true},
		{"a pass stuck for the interval", func() {}, every, false},
		{"a restart that reports progress", func() { h.progressed(at(20 * time.Second)) }, 30 * time.Second, true},
		{"a restart that stopped reporting", func() {}, 35 * time.Second, false},
		{"waiting for the next pass, an idle interval long", func() { h.waiting() }, 5 * time.Minute, true},
	}
	for _, s := range steps {
		s.do()
		if got := h.alive(at(s.at), every); got != s.want {
			t.Fatalf("%s: alive = %v, want %v", s.name, got, s.want)
		}
	}
}
