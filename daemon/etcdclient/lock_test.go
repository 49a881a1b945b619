package etcdclient_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
)

func locker(t *testing.T) *etcdclient.SessionLocker {
	t.Helper()
	pool, err := etcdclient.NewPool(config.TLSFiles{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l := &etcdclient.SessionLocker{Pool: pool, TTL: 15 * time.Second, CallTimeout: 2 * time.Second}
	t.Cleanup(func() { l.Close(); pool.Close() })
	return l
}

// A lock whose release fails is not left to expire with its lease (the
// session's keep-alive would keep it for as long as the agent lives): the
// session is closed, the lease revoked, and another agent takes the lock
// at once.
func TestALockWhoseReleaseFailsIsFreedAtOnce(t *testing.T) {
	members := etcdtest.Start(t, 3)
	endpoints := etcdtest.ClientURLs(members)
	a, b := locker(t), locker(t)
	ctx := context.Background()
	lock, err := a.TryLock(ctx, endpoints, members[0].ClusterID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, endpoints, members[0].ClusterID()); !errors.Is(err, etcdclient.ErrLocked) {
		t.Fatalf("a second agent took a held lock: %v", err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel() // the release's call cannot be made
	if err := lock.Unlock(gone); err == nil {
		t.Fatal("a release that could not be sent reported success")
	}
	start := time.Now()
	if _, err := b.TryLock(ctx, endpoints, members[0].ClusterID()); err != nil {
		t.Fatalf("after a failed release the lock stayed held: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the lock was free only after %s, as if it had expired with its lease", d)
	}
}

// A holder whose lease is gone (revoked, or expired while it was cut off)
// learns it before its next membership call: Remaining says the lock is
// lost, and the holder makes no call.
func TestRemainingSaysWhenTheLockIsLost(t *testing.T) {
	members := etcdtest.Start(t, 3)
	endpoints := etcdtest.ClientURLs(members)
	a := locker(t)
	ctx := context.Background()
	lock, err := a.TryLock(ctx, endpoints, members[0].ClusterID())
	if err != nil {
		t.Fatal(err)
	}
	left, err := lock.Remaining(ctx)
	if err != nil || left <= 0 || left > 15*time.Second {
		t.Fatalf("a held lock: remaining %s, %v", left, err)
	}
	other, kv := lockKeyValue(t, endpoints, members[0].ClusterID())
	if _, err := other.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
		t.Fatal(err)
	}
	_, err = lock.Remaining(ctx)
	if !errors.Is(err, etcdclient.ErrLockLost) {
		t.Fatalf("Remaining after the lease was revoked: %v, want ErrLockLost", err)
	}
	if got := etcdclient.Classify(etcdclient.OpRemove, err); got != etcdclient.Fatal {
		t.Errorf("a lost lock classifies as %s, want fatal: no call may follow", got)
	}
	if _, err := locker(t).TryLock(ctx, endpoints, members[0].ClusterID()); err != nil {
		t.Errorf("the lost lock is still held: %v", err)
	}
}

// The lock key says who holds it and since when (etcd keeps neither), and
// writing that does not make the holder doubt its own lock.
func TestTheLockKeyNamesItsHolder(t *testing.T) {
	before := time.Now()
	members, lock := heldLock(t, "etcd-main-192.0.2.1")
	ctx := context.Background()
	_, kv := lockKeyValue(t, etcdtest.ClientURLs(members), members[0].ClusterID())
	h, ok := etcdclient.ParseLockHolder(kv.Value)
	if !ok || h.Holder != "etcd-main-192.0.2.1" || h.PID != os.Getpid() || h.Host == "" || h.Acquired.Before(before.Add(-time.Second)) {
		t.Errorf("holder %+v (ok %v) from value %q", h, ok, kv.Value)
	}
	if _, err := lock.Remaining(ctx); err != nil {
		t.Errorf("the holder doubts its lock after recording itself: %v", err)
	}
	if _, ok := etcdclient.ParseLockHolder(nil); ok {
		t.Error("an empty value (an older agent's lock) parsed as a holder")
	}
}

// lockKeyValue reads the one lock key through a client of its own, closed
// when the test ends.
func lockKeyValue(t *testing.T, endpoints []string, clusterID uint64) (*clientv3.Client, *mvccpb.KeyValue) {
	t.Helper()
	other, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	resp, err := other.Get(context.Background(), etcdclient.WriterLockKey(clusterID), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the lock key: %v, %v", resp, err)
	}
	return other, resp.Kvs[0]
}

// leaseLeft is a held lock whose lease has a fixed time left.
type leaseLeft time.Duration

func (l leaseLeft) Remaining(context.Context) (time.Duration, error) { return time.Duration(l), nil }
func (leaseLeft) Unlock(context.Context) error                       { return nil }

// A call under the lock never outlasts the lease, and a lease with no
// time left for a call counts as lost: no call is made, and the retry
// policy stops (a timeout from a call with no time would say nothing and
// be retried in vain until the lease ran out).
func TestUnderLockFitsTheCallInTheLease(t *testing.T) {
	for _, tc := range []struct {
		left     time.Duration
		wantCall bool
		maxTime  time.Duration
	}{
		{left: 15 * time.Second, wantCall: true, maxTime: 14 * time.Second},
		{left: 2 * time.Second, wantCall: true, maxTime: time.Second},
		{left: time.Second},
		{left: 0},
	} {
		t.Run(tc.left.String(), func(t *testing.T) {
			called := false
			err := etcdclient.UnderLock(context.Background(), leaseLeft(tc.left), func(ctx context.Context) error {
				called = true
				deadline, ok := ctx.Deadline()
				if !ok || time.Until(deadline) > tc.maxTime || time.Until(deadline) <= 0 {
					t.Errorf("the call has %s to run, want at most %s", time.Until(deadline), tc.maxTime)
				}
				return nil
			})
			if called != tc.wantCall {
				t.Fatalf("called %v with %s of lease left, want %v", called, tc.left, tc.wantCall)
			}
			if tc.wantCall && err != nil {
				t.Errorf("UnderLock: %v", err)
			}
			if !tc.wantCall {
				if !errors.Is(err, etcdclient.ErrLockLost) || etcdclient.Classify(etcdclient.OpRemove, err) != etcdclient.Fatal {
					t.Errorf("with %s left: %v, want ErrLockLost, classified fatal", tc.left, err)
				}
				if !strings.Contains(err.Error(), "keep-alive") {
					t.Errorf("the error does not say why the lease ran low: %v", err)
				}
			}
		})
	}
}

// heldLock starts a one-member cluster and takes its writer lock as
// holder.
func heldLock(t *testing.T, holder string) ([]*etcdtest.Member, etcdclient.Lock) {
	t.Helper()
	members := etcdtest.Start(t, 1)
	a := locker(t)
	a.Holder = holder
	lock, err := a.TryLock(context.Background(), etcdtest.ClientURLs(members), members[0].ClusterID())
	if err != nil {
		t.Fatal(err)
	}
	return members, lock
}

// statusOnly answers Status with a fixed response; LeaderLock calls
// nothing else.
type statusOnly struct {
	etcdclient.Cluster
	resp *pb.StatusResponse
	err  error
}

func (s statusOnly) Status(context.Context, string) (*pb.StatusResponse, error) { return s.resp, s.err }

// The leading member's agent stands in for the writer lock only while an
// alarm keeps the lock from being taken: once the alarm is cleared,
// another agent may take the lock, and the leader's stand-in must end.
func TestTheLeaderStandsInOnlyWhileAnAlarmIsRaised(t *testing.T) {
	alarm := (&pb.AlarmMember{MemberID: 7, Alarm: pb.AlarmType_NOSPACE}).String()
	for _, tc := range []struct {
		name string
		resp *pb.StatusResponse
		err  error
		want string // "" when the lock holds
	}{
		{"leads under an alarm", &pb.StatusResponse{Leader: 1, Errors: []string{alarm}}, nil, ""},
		{"leads, no alarm any more", &pb.StatusResponse{Leader: 1}, nil, "no alarm is raised any more"},
		{"leads, no leader's error only", &pb.StatusResponse{Leader: 1, Errors: []string{"etcdserver: no leader"}}, nil, "no alarm is raised any more"},
		{"another leads", &pb.StatusResponse{Leader: 2, Errors: []string{alarm}}, nil, "no longer leads"},
		{"no answer", nil, errors.New("connection refused"), "confirm the local member leads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock := etcdclient.LeaderLock{Cluster: statusOnly{resp: tc.resp, err: tc.err}, MemberID: 1, Hold: 3 * time.Second}
			left, err := lock.Remaining(context.Background())
			switch {
			case tc.want == "" && (err != nil || left != 3*time.Second):
				t.Errorf("Remaining = %s, %v; want the hold, 3s", left, err)
			case tc.want != "" && (!errors.Is(err, etcdclient.ErrLockLost) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Remaining = %s, %v; want ErrLockLost saying %q", left, err, tc.want)
			}
		})
	}
}
