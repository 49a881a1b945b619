// Package eventually is the one wait-until of etcdlet's tests: a test
// waits for a condition with a deadline, never for a guessed time, and
// at the deadline fails saying what it waited for and what it last saw.
// Within is the same wait for a caller that must not fail there (the
// fault campaign records a violation and goes on, so that it keeps its
// logs).
package eventually

import (
	"errors"
	"time"
)

// T is the part of testing.TB a wait uses.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// interval is how often a condition is asked again.
const interval = 20 * time.Millisecond

// Nil asks cond until it returns nil; at the deadline it fails the test
// with cond's last error.
func Nil(t T, within time.Duration, what string, cond func() error) {
	t.Helper()
	if _, err := Within(within, interval, cond); err != nil {
		t.Fatalf("%s: not true within %s: %v", what, within, err)
	}
}

// Within asks cond every so often until it returns nil, or until within
// passed; it returns how long that took and, at the deadline, cond's last
// error.
func Within(within, every time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > within {
			return time.Since(start), err
		}
		time.Sleep(every)
	}
}

// True asks cond until it holds.
func True(t T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Nil(t, within, what, func() error {
		if !cond() {
			return errNotYet
		}
		return nil
	})
}

var errNotYet = errors.New("the condition does not hold")
