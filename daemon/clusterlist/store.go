package clusterlist

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// ErrChanged says that the list changed between the read an edit was
// based on and its commit.
var ErrChanged = errors.New("the member list changed meanwhile")

// Read reads the stored list of cluster clusterID, linearizably; found is
// false when there is none.
func Read(ctx context.Context, cli *clientv3.Client, clusterID uint64, timeout time.Duration) (s Stored, found bool, err error) {
	key := etcdclient.MemberListKey(clusterID)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return Stored{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	if resp.Header.ClusterId != clusterID {
		return Stored{}, false, fmt.Errorf("read %s: the endpoints answer for cluster %x, not %x", key, resp.Header.ClusterId, clusterID)
	}
	if len(resp.Kvs) == 0 {
		return Stored{}, false, nil
	}
	rec, err := Decode(resp.Kvs[0].Value)
	if err != nil {
		return Stored{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	return Stored{Record: rec, Revision: resp.Kvs[0].ModRevision}, true, nil
}

// Commit stores rec if the list is still the one last changed at
// revision base (0: none stored yet), and returns the revision of the
// new list. ErrChanged when another edit came first.
func Commit(ctx context.Context, cli *clientv3.Client, clusterID uint64, base int64, rec Record, timeout time.Duration) (int64, error) {
	key := etcdclient.MemberListKey(clusterID)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", base)).
		Then(clientv3.OpPut(key, string(rec.Encode()))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", key, err)
	}
	if resp.Header.ClusterId != clusterID {
		// The compare ran on another cluster's keyspace: nothing there
		// names this one's key, so a success is impossible, but say why.
		return 0, fmt.Errorf("store %s: the endpoints answer for cluster %x, not %x", key, resp.Header.ClusterId, clusterID)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w (it was based on revision %d): read it again and retry", ErrChanged, base)
	}
	return resp.Header.Revision, nil
}
