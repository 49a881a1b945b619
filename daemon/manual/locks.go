package manual

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// Which names one of the two cluster-wide locks.
type Which int

const (
	// WriterLock is the agents' membership writer lock.
	WriterLock Which = iota
	// TaskLock is the lock the running ops task holds.
	TaskLock
)

// ReadLock reads the lock and judges it now.
func (o Operator) ReadLock(ctx context.Context, which Which) (etcdclient.LockStatus, error) {
	var st etcdclient.LockStatus
	err := o.withClusterClient(ctx, func(ctx context.Context, cli *clientv3.Client, clusterID uint64) error {
		var err error
		st, err = o.readLock(ctx, cli, which, clusterID)
		return err
	})
	return st, err
}

// BreakLock reads the lock and frees it by revoking its holder's lease:
// a stale one with yes, any with force (etcdclient.LockStatus.MayBreak).
// It returns the lock as it was read, also when it refuses (the zero
// LockStatus when it could not be read); broke says whether a lease was
// revoked.
func (o Operator) BreakLock(ctx context.Context, which Which, yes, force bool) (st etcdclient.LockStatus, broke bool, err error) {
	err = o.withClusterClient(ctx, func(ctx context.Context, cli *clientv3.Client, clusterID uint64) error {
		read, err := o.readLock(ctx, cli, which, clusterID)
		if err != nil {
			return err
		}
		st = read
		if err := st.MayBreak(yes, force); err != nil || !st.Held {
			return err
		}
		if err := etcdclient.BreakLock(ctx, cli, st, o.Settings.CallTimeout); err != nil {
			return err
		}
		broke = true
		return nil
	})
	return st, broke, err
}

func (o Operator) readLock(ctx context.Context, cli *clientv3.Client, which Which, clusterID uint64) (etcdclient.LockStatus, error) {
	var st etcdclient.LockStatus
	var err error
	if which == TaskLock {
		st, err = etcdclient.ReadTaskLock(ctx, cli, etcdclient.TaskLockKey(o.Settings.ClusterName))
	} else {
		st, err = etcdclient.ReadLock(ctx, cli, etcdclient.WriterLockKey(clusterID))
	}
	st.Judge(time.Now())
	return st, err
}

// withClusterClient connects to the cluster's client endpoints and runs fn
// with the ID of the cluster that answers, once that is the cluster this
// node belongs to: another cluster's lock is never read as ours, nor
// broken, and its downgrade state is never changed.
func (o Operator) withClusterClient(ctx context.Context, fn func(context.Context, *clientv3.Client, uint64) error) error {
	cli, err := o.Cluster.Pool().NewMulti(o.Cluster.ClientEndpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	// The writer lock's key derives from the cluster's ID, which every
	// answer carries.
	idCtx, cancel := context.WithTimeout(ctx, o.Settings.CallTimeout)
	id, err := etcdclient.ClusterIDOf(idCtx, cli)
	cancel()
	if err != nil {
		return err
	}
	if pinned := o.Cluster.PinnedClusterID(); pinned != "" && pinned != strconv.FormatUint(id, 16) {
		return fmt.Errorf("the endpoints answer for cluster %x, but this node belongs to cluster %s: not touching another cluster", id, pinned)
	}
	return fn(ctx, cli, id)
}
