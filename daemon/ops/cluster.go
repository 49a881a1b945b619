// Package ops holds the handlers of etcdlet's ops tasks (daemon/task):
// snapshots in etcd-backup-restore's format, rolling defragmentation and
// compaction. Each handler reads the cluster afresh on every step, so a
// step that a restarted agent repeats decides from what is true now.
package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/membership"
)

// Etcd is the part of the etcd client pool the handlers use, each call
// addressed to one member's client URL (*etcdclient.Pool).
type Etcd interface {
	MemberList(ctx context.Context, endpoint string, serializable bool) (*pb.MemberListResponse, error)
	Status(ctx context.Context, endpoint string) (*pb.StatusResponse, error)
	MoveLeader(ctx context.Context, endpoint string, transferee uint64) error
	AlarmDisarm(ctx context.Context, endpoint string, member uint64, alarm pb.AlarmType) error
	AlarmList(ctx context.Context, endpoint string) ([]*pb.AlarmMember, error)
	Defragment(ctx context.Context, endpoint string) error
	Compact(ctx context.Context, endpoint string, rev int64) error
	// NewMulti returns a client of its own over the endpoints; the caller
	// closes it.
	NewMulti(endpoints []string) (*clientv3.Client, error)
}

// Member is a member and what its Status said (Status nil: it did not
// answer).
type Member struct {
	ID        uint64
	Name      string
	ClientURL string
	Learner   bool
	Status    *pb.StatusResponse
	StatusErr error
}

func (m Member) String() string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%x", m.ID)
}

// Survey is the cluster as the handlers see it at one moment.
type Survey struct {
	ClusterID uint64
	Members   []Member
	Leader    uint64
}

// Voters are the members that are not learners.
func (s Survey) Voters() []Member {
	var v []Member
	for _, m := range s.Members {
		if !m.Learner {
			v = append(v, m)
		}
	}
	return v
}

// Observation is the survey as the membership rule book reads it: each
// member's health judged as the agents judge it. An alarm does not make a
// member unhealthy there, which matters here: a NOSPACE alarm is what a
// compaction and a defragmentation are there to clear.
func (s Survey) Observation() membership.Observation {
	members := make([]membership.Surveyed, len(s.Members))
	for i, m := range s.Members {
		members[i] = membership.Surveyed{Member: membership.Member{ID: m.ID, Name: m.Name, IsLearner: m.Learner},
			Status: m.Status, Err: m.StatusErr}
		if m.ClientURL != "" {
			members[i].ClientURLs = []string{m.ClientURL}
		}
	}
	return membership.ObservationOf(s.ClusterID, members)
}

// Member returns a member by ID.
func (s Survey) Member(id uint64) (Member, bool) {
	i := slices.IndexFunc(s.Members, func(m Member) bool { return m.ID == id })
	if i < 0 {
		return Member{}, false
	}
	return s.Members[i], true
}

// Surveyor reads the cluster through the endpoints of the list in force.
type Surveyor struct {
	Etcd Etcd
	// Endpoints are the client URLs to ask for the member list (the
	// listed members'); the members' own URLs are used after that.
	Endpoints   func() []string
	CallTimeout time.Duration
	Log         *slog.Logger
}

// ErrNoQuorum says no endpoint gave a linearizable member list.
var ErrNoQuorum = errors.New("no listed member gave a linearizable member list (no quorum, or none reachable)")

// admitSettle is how long AdmitSurvey asks again before it takes the
// lack of quorum for a refusal: longer than the pool's reconnect backoff
// (2 s at most) and an election.
const admitSettle = 5 * time.Second

// AdmitSurvey is Survey for a task's admission: a cluster that has just
// formed again (its members restarted) answers before every connection
// of this agent is back from its reconnect backoff, which fails at once
// with the last dial error meanwhile; a task asked for then (a schedule,
// etcd-druid's first request) must not be rejected for that. Only a lack
// of quorum that holds for admitSettle is returned.
func (s Surveyor) AdmitSurvey(ctx context.Context) (Survey, error) {
	deadline := time.Now().Add(admitSettle)
	for {
		sv, err := s.Survey(ctx)
		if err == nil || !errors.Is(err, ErrNoQuorum) || !time.Now().Before(deadline) {
			return sv, err
		}
		select {
		case <-ctx.Done():
			return sv, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Survey lists the members (linearizably, so the answer has quorum behind
// it) and asks each its status.
func (s Surveyor) Survey(ctx context.Context) (Survey, error) {
	var list *pb.MemberListResponse
	var errs []error
	for _, ep := range s.Endpoints() {
		cctx, cancel := context.WithTimeout(ctx, s.CallTimeout)
		resp, err := s.Etcd.MemberList(cctx, ep, false)
		cancel()
		if err == nil {
			list = resp
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	if list == nil {
		return Survey{}, fmt.Errorf("%w: %w", ErrNoQuorum, errors.Join(errs...))
	}
	sv := Survey{ClusterID: list.Header.ClusterId}
	var term uint64
	for _, m := range list.Members {
		member := Member{ID: m.ID, Name: m.Name, Learner: m.IsLearner}
		if len(m.ClientURLs) > 0 {
			member.ClientURL = m.ClientURLs[0]
			cctx, cancel := context.WithTimeout(ctx, s.CallTimeout)
			member.Status, member.StatusErr = s.Etcd.Status(cctx, member.ClientURL)
			cancel()
		} else {
			member.StatusErr = errors.New("the member has not started yet (no client URL)")
		}
		// The leader is the one named by the member in the newest term: a
		// member that has not heard of an election yet names the old one.
		if st := member.Status; st != nil && st.Leader != 0 && st.RaftTerm >= term {
			sv.Leader, term = st.Leader, st.RaftTerm
		}
		sv.Members = append(sv.Members, member)
	}
	return sv, nil
}

// SnapshotSource picks the member a snapshot is streamed from: the voting
// follower with the highest applied index (the least lag), so that the
// leader never stalls on a snapshot stream; the leader only when no
// follower answers (a single-member cluster).
func (sv Survey) SnapshotSource() (Member, error) {
	var best *Member
	var leader *Member
	for i, m := range sv.Members {
		if m.Learner || m.Status == nil {
			continue
		}
		if m.ID == sv.Leader {
			leader = &sv.Members[i]
			continue
		}
		if best == nil || m.Status.RaftAppliedIndex > best.Status.RaftAppliedIndex {
			best = &sv.Members[i]
		}
	}
	switch {
	case best != nil:
		return *best, nil
	case leader != nil:
		return *leader, nil
	}
	return Member{}, errors.New("no voting member answers its status")
}
