package etcdclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
)

func TestTaskLocker(t *testing.T) {
	members := etcdtest.Start(t, 1)
	newClient := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: etcdtest.ClientURLs(members), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	}
	locker := &TaskLocker{Client: newClient, Key: "/etcdlet/test/task-lock", TTL: 2 * time.Second, CallTimeout: 2 * time.Second}
	ctx := context.Background()
	observer, err := newClient()
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	a := LockHolder{Holder: "etcdlet task runner", Task: "task-a", Type: "snapshot", Host: "node-a", PID: 1, Acquired: time.Now()}

	held, err := locker.Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a second task is refused with the holder named", func(t *testing.T) {
		_, err := locker.Acquire(ctx, LockHolder{Task: "task-b", Host: "node-b", Acquired: time.Now()})
		var busy *TaskLockHeldError
		if !errors.As(err, &busy) || busy.By.Task != "task-a" || busy.By.Host != "node-a" {
			t.Fatalf("got %v, want a TaskLockHeldError naming task-a on node-a", err)
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
		st, err := ReadTaskLock(ctx, observer, locker.Key)
		if err != nil || !st.Held || st.Holder == nil || st.Holder.Task != "task-a" {
			t.Fatalf("lock %+v (%v), want held by task-a", st, err)
		}
		if st.Judge(time.Now()); st.Stale {
			t.Errorf("a task's lock kept alive past its TTL is called stale: %s", st.Why)
		}
	})
	t.Run("release frees it at once", func(t *testing.T) {
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if st, err := ReadTaskLock(ctx, observer, locker.Key); err != nil || st.Held {
			t.Fatalf("lock %+v (%v) after release, want free", st, err)
		}
	})
	t.Run("a holder an older etcdlet recorded is named", func(t *testing.T) {
		lease, err := observer.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = observer.Revoke(ctx, lease.ID) }()
		old := `{"task":"task-old","type":"defrag","node":"node-old","since":"2026-11-24T10:00:00Z"}`
		if _, err := observer.Put(ctx, locker.Key, old, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
		_, err = locker.Acquire(ctx, LockHolder{Task: "task-new", Acquired: time.Now()})
		var busy *TaskLockHeldError
		if !errors.As(err, &busy) || busy.By.Task != "task-old" || !strings.Contains(err.Error(), "task task-old (defrag)") {
			t.Fatalf("got %v, want a TaskLockHeldError naming task-old", err)
		}
	})
	t.Run("an abandoned lock frees itself when its lease expires, and is reported lost", func(t *testing.T) {
		held, err := locker.Acquire(ctx, LockHolder{Task: "task-c", Host: "node-c", Acquired: time.Now()})
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
		if _, err := locker.Acquire(ctx, LockHolder{Task: "task-d", Acquired: time.Now()}); err != nil {
			t.Fatalf("a freed lock cannot be taken: %v", err)
		}
		_ = held.Release(ctx)
	})
}
