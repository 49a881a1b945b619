package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

const callTimeout = 2 * time.Second

var _ ops.Etcd = (*etcdclient.Pool)(nil)

// spyEtcd is the real pool with a record of the calls that change a
// member (Defragment, MoveLeader, Compact), a way to make Status of
// chosen endpoints fail, and a hook that runs before a Defragment is
// forwarded (it may refuse it).
type spyEtcd struct {
	*etcdclient.Pool

	mu         sync.Mutex
	defrags    []defragCall
	moves      []string
	compacts   []int64
	failStatus map[string]bool
	// beforeDefrag runs before a Defragment is forwarded, with the number
	// already forwarded; an error is returned instead of forwarding.
	beforeDefrag func(forwarded int, endpoint string) error
}

// defragCall is one forwarded Defragment and what the member said of
// itself just before it.
type defragCall struct {
	Endpoint string
	// WasLeader: the member called itself the leader when its
	// defragmentation started.
	WasLeader bool
}

func newSpy(t testing.TB) *spyEtcd {
	t.Helper()
	pool, err := etcdclient.NewPool(config.TLSFiles{}, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &spyEtcd{Pool: pool, failStatus: map[string]bool{}}
}

func (s *spyEtcd) Status(ctx context.Context, endpoint string) (*pb.StatusResponse, error) {
	s.mu.Lock()
	fail := s.failStatus[endpoint]
	s.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("status of %s: made to fail by the test", endpoint)
	}
	return s.Pool.Status(ctx, endpoint)
}

func (s *spyEtcd) setFailStatus(endpoints ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failStatus = map[string]bool{}
	for _, ep := range endpoints {
		s.failStatus[ep] = true
	}
}

func (s *spyEtcd) Defragment(ctx context.Context, endpoint string) error {
	s.mu.Lock()
	hook, n := s.beforeDefrag, len(s.defrags)
	s.mu.Unlock()
	if hook != nil {
		if err := hook(n, endpoint); err != nil {
			return err
		}
	}
	st, err := s.Pool.Status(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("spy: status of %s before its defragmentation: %w", endpoint, err)
	}
	s.mu.Lock()
	s.defrags = append(s.defrags, defragCall{Endpoint: endpoint, WasLeader: st.Leader == st.GetHeader().GetMemberId()})
	s.mu.Unlock()
	return s.Pool.Defragment(ctx, endpoint)
}

func (s *spyEtcd) MoveLeader(ctx context.Context, endpoint string, transferee uint64) error {
	s.mu.Lock()
	s.moves = append(s.moves, endpoint)
	s.mu.Unlock()
	return s.Pool.MoveLeader(ctx, endpoint, transferee)
}

func (s *spyEtcd) Compact(ctx context.Context, endpoint string, rev int64) error {
	s.mu.Lock()
	s.compacts = append(s.compacts, rev)
	s.mu.Unlock()
	return s.Pool.Compact(ctx, endpoint, rev)
}

func (s *spyEtcd) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defrags, s.moves, s.compacts, s.beforeDefrag = nil, nil, nil, nil
	s.failStatus = map[string]bool{}
}

func (s *spyEtcd) calls() (defrags []defragCall, moves []string, compacts []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]defragCall(nil), s.defrags...), append([]string(nil), s.moves...), append([]int64(nil), s.compacts...)
}

func surveyor(e ops.Etcd, endpoints []string) ops.Surveyor {
	return ops.Surveyor{Etcd: e, Endpoints: func() []string { return endpoints }, CallTimeout: callTimeout}
}

// recorder is a task.Env that keeps what the handler checkpointed (as
// the runner stores it: JSON) and reported.
type recorder struct {
	mu          sync.Mutex
	checkpoints []json.RawMessage
	reports     []string
	// afterCheckpoint runs after a checkpoint is stored.
	afterCheckpoint func()
}

func (r *recorder) env(progress json.RawMessage) task.Env {
	return task.Env{
		Progress: progress,
		Checkpoint: func(v any) error {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			r.mu.Lock()
			r.checkpoints = append(r.checkpoints, b)
			after := r.afterCheckpoint
			r.mu.Unlock()
			if after != nil {
				after()
			}
			return nil
		},
		Report: func(d string) {
			r.mu.Lock()
			r.reports = append(r.reports, d)
			r.mu.Unlock()
		},
	}
}

func (r *recorder) lastCheckpoint() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.checkpoints) == 0 {
		return nil
	}
	return r.checkpoints[len(r.checkpoints)-1]
}

