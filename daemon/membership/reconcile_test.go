package membership_test

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
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
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
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

// testReconciler is a Reconciler with the agents' policy and a quiet log
// on a pool of its own, and that pool and the reconciler's session
// locker; both close with the test.
func testReconciler(t *testing.T) (*membership.Reconciler, *etcdclient.Pool, *etcdclient.SessionLocker) {
	t.Helper()
	pool, err := etcdclient.NewPool(config.TLSFiles{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	locker := &etcdclient.SessionLocker{Pool: pool, TTL: 15 * time.Second, CallTimeout: 2 * time.Second}
	t.Cleanup(locker.Close)
	r := &membership.Reconciler{Cluster: pool, Locker: locker, Observer: &membership.Observer{Cluster: pool, Timeout: 2 * time.Second},
		Log: slog.New(slog.DiscardHandler), Policy: node.DefaultPolicy(2 * time.Second), Section: 11 * time.Second, LearnerTimeout: time.Minute}
	return r, pool, locker
}

// A removal whose reply is lost after it applied is retried, the retry
// finds it done, and the change counts as made once; the writer lock is
// free afterwards.
func TestARemovalWhoseReplyIsLostIsMadeOnce(t *testing.T) {
	members := etcdtest.Start(t, 3)
	r, pool, locker := testReconciler(t)
	cluster := &replyLost{Cluster: pool}
	r.Cluster, r.Observer.Cluster = cluster, cluster
	observer := r.Observer
	var desired []identity.Member
	for _, m := range members[:2] {
		desired = append(desired, identity.Member{IP: netip.MustParseAddr("127.0.0.1"), Name: m.Name, PeerURL: m.PeerURL, ClientURL: m.ClientURL})
	}
	target := membership.Target{Endpoints: etcdtest.ClientURLs(members), Listed: membership.ClientURLs(desired)}
	lists := postList(t, locker, etcdtest.ClientURLs(members), members[0].ClusterID(), desired)
	// etcd refuses membership changes until every voter has been
	// connected for 5s: step until the plan is done.
	// Step until the removal is done, or until a step finds nothing left
	// to remove: some runs (2 of 4 full suites) spent the whole step on
	// retries that timed out after the lost reply, and the next step
	// found m2 gone. Either way the change must be made once.
	var removal *etcdclient.Result
	deadline := time.Now().Add(time.Minute)
	for removal == nil || (removal.Outcome != etcdclient.Done && len(observer.Observe(context.Background(), target).Members) == 3) {
		if time.Now().After(deadline) {
			t.Fatalf("member m2 not removed within a minute (last: %+v)", removal)
		}
		res, err := r.Step(context.Background(), desired, observer.Observe(context.Background(), target), nil, 0, lists)
		if err != nil {
			t.Fatal(err)
		}
		if res.Acted != nil && res.Acted.Kind == membership.ActionRemove {
			removal = &res.Result
		}
		time.Sleep(200 * time.Millisecond)
	}
	if removal.Outcome == etcdclient.Done && rpctypes.ErrorDesc(removal.Err) != rpctypes.ErrorDesc(rpctypes.ErrGRPCMemberNotFound) {
		t.Errorf("removal ended with %v; want the retry after the lost reply to find it applied (member not found)", removal.Err)
	}
	if cluster.applied != 1 {
		t.Errorf("etcd applied %d removals, want 1", cluster.applied)
	}
	view := observer.Observe(context.Background(), target)
	if len(view.Members) != 2 {
		t.Errorf("members after the removal: %v", view.Members)
	}
	other := &etcdclient.SessionLocker{Pool: pool, TTL: 15 * time.Second, CallTimeout: 2 * time.Second}
	defer other.Close()
	if _, err := other.TryLock(context.Background(), etcdtest.ClientURLs(members[:2]), members[0].ClusterID()); err != nil {
		t.Errorf("the writer lock is still held after the step: %v", err)
	}
}

// The writer promotes the learner it added under the same lock, as soon
// as etcd finds it in sync: here its member starts when the writer
// announces the add, as the woken agent of its node does.
func TestALearnerIsPromotedByTheWriterThatAddedIt(t *testing.T) {
	members := etcdtest.Start(t, 1)
	spec := etcdtest.SingleSpec(t)
	spec.Name, spec.InitialClusterState = "m1", runtime.StateExisting
	spec.InitialCluster = members[0].Name + "=" + members[0].PeerURL + "," + spec.Name + "=" + spec.AdvertisePeerURL
	r, _, locker := testReconciler(t)
	observer := r.Observer
	var mu sync.Mutex
	var changes []string
	started := make(chan error, 1)
	r.OnChange = func(a membership.Action, res etcdclient.Result) {
		mu.Lock()
		changes = append(changes, string(a.Kind)+" "+string(res.Outcome))
		mu.Unlock()
		if a.Kind == membership.ActionAddLearner && res.Outcome == etcdclient.Done {
			go func() {
				e, err := embedded.Start(spec, r.Log)
				if err == nil {
					t.Cleanup(e.Close)
				}
				started <- err
			}()
		}
	}
	desired := []identity.Member{
		{IP: netip.MustParseAddr("127.0.0.1"), Name: members[0].Name, PeerURL: members[0].PeerURL, ClientURL: members[0].ClientURL},
		{IP: netip.MustParseAddr("127.0.0.1"), Name: spec.Name, PeerURL: spec.AdvertisePeerURL, ClientURL: spec.AdvertiseClientURL},
	}
	target := membership.Target{Endpoints: membership.ClientURLs(desired), Listed: membership.ClientURLs(desired)}
	lists := postList(t, locker, etcdtest.ClientURLs(members), members[0].ClusterID(), desired)
	res, err := r.Step(context.Background(), desired, observer.Observe(context.Background(), target), nil, 0, lists)
	if err != nil || res.Acted == nil || res.Acted.Kind != membership.ActionAddLearner || res.Result.Outcome != etcdclient.Done {
		t.Fatalf("first step: %+v, %v; want the learner added", res, err)
	}
	if err := <-started; err != nil {
		t.Fatalf("start the learner: %v", err)
	}
	// The promotion in the same step is best-effort: it gives the learner
	// a short while to catch up (enough on an idle machine). A learner
	// slower than that, on a loaded one, is promoted by the next passes;
	// either way it is this writer that promotes it, and nothing else
	// happens meanwhile.
	deadline := time.Now().Add(30 * time.Second)
	for !promoted(&mu, &changes) {
		if time.Now().After(deadline) {
			t.Fatalf("the learner was not promoted within 30s of passes")
		}
		if _, err := r.Step(context.Background(), desired, observer.Observe(context.Background(), target), nil, 0, lists); err != nil {
			t.Fatalf("next step: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The add, then the promotion (after attempts that found the learner
	// not in sync yet, on a loaded machine), and nothing else.
	ok := len(changes) >= 2 && changes[0] == "add-learner done" && changes[len(changes)-1] == "promote done"
	for _, c := range changes[1 : len(changes)-1] {
		ok = ok && strings.HasPrefix(c, "promote ")
	}
	if !ok {
		t.Fatalf("changes: %v, want [add-learner done, promote done] with only promotion attempts between", changes)
	}
	view := observer.Observe(context.Background(), target)
	for _, m := range view.Members {
		if m.PeerURLs[0] == spec.AdvertisePeerURL && m.IsLearner {
			t.Fatalf("member %s is still a learner after the step", spec.Name)
		}
	}
}

func promoted(mu *sync.Mutex, changes *[]string) bool {
	mu.Lock()
	defer mu.Unlock()
	return slices.Contains(*changes, "promote done")
}

// postList posts the desired list as this test's agent (node 127.0.0.1)
// does before it acts, held for longer than any hold-down.
func postList(t *testing.T, board etcdclient.Board, endpoints []string, clusterID uint64, desired []identity.Member) membership.ListState {
	t.Helper()
	addrs := make([]netip.Addr, len(desired))
	for i, d := range desired {
		addrs[i] = d.IP
	}
	own := membership.PostedList{Node: "127.0.0.1", List: membership.SortedList(addrs), ReadAt: time.Now()}
	if err := membership.Post(context.Background(), board, endpoints, clusterID, &own); err != nil {
		t.Fatal(err)
	}
	return membership.ListState{Own: own, InForce: time.Now().Add(-time.Hour), HoldDown: time.Second}
}

// countingLocker counts the writer lock's takes.
type countingLocker struct {
	etcdclient.Locker
	mu    sync.Mutex
	takes int
}

func (l *countingLocker) TryLock(ctx context.Context, endpoints []string, clusterID uint64) (etcdclient.Lock, error) {
	l.mu.Lock()
	l.takes++
	l.mu.Unlock()
	return l.Locker.TryLock(ctx, endpoints, clusterID)
}

func (l *countingLocker) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takes
}

// A learner whose promotion etcd refused as not in sync, and which runs
// (its peer port listens) without serving its client port yet, copies
// the leader's snapshot of the keyspace: another node's writer waits for
// it without taking the lock, while the learner's own agent keeps trying
// the promotion. Here the learner's peer port is a bare listener, so etcd
// refuses for real.
func TestALearnerStillCopyingTheKeyspaceIsWaitedForWithoutTheLock(t *testing.T) {
	members := etcdtest.Start(t, 1)
	peer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	go func() {
		for {
			c, err := peer.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, as a learner receiving a snapshot does
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientURL := "http://" + closed.Addr().String()
	closed.Close() // nothing serves the learner's client port
	r, _, session := testReconciler(t)
	observer := r.Observer
	locker := &countingLocker{Locker: session}
	r.Locker = locker
	desired := []identity.Member{
		{IP: netip.MustParseAddr("127.0.0.1"), Name: members[0].Name, PeerURL: members[0].PeerURL, ClientURL: members[0].ClientURL},
		{IP: netip.MustParseAddr("127.0.0.1"), Name: "copying", PeerURL: "http://" + peer.Addr().String(), ClientURL: clientURL},
	}
	target := membership.Target{Endpoints: membership.ClientURLs(desired), Listed: membership.ClientURLs(desired)}
	lists := postList(t, session, etcdtest.ClientURLs(members), members[0].ClusterID(), desired)
	local := uint64(0) // the writer is not the learner's agent
	step := func() membership.StepResult {
		t.Helper()
		res, err := r.Step(context.Background(), desired, observer.Observe(context.Background(), target), nil, local, lists)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// The add, and the promotion tried under the same lock: refused.
	if res := step(); res.Acted == nil || res.Acted.Kind != membership.ActionAddLearner || res.Result.Outcome != etcdclient.Done {
		t.Fatalf("first step: %+v; want the learner added", res)
	}
	// Until the writer has seen etcd refuse, it tries (a small keyspace
	// is in sync within milliseconds, before its client port serves).
	for i := 0; ; i++ {
		res := step()
		if waits(res.Plan, membership.WaitLearnerCatchingUp) {
			break
		}
		if i == 3 || res.Acted == nil || res.Acted.Kind != membership.ActionPromote || !etcdclient.LearnerNotReady(res.Result.Err) {
			t.Fatalf("step %d: %+v, plan %s; want a promotion that etcd refuses as not in sync, then a wait", i, res, res.Plan)
		}
	}
	takes := locker.count()
	for range 3 {
		if res := step(); res.Acted != nil || !waits(res.Plan, membership.WaitLearnerCatchingUp) {
			t.Fatalf("step while the learner copies the keyspace: %+v, plan %s; want a LearnerCatchingUp wait", res, res.Plan)
		}
	}
	if got := locker.count(); got != takes {
		t.Errorf("the writer took the lock %d times while waiting for the learner to catch up; want none", got-takes)
	}

	// The learner's own agent keeps trying, under the lock, so that the
	// learner is a voter the moment etcd allows.
	view := observer.Observe(context.Background(), target)
	m, ok := view.WithPeerURL(desired[1].PeerURL)
	if !ok {
		t.Fatalf("the learner is not in the view: %+v", view.Members)
	}
	local = m.ID
	for range 2 {
		if res := step(); res.Acted == nil || res.Acted.Kind != membership.ActionPromote || !etcdclient.LearnerNotReady(res.Result.Err) {
			t.Fatalf("step of the learner's own agent: %+v, plan %s; want a promotion that etcd refuses as not in sync", res, res.Plan)
		}
	}
}

func waits(p membership.Plan, reason membership.WaitReason) bool {
	return slices.ContainsFunc(p.Waiting, func(w membership.Wait) bool { return w.Reason == reason })
}
