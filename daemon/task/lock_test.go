package task

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
)

func TestEtcdLocker(t *testing.T) {
	members := etcdtest.Start(t, 1)
	newClient := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: etcdtest.ClientURLs(members), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	}
	locker := &EtcdLocker{Client: newClient, Key: "/etcdlet/test/task-lock", TTL: 2 * time.Second, CallTimeout: 2 * time.Second}
	ctx := context.Background()
	observer, err := newClient()
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	a := Holder{Task: "task-a", Type: "snapshot", Node: "node-a", Since: time.Now()}

	held, err := locker.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a second task is refused with the holder named", func(t *testing.T) {
		_, err := locker.Acquire(ctx, Holder{Task: "task-b", Node: "node-b"})
		var busy *HeldError
		if !errors.As(err, &busy) || busy.By.Task != "task-a" || busy.By.Node != "node-a" {
			t.Fatalf("got %v, want a HeldError naming task-a on node-a", err)
		}
	})
	t.Run("the same task takes the lock over after a restart", func(t *testing.T) {
		held.Abandon() // the agent died: nobody keeps the old lease alive
		again, err := locker.Acquire(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		held = again
	})
	t.Run("the lock outlives its first lease while kept alive", func(t *testing.T) {
		time.Sleep(3 * time.Second) // beyond the TTL: only the keep-alive holds it
		if h, err := ReadHolder(ctx, observer, locker.Key); err != nil || h == nil || h.Task != "task-a" {
			t.Fatalf("holder %v (%v), want task-a", h, err)
		}
	})
	t.Run("release frees it at once", func(t *testing.T) {
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if h, err := ReadHolder(ctx, observer, locker.Key); err != nil || h != nil {
			t.Fatalf("holder %v (%v) after release, want none", h, err)
		}
	})
	t.Run("an abandoned lock frees itself when its lease expires, and is reported lost", func(t *testing.T) {
		held, err := locker.Acquire(ctx, Holder{Task: "task-c", Node: "node-c"})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := observer.Get(ctx, locker.Key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatal(err)
		}
		if _, err := observer.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-held.Lost():
		case <-time.After(10 * time.Second):
			t.Fatal("the revoked lock was not reported lost")
		}
		if _, err := locker.Acquire(ctx, Holder{Task: "task-d"}); err != nil {
			t.Fatalf("a freed lock cannot be taken: %v", err)
		}
		_ = held.Release(ctx)
	})
}
