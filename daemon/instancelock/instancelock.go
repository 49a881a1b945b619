// Package instancelock keeps two etcdlet agents off one state dir, and
// tells an agent whether another instance on its host runs. A host runs
// one agent per cluster (etcdlet@<name>.service), each with its own state
// dir, which its agent holds locked while it runs.
//
// The lock is a flock(2) on the state dir itself: it creates no file,
// and the kernel drops it when the agent exits, however it exits, so no
// stale lock ever outlives a crash.
package instancelock

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/etcdlet/etcdlet/internal/flock"
)

// ErrHeld is the error of Acquire on a state dir another agent holds.
var ErrHeld = errors.New("another etcdlet agent runs with this state dir")

// Lock is a state dir held by this agent.
type Lock struct{ dir *os.File }

// Acquire locks stateDir, creating it (0700) when missing, or fails at
// once with ErrHeld while another agent holds it.
func Acquire(stateDir string) (*Lock, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("lock agent.stateDir %s: %w", stateDir, err)
	}
	dir, err := os.Open(stateDir)
	if err != nil {
		return nil, fmt.Errorf("lock agent.stateDir %s: %w", stateDir, err)
	}
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		dir.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock agent.stateDir %s: %w: one agent per state dir (each cluster on a host has its own, etcdlet@<name>.service)", stateDir, ErrHeld)
		}
		return nil, fmt.Errorf("lock agent.stateDir %s: %w", stateDir, err)
	}
	return &Lock{dir: dir}, nil
}

// Release unlocks the state dir. Closing a directory opened to read
// cannot lose anything, and the lock goes with the file either way.
func (l *Lock) Release() { _ = l.dir.Close() }

// Held reports whether an agent holds stateDir: this process through
// another Lock, or another agent. A state dir that does not exist is not
// held.
func Held(stateDir string) (bool, error) {
	held, err := flock.Held(stateDir)
	if err != nil {
		return false, fmt.Errorf("is agent.stateDir %s locked: %w", stateDir, err)
	}
	return held, nil
}
