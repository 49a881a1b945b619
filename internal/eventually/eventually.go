// Package eventually is the one wait-until of etcdlet's tests: a test
// waits for a condition with a deadline, never for a guessed time, and
// at the deadline fails saying what it waited for and what it last saw.
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
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s: %v", what, within, err)
			return // for a T whose Fatalf returns
		}
		time.Sleep(interval)
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
