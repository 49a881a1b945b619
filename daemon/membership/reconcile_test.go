package membership_test

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

// replyLost applies a removal, then loses its reply the first time: the
// fault between commit and reply that a timed-out call leaves in doubt.
type replyLost struct {
	etcdclient.Cluster
	mu      sync.Mutex
	applied int // removals etcd applied
}

func (r *replyLost) MemberRemove(ctx context.Context, endpoint string, id uint64) error {
	err := r.Cluster.MemberRemove(ctx, endpoint, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.applied++
		if r.applied == 1 {
			return context.DeadlineExceeded
		}
	}
	return err
}

// A removal whose reply is lost after it applied is retried, the retry
// finds it done, and the change counts as made once; the writer lock is
// free afterwards.
func TestARemovalWhoseReplyIsLostIsMadeOnce(t *testing.T) {
	members := etcdtest.Start(t, 3)
	pool, err := etcdclient.NewPool(config.TLSFiles{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cluster := &replyLost{Cluster: pool}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	observer := &membership.Observer{Cluster: cluster, Timeout: 2 * time.Second}
	locker := &etcdclient.SessionLocker{Pool: pool, Key: "/etcdlet/test/membership-lock", TTL: 15 * time.Second, CallTimeout: 2 * time.Second}
	defer locker.Close()
	r := &membership.Reconciler{Cluster: cluster, Locker: locker, Observer: observer, Log: quiet,
		Policy: node.DefaultPolicy(2 * time.Second), Section: 11 * time.Second, LearnerTimeout: time.Minute}
	var desired []identity.Member
	for _, m := range members[:2] {
		desired = append(desired, identity.Member{IP: netip.MustParseAddr("127.0.0.1"), Name: m.Name, PeerURL: m.PeerURL, ClientURL: m.ClientURL})
	}
	target := membership.Target{Endpoints: etcdtest.ClientURLs(members), Listed: membership.ClientURLs(desired)}
	// etcd refuses membership changes until every voter has been
	// connected for 5s: step until the plan is done.
	var removal *etcdclient.Result
	deadline := time.Now().Add(time.Minute)
	for removal == nil || removal.Outcome != etcdclient.Done {
		if time.Now().After(deadline) {
			t.Fatalf("member m2 not removed within a minute (last: %+v)", removal)
		}
		res, err := r.Step(context.Background(), desired, observer.Observe(context.Background(), target), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Acted != nil && res.Acted.Kind == membership.ActionRemove {
			removal = &res.Result
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rpctypes.ErrorDesc(removal.Err) != rpctypes.ErrorDesc(rpctypes.ErrGRPCMemberNotFound) {
		t.Errorf("removal ended with %v; want the retry after the lost reply to find it applied (member not found)", removal.Err)
	}
	if cluster.applied != 1 {
		t.Errorf("etcd applied %d removals, want 1", cluster.applied)
	}
	view := observer.Observe(context.Background(), target)
	if len(view.Members) != 2 {
		t.Errorf("members after the removal: %v", view.Members)
	}
	other := &etcdclient.SessionLocker{Pool: pool, Key: "/etcdlet/test/membership-lock", TTL: 15 * time.Second, CallTimeout: 2 * time.Second}
	defer other.Close()
	if _, err := other.TryLock(context.Background(), etcdtest.ClientURLs(members[:2])); err != nil {
		t.Errorf("the writer lock is still held after the step: %v", err)
	}
}
