package task

import (
	"context"
	"os"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// Locker takes the cluster-wide task lock: one task at a time per
// cluster. etcdclient.TaskLocker is the one in etcd; the runner's tests
// use one in memory.
type Locker interface {
	// Acquire takes the lock for h, or fails with a
	// *etcdclient.TaskLockHeldError naming the holder. A lock recorded for
	// the same task (an agent restarted while it ran the task) is taken
	// over.
	Acquire(ctx context.Context, h etcdclient.LockHolder) (etcdclient.TaskLock, error)
}

// holder is what the task lock records while t runs: the task, and this
// node and process.
func (r *Runner) holder(t Task) etcdclient.LockHolder {
	return etcdclient.LockHolder{Holder: "etcdlet task runner", Host: r.Node, PID: os.Getpid(), Acquired: r.now().UTC(), Task: t.ID, Type: t.Type}
}