// leaderOf is the leader as the members' servers know it (not through
// the code under test); it waits until they agree on one.
func leaderOf(t testing.TB, members []*etcdtest.Member) uint64 {
	t.Helper()
	var lead uint64
	eventually.Nil(t, 10*time.Second, "the members agree on a leader", func() error {
		lead = 0
		for _, m := range members {
			l := uint64(m.Etcd.Server.Leader())
			if l == 0 || (lead != 0 && l != lead) {
				return fmt.Errorf("%s sees leader %x, another %x", m.Name, l, lead)
			}
			lead = l
		}
		return nil
	})
	return lead
}

func client(t testing.TB, e *spyEtcd, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := e.NewMulti(endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// fragment writes keys of valueSize bytes under prefix (after deleting
// what an earlier call left there), deletes them all but every
// keepEvery-th (keepEvery 0: all of them), compacts physically, and waits
// until every member's backend shows the space free: the state in which a
// defragmentation gives space back.
func fragment(t testing.TB, cli *clientv3.Client, e ops.Etcd, endpoints []string, prefix string, keys, valueSize, keepEvery int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// what an earlier call kept is freed first, so that the backend does
	// not grow by it
	if del, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	} else if del.Deleted > 0 {
		if _, err := cli.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
	}
	value := strings.Repeat("x", valueSize)
	perTxn := max(1, min(100, (1<<20)/valueSize))
	var batch []clientv3.Op
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := cli.Txn(ctx).Then(batch...).Commit(); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	key := func(i int) string { return fmt.Sprintf("%s%08d", prefix, i) }
	for i := range keys {
		batch = append(batch, clientv3.OpPut(key(i), value))
		if len(batch) == perTxn {
			flush()
		}
	}
	flush()
	if keepEvery == 0 {
		if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
	} else {
		for i := range keys {
			if i%keepEvery != 0 {
				batch = append(batch, clientv3.OpDelete(key(i)))
			}
			if len(batch) == 100 {
				flush()
			}
		}
		flush()
	}
	resp, err := cli.Get(ctx, "/no-such-key")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	deleted := keys
	if keepEvery > 0 {
		deleted -= (keys + keepEvery - 1) / keepEvery
	}
	wantFree := int64(deleted) * int64(valueSize) / 2
	eventually.Nil(t, 30*time.Second, "every member shows the deleted keys' space free", func() error {
		for _, ep := range endpoints {
			st, err := e.Status(ctx, ep)
			if err != nil {
				return err
			}
			if free := st.DbSize - st.DbSizeInUse; free < wantFree {
				// bolt counts the pages a transaction freed as free only
				// from a later write transaction on: give it one
				if _, err := cli.Put(ctx, "/fragment-nudge", ""); err != nil {
					return err
				}
				return fmt.Errorf("%s: %d bytes free of %d, want %d", ep, free, st.DbSize, wantFree)
			}
		}
		return nil
	})
}

// Where a snapshot (and the compaction) is taken from on a real cluster:
// a follower, so the leader never stalls on a snapshot stream; the leader
// when it is the only member; an error when no voter answers its status.
func TestSnapshotSourceOnARealCluster(t *testing.T) {
	three := etcdtest.Start(t, 3)
	one := etcdtest.Start(t, 1)
	tests := []struct {
		name    string
		members []*etcdtest.Member
		// failStatus: the endpoints whose Status fails.
		failStatus func(members []*etcdtest.Member, lead uint64) []string
		// want: "follower", "leader" or "error"
		want string
	}{
		{name: "three members: a follower", members: three, want: "follower"},
		{name: "three members, no follower answers its status: the leader", members: three, want: "leader",
			failStatus: func(members []*etcdtest.Member, lead uint64) []string {
				var urls []string
				for _, m := range members {
					if m.ID() != lead {
						urls = append(urls, m.ClientURL)
					}
				}
				return urls
			}},
		{name: "one member: the leader", members: one, want: "leader"},
		{name: "no member answers its status: an error", members: three, want: "error",
			failStatus: func(members []*etcdtest.Member, _ uint64) []string { return etcdtest.ClientURLs(members) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spy := newSpy(t)
			urls := etcdtest.ClientURLs(tt.members)
			// when (several times: a rule, not a lucky pick)
			for range 5 {
				lead := leaderOf(t, tt.members)
				if tt.failStatus != nil {
					spy.setFailStatus(tt.failStatus(tt.members, lead)...)
				}
				sv, err := surveyor(spy, urls).Survey(context.Background())
				if err != nil {
					t.Fatalf("survey: %v", err)
				}
				src, err := sv.SnapshotSource()
				// then
				switch tt.want {
				case "error":
					if err == nil {
						t.Fatalf("no member answered its status, yet %s was picked", src)
					}
					return
				case "leader":
					if err != nil || src.ID != lead {
						t.Fatalf("picked %v (%v), want the leader %x", src, err, lead)
					}
				case "follower":
					if err != nil {
						t.Fatal(err)
					}
					if src.ID == lead {
						t.Fatalf("picked the leader %s as the snapshot source", src)
					}
					if src.Status == nil || src.ClientURL == "" {
						t.Fatalf("picked %s, which did not answer", src)
					}
				}
			}
		})
	}
}

// Which member SnapshotSource picks, by the rule: the voting follower
// with the highest applied index; learners never; the leader only when no
// follower answers; an error when no voter answers.
func TestSnapshotSourcePicksTheLeastLaggingVotingFollower(t *testing.T) {
	const leader = 1
	m := func(id uint64, applied uint64, opts ...func(*ops.Member)) ops.Member {
		mem := ops.Member{ID: id, Name: fmt.Sprintf("m%d", id), ClientURL: fmt.Sprintf("http://127.0.0.1:%d", 2379+id),
			Status: &pb.StatusResponse{RaftAppliedIndex: applied, Leader: leader}}
		for _, o := range opts {
			o(&mem)
		}
		return mem
	}
	learner := func(m *ops.Member) { m.Learner = true }
	down := func(m *ops.Member) { m.Status, m.StatusErr = nil, errors.New("connection refused") }
	tests := []struct {
		name    string
		members []ops.Member
		leader  uint64
		want    uint64 // 0: an error
	}{
		{name: "the follower with the highest applied index", leader: leader,
			members: []ops.Member{m(1, 100), m(2, 90), m(3, 95)}, want: 3},
		{name: "the leader's applied index does not count", leader: leader,
			members: []ops.Member{m(1, 1000), m(2, 90), m(3, 80)}, want: 2},
		{name: "a learner ahead of every follower is not picked", leader: leader,
			members: []ops.Member{m(1, 100), m(2, 90), m(3, 95), m(4, 200, learner)}, want: 3},
		{name: "a follower that does not answer is not picked", leader: leader,
			members: []ops.Member{m(1, 100), m(2, 90), m(3, 0, down)}, want: 2},
		{name: "the leader when no follower answers", leader: leader,
			members: []ops.Member{m(1, 100), m(2, 0, down), m(3, 0, down)}, want: 1},
		{name: "the leader rather than a learner", leader: leader,
			members: []ops.Member{m(1, 100), m(4, 200, learner)}, want: 1},
		{name: "a single member: the leader", leader: leader,
			members: []ops.Member{m(1, 100)}, want: 1},
		{name: "leader unknown: the voter with the highest applied index", leader: 0,
			members: []ops.Member{m(1, 100), m(2, 120), m(3, 110)}, want: 2},
		{name: "no voter answers: an error", leader: leader,
			members: []ops.Member{m(1, 0, down), m(2, 0, down), m(4, 200, learner)}},
		{name: "no members: an error", leader: leader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ops.Survey{Members: tt.members, Leader: tt.leader}.SnapshotSource()
			switch {
			case tt.want == 0 && err == nil:
				t.Fatalf("picked %s, want an error", got)
			case tt.want != 0 && err != nil:
				t.Fatalf("error %v, want m%d", err, tt.want)
			case got.ID != tt.want:
				t.Fatalf("picked %s, want m%d", got, tt.want)
			}
		})
	}
}

