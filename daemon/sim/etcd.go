package sim

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// etcdAPI is etcdclient.Cluster as one host's agent sees the model: calls
// reach an endpoint's process only when it runs and the hosts are
// connected; answers and errors are etcd's own.
type etcdAPI struct {
	w    *world
	from *host
	mu   *sync.Mutex // the world's lock: the observer calls from goroutines
}

var _ etcdclient.Cluster = (*etcdAPI)(nil)

var errRefused = status.Error(codes.Unavailable, "connection error: dial tcp: connect: connection refused")

// target resolves an endpoint to the process that answers there.
func (a *etcdAPI) target(endpoint string) (*host, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil, err
	}
	h := a.w.hostOf(ip)
	if h == nil || h.proc == nil || !connected(a.from, h) {
		return nil, errRefused
	}
	return h, nil
}

func (a *etcdAPI) header(h *host) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: h.proc.c.id, MemberId: h.proc.memberID}
}

func (a *etcdAPI) members(c *cluster) []*pb.Member {
	var out []*pb.Member
	for _, m := range c.members {
		pm := &pb.Member{ID: m.id, PeerURLs: []string{m.peerURL}, IsLearner: m.learner}
		if m.started {
			pm.Name, pm.ClientURLs = m.name, []string{m.clientURL}
		}
		out = append(out, pm)
	}
	return out
}

func (a *etcdAPI) MemberList(_ context.Context, endpoint string, serializable bool) (*pb.MemberListResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, err := a.target(endpoint)
	if err != nil {
		return nil, err
	}
	if !serializable && !a.w.quorate(h.proc.c, h) {
		return nil, rpctypes.ErrGRPCNoLeader
	}
	return &pb.MemberListResponse{Header: a.header(h), Members: a.members(h.proc.c)}, nil
}

func (a *etcdAPI) Status(_ context.Context, endpoint string) (*pb.StatusResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, err := a.target(endpoint)
	if err != nil {
		return nil, err
	}
	c := h.proc.c
	s := &pb.StatusResponse{Header: a.header(h), Leader: a.w.leaderFor(c, h), RaftIndex: c.index, RaftAppliedIndex: c.index,
		RaftTerm: 1, Version: "3.7.3"}
	if m := c.member(h.proc.memberID); m != nil {
		s.IsLearner = m.learner
	}
	if s.Leader == 0 {
		s.Errors = append(s.Errors, "etcdserver: no leader")
	}
	for _, al := range c.alarms {
		s.Errors = append(s.Errors, (&pb.AlarmMember{MemberID: al.member, Alarm: pb.AlarmType(pb.AlarmType_value[al.kind])}).String())
	}
	return s, nil
}

// change runs a membership change against the cluster behind endpoint,
// with the faults armed for it: failing before it applies, losing the
// reply after it applied, or the agent dying right after.
func (a *etcdAPI) change(endpoint, what string, apply func(h *host, c *cluster) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.w
	h, err := a.target(endpoint)
	if err != nil {
		return err
	}
	c := h.proc.c
	if w.armed.failBefore {
		w.armed.failBefore = false
		w.note("%s: %s fails before it applies (fault)", a.from.name(), what)
		return errRefused
	}
	if !w.quorate(c, h) {
		return rpctypes.ErrGRPCNoLeader
	}
	if m := c.member(h.proc.memberID); m != nil && m.learner {
		return rpctypes.ErrGRPCNotSupportedForLearner
	}
	w.checkCallInto(a.from, c, what)
	if err := apply(h, c); err != nil {
		return err
	}
	c.index++
	w.applied[kindOf(what)]++
	w.note("%s: %s applied in cluster %d", a.from.name(), what, c.inst)
	if w.armed.crashAfter {
		w.armed.crashAfter = false
		panic(crashed{what + " applied"})
	}
	if w.armed.loseReply {
		w.armed.loseReply = false
		w.note("%s: the reply to %s is lost (fault)", a.from.name(), what)
		return context.DeadlineExceeded
	}
	return nil
}

