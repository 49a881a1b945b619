package main

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// tb lets the harness run outside `go test`. A failure, from any
// goroutine, marks the run failed, runs the cleanups (the harness prints
// the tail of every agent's log for a failed run and stops all processes)
// and exits 1: the benchmark fails with the reason instead of hanging.
type tb struct {
	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

func (*tb) Helper()                         {}
func (*tb) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func (t *tb) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: FAILED: "+format+"\n", args...)
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	t.cleanup()
	os.Exit(1)
}

func (t *tb) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *tb) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// cleanup runs the cleanups registered so far, newest first, once each.
func (t *tb) cleanup() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// section runs f and then the cleanups registered while it ran, so that a
// measurement's processes are gone before the next one starts.
func (t *tb) section(f func()) {
	t.mu.Lock()
	mark := len(t.cleanups)
	t.mu.Unlock()
	f()
	t.mu.Lock()
	fs := t.cleanups[mark:]
	t.cleanups = t.cleanups[:mark:mark]
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// check fails the run on an error.
func (t *tb) check(err error, what string) {
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// limit fails the run if it has not finished within d: no wait can hang
// the benchmark, even one without its own deadline.
func (t *tb) limit(d time.Duration) {
	time.AfterFunc(d, func() { t.Fatalf("the benchmark did not finish within %s (-limit)", d) })
}