// reconnecting is the pool while this agent's connections come back from
// their reconnect backoff: the first MemberList calls fail at once with
// the last dial error, as gRPC answers meanwhile.
type reconnecting struct {
	ops.Etcd
	mu    sync.Mutex
	fails int
}

func (r *reconnecting) MemberList(ctx context.Context, endpoint string, serializable bool) (*pb.MemberListResponse, error) {
	r.mu.Lock()
	fail := r.fails > 0
	r.fails--
	r.mu.Unlock()
	if fail {
		return nil, errors.New("rpc error: code = Unavailable desc = connection error: transport: authentication handshake failed: context deadline exceeded")
	}
	return r.Etcd.MemberList(ctx, endpoint, serializable)
}

// A task asked for the moment a cluster formed again is admitted once the
// connections are back, not rejected for the lack of quorum they show
// for a moment; a survey outside admission says what it sees.
func TestAdmitSurveyWaitsOutAReconnect(t *testing.T) {
	one := etcdtest.Start(t, 1)
	pool, err := etcdclient.NewPool(config.TLSFiles{}, callTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sv := surveyor(&reconnecting{Etcd: pool, fails: 3}, etcdtest.ClientURLs(one))
	if _, err := sv.Survey(t.Context()); !errors.Is(err, ops.ErrNoQuorum) {
		t.Fatalf("Survey during the reconnect = %v, want ErrNoQuorum", err)
	}
	got, err := sv.AdmitSurvey(t.Context())
	if err != nil || got.ClusterID != one[0].ClusterID() {
		t.Fatalf("AdmitSurvey = cluster %x, %v; want cluster %x once the connections are back", got.ClusterID, err, one[0].ClusterID())
	}
}