func (a *etcdAPI) MemberAddAsLearner(_ context.Context, endpoint, peerURL string) (*pb.MemberAddResponse, error) {
	var added *member
	err := a.change(endpoint, "add learner "+peerURL, func(h *host, c *cluster) error {
		if c.memberWithPeerURL(peerURL) != nil {
			return rpctypes.ErrGRPCPeerURLExist
		}
		for _, m := range c.members {
			if m.learner {
				return rpctypes.ErrGRPCTooManyLearners
			}
		}
		if a.w.strict && !a.w.allVotersConnected(c, h) {
			return rpctypes.ErrGRPCUnhealthy
		}
		// Named, with a client URL, once its process starts and publishes.
		added = &member{id: hashID(peerURL, a.w.token, fmt.Sprint(c.index)), peerURL: peerURL, learner: true}
		c.members = append(c.members, added)
		a.w.noteChange(a.from, c, hostOfURL(peerURL), true)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.MemberAddResponse{Member: &pb.Member{ID: added.id, PeerURLs: []string{added.peerURL}, IsLearner: true}}, nil
}

func (a *etcdAPI) MemberPromote(_ context.Context, endpoint string, id uint64) error {
	return a.change(endpoint, fmt.Sprintf("promote %x", id), func(h *host, c *cluster) error {
		m := c.member(id)
		switch {
		case m == nil:
			return rpctypes.ErrGRPCMemberNotFound
		case !m.learner:
			return rpctypes.ErrGRPCMemberNotLearner
		case !a.w.inSync(c, m, h):
			return rpctypes.ErrGRPCLearnerNotReady
		}
		m.learner = false
		return nil
	})
}

func (a *etcdAPI) MemberRemove(_ context.Context, endpoint string, id uint64) error {
	return a.change(endpoint, fmt.Sprintf("remove %x", id), func(h *host, c *cluster) error {
		m := c.member(id)
		if m == nil {
			return rpctypes.ErrGRPCMemberNotFound
		}
		if a.w.strict && !m.learner && !a.w.quorumAfterRemoval(c, h, id) {
			return rpctypes.ErrGRPCUnhealthy
		}
		a.w.noteChange(a.from, c, hostOfURL(m.peerURL), false)
		c.members = deleteMember(c.members, id)
		if c.leader == id {
			c.leader = 0
		}
		if victim := a.w.runningIn(c, id); victim != nil && connected(victim, h) {
			victim.stop(true, "its member was removed")
		}
		return nil
	})
}

func (a *etcdAPI) MoveLeader(_ context.Context, endpoint string, to uint64) error {
	return a.change(endpoint, fmt.Sprintf("move leader to %x", to), func(h *host, c *cluster) error {
		if a.w.leaderFor(c, h) != h.proc.memberID {
			return rpctypes.ErrGRPCNotLeader
		}
		m := c.member(to)
		if t := a.w.runningIn(c, to); m == nil || m.learner || t == nil || !connected(t, h) {
			return rpctypes.ErrGRPCBadLeaderTransferee
		}
		c.leader = to
		return nil
	})
}

func (a *etcdAPI) AlarmDisarm(_ context.Context, endpoint string, id uint64, kind pb.AlarmType) error {
	return a.change(endpoint, fmt.Sprintf("disarm %s %x", kind, id), func(_ *host, c *cluster) error {
		var kept []alarm
		for _, al := range c.alarms {
			if al.member != id || al.kind != kind.String() {
				kept = append(kept, al)
			}
		}
		c.alarms = kept
		return nil
	})
}

func (a *etcdAPI) Retain([]string) {}

// allVotersConnected is etcd's rule for adding a member: every voter runs
// and reaches the leader.
func (w *world) allVotersConnected(c *cluster, from *host) bool {
	for _, m := range c.voters() {
		if h := w.runningIn(c, m.id); h == nil || !connected(h, from) {
			return false
		}
	}
	return true
}

// quorumAfterRemoval is etcd's rule for removing a voter: the voters that
// are left and connected still make a quorum of the new membership.
func (w *world) quorumAfterRemoval(c *cluster, from *host, id uint64) bool {
	left, up := 0, 0
	for _, m := range c.voters() {
		if m.id == id {
			continue
		}
		left++
		if h := w.runningIn(c, m.id); h != nil && connected(h, from) {
			up++
		}
	}
	return left > 0 && up >= left/2+1
}

// inSync: a learner whose process has run, connected to the leader, for a
// little while has caught up.
func (w *world) inSync(c *cluster, m *member, leader *host) bool {
	h := w.runningIn(c, m.id)
	return h != nil && connected(h, leader) && w.now.Sub(h.proc.startedAt) >= 200*timeUnit
}

func deleteMember(ms []*member, id uint64) []*member {
	var out []*member
	for _, m := range ms {
		if m.id != id {
			out = append(out, m)
		}
	}
	return out
}

// timeUnit is the model's grain of time.
const timeUnit = time.Millisecond

func hostOfURL(raw string) netip.Addr {
	u, err := url.Parse(raw)
	if err != nil {
		return netip.Addr{}
	}
	ip, _ := netip.ParseAddr(u.Hostname())
	return ip
}

// kindOf is a change's description without its operand.
func kindOf(what string) string {
	words := strings.Fields(what)
	return strings.Join(words[:len(words)-1], " ")
}
