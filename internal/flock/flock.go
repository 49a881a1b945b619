// Package flock tells whether another open file description holds a
// flock(2) on a file or directory: etcd's backend on its db file while a
// member runs, an agent on its state dir.
package flock

import (
	"errors"
	"os"
	"syscall"
)

// Held reports whether a lock is held on path (by another process, or by
// this one through another open); a path that does not exist is not held.
// It takes and at once drops an exclusive lock to find out, so that a
// reader's shared lock counts too.
func Held(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close() // closing drops the lock, if taken
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		return false, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	default:
		return false, err
	}
}
