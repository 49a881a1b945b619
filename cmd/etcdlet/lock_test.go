package main

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

func TestLockStaleness(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	held := func(ago time.Duration, remaining int64) lockState {
		return lockState{Held: true, LeaseID: 0x694d, GrantedTTL: 15, RemainingTTL: remaining,
			Holder: &etcdclient.LockHolder{Holder: "etcd-main-192.0.2.1", Acquired: now.Add(-ago)}}
	}
	unnamed := held(time.Hour, 14)
	unnamed.Holder = nil
	noLease := held(time.Second, 0)
	noLease.LeaseID = clientv3.NoLease
	for _, tc := range []struct {
		name      string
		st        lockState
		wantStale bool
		wantWhy   string
	}{
		{"free", lockState{}, false, "free"},
		{"mid-change", held(3*time.Second, 14), false, "held for 3s, within twice"},
		{"held past twice the TTL", held(31*time.Second, 14), true, "held for 31s, longer than twice"},
		{"lease gone", held(time.Second, -1), true, "lease is gone"},
		{"key without a lease", noLease, true, "lease is gone"},
		{"no holder recorded", unnamed, false, "age is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			st.judge(now)
			if st.Stale != tc.wantStale || !strings.Contains(st.Why, tc.wantWhy) {
				t.Errorf("stale %v (%s), want %v (%q)", st.Stale, st.Why, tc.wantStale, tc.wantWhy)
			}
		})
	}
}

func TestCheckBreak(t *testing.T) {
	live := lockState{Held: true, Why: "held for 3s"}
	stale := lockState{Held: true, Stale: true}
	for _, tc := range []struct {
		name       string
		st         lockState
		yes, force bool
		wantErr    string
	}{
		{"no flag", stale, false, false, "needs --yes"},
		{"no flag, free lock", lockState{}, false, false, "needs --yes"},
		{"--yes, stale", stale, true, false, ""},
		{"--yes, live holder", live, true, false, "not stale (held for 3s)"},
		{"--force, live holder", live, false, true, ""},
		{"--yes, free: nothing to break", lockState{}, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkBreak(tc.st, tc.yes, tc.force)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("checkBreak = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
