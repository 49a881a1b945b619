package etcdclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
)

func TestLockStaleness(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	held := func(ago time.Duration, remaining int64) etcdclient.LockStatus {
		return etcdclient.LockStatus{Held: true, LeaseID: 0x694d, GrantedTTL: 15, RemainingTTL: remaining,
			Holder: &etcdclient.LockHolder{Holder: "etcd-main-192.0.2.1", Acquired: now.Add(-ago)}}
	}
	unnamed := held(time.Hour, 14)
	unnamed.Holder = nil
	noLease := held(time.Second, 0)
	noLease.LeaseID = clientv3.NoLease
	for _, tc := range []struct {
		name      string
		st        etcdclient.LockStatus
		wantStale bool
		wantWhy   string
	}{
		{"free", etcdclient.LockStatus{}, false, "free"},
		{"mid-change", held(3*time.Second, 14), false, "held for 3s, within twice"},
		{"held past twice the TTL", held(31*time.Second, 14), true, "held for 31s, longer than twice"},
		{"lease gone", held(time.Second, -1), true, "lease is gone"},
		{"less than a second left before a keep-alive", held(2*time.Second, 0), false, "within twice"},
		{"key without a lease", noLease, true, "lease is gone"},
		{"no holder recorded", unnamed, false, "age is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			st.Judge(now)
			if st.Stale != tc.wantStale || !strings.Contains(st.Why, tc.wantWhy) {
				t.Errorf("stale %v (%s), want %v (%q)", st.Stale, st.Why, tc.wantStale, tc.wantWhy)
			}
		})
	}
}

func TestMayBreak(t *testing.T) {
	live := etcdclient.LockStatus{Held: true, Why: "held for 3s"}
	stale := etcdclient.LockStatus{Held: true, Stale: true}
	for _, tc := range []struct {
		name       string
		st         etcdclient.LockStatus
		yes, force bool
		wantErr    string
	}{
		{"no flag", stale, false, false, "needs --yes"},
		{"no flag, free lock", etcdclient.LockStatus{}, false, false, "needs --yes"},
		{"--yes, stale", stale, true, false, ""},
		{"--yes, live holder", live, true, false, "not stale (held for 3s)"},
		{"--force, live holder", live, false, true, ""},
		{"--yes, free: nothing to break", etcdclient.LockStatus{}, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.st.MayBreak(tc.yes, tc.force)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("MayBreak = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// What `etcdlet lock status` and `lock break` read and do, on a real
// lock: the holder named, the lock live, then broken by revoking its
// lease, after which its holder learns before its next call.
func TestReadAndBreakALiveLock(t *testing.T) {
	members, lock := heldLock(t, "etcd-main-2001:db8::1")
	ctx := context.Background()
	cli, _ := lockKeyValue(t, etcdtest.ClientURLs(members), members[0].ClusterID())
	id, err := etcdclient.ClusterIDOf(ctx, cli)
	if err != nil || id != members[0].ClusterID() {
		t.Fatalf("cluster ID %x, %v; want %x", id, err, members[0].ClusterID())
	}
	st, err := etcdclient.ReadLock(ctx, cli, etcdclient.WriterLockKey(id))
	if err != nil {
		t.Fatal(err)
	}
	st.Judge(time.Now())
	if !st.Held || st.Stale || st.Holder == nil || st.Holder.Holder != "etcd-main-2001:db8::1" || st.RemainingTTL < 0 {
		t.Fatalf("lock status %+v: want held, live, by etcd-main-2001:db8::1", st)
	}
	if err := st.MayBreak(true, false); err == nil {
		t.Error("a live lock may be broken with --yes")
	}
	if err := etcdclient.BreakLock(ctx, cli, st, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Remaining(ctx); !errors.Is(err, etcdclient.ErrLockLost) {
		t.Errorf("the holder of a broken lock confirms it: %v", err)
	}
	if after, err := etcdclient.ReadLock(ctx, cli, etcdclient.WriterLockKey(id)); err != nil || after.Held {
		t.Errorf("after the break: %+v, %v; want free", after, err)
	}
}
