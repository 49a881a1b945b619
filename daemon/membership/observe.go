package membership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

// View is what one observation pass learned about the cluster.
type View struct {
	Observation
	// Reached is true when some endpoint of the pinned cluster (any
	// cluster, for an agent not pinned yet) answered a linearizable
	// MemberList: the members are current and the cluster has quorum.
	// Without it, Members are a serializable answer's, without health.
	Reached bool
	// Established is true when a cluster with started members exists,
	// even if it has no quorum right now (learned from a serializable
	// MemberList). A node never bootstraps while this is true.
	Established bool
	// Problems lists why endpoints did not answer, for logs and status.
	Problems []string
}

// Foreign is an endpoint that answered for another cluster than the one
// observed: an etcd of another cluster on a listed address, or the list
// pointing at the wrong hosts. Nothing is ever done to or for it.
type Foreign struct {
	Endpoint  string
	ClusterID uint64
	// MemberID is the answering member's ID in its own cluster.
	MemberID uint64
}

func (f Foreign) String() string {
	return fmt.Sprintf("%s answers for cluster %s (member %s)", f.Endpoint, IDString(f.ClusterID), IDString(f.MemberID))
}

// Target says where to look.
type Target struct {
	// Endpoints are asked for the member list (all at once).
	Endpoints []string
	// Listed are the client URLs of the listed addresses. Those that are
	// not members' are asked for their Status too, so that an address
	// answering for another cluster is known before anyone adds it.
	Listed []string
	// Pinned is the cluster this node belongs to (0: none yet). Answers
	// from another cluster are recorded as Foreign and never make the view.
	Pinned uint64
}

// Observer reads the cluster. Every call has its own timeout and calls to
// different endpoints run in parallel, so one dead endpoint costs at most
// one timeout per pass and never stalls the loop.
type Observer struct {
	Cluster etcdclient.Cluster
	Timeout time.Duration
	// Scheme derives client URLs for members that have not published
	// theirs yet (learners that just started).
	Scheme identity.Scheme
	// PeerListening tells whether a member's peer listener accepts
	// connections; a TCP dial when nil.
	PeerListening func(ctx context.Context, peerURLs []string) bool
	// InOrder asks for the member list one endpoint after the other, in
	// the order given, instead of all at once: the simulator's
	// deterministic replay of "the first answer wins".
	InOrder bool
}

// Observe lists the members through any of the target's endpoints and
// asks every member, and every listed address that is no member, for its
// status.
func (o *Observer) Observe(ctx context.Context, t Target) View {
	v := View{Observation: Observation{Pinned: t.Pinned}}
	list, problems := o.memberList(ctx, t, false, &v)
	v.Problems = problems
	if list == nil {
		// No quorum, or nobody up. A serializable answer still tells an
		// established cluster (members that published client URLs) from
		// nodes that are themselves only bootstrapping, and who its members
		// are (not current: no member's health is asked).
		if s, _ := o.memberList(ctx, t, true, &v); s != nil {
			v.Established = slices.ContainsFunc(s.Members, func(m Member) bool { return m.Started() })
			v.ClusterID = s.ClusterID
			v.Members = s.Members
		}
		return v
	}
	v.Reached, v.Established = true, true
	v.ClusterID = list.ClusterID
	v.Members = list.Members
	o.fillHealth(ctx, &v, t.Listed)
	return v
}

type memberList struct {
	ClusterID uint64
	Members   []Member
}

// memberList asks all endpoints at once and returns the first answer from
// the pinned cluster (from any cluster when not pinned); answers from
// another cluster are recorded in v.Foreign.
func (o *Observer) memberList(ctx context.Context, t Target, serializable bool, v *View) (*memberList, []string) {
	if len(t.Endpoints) == 0 {
		return nil, []string{"no endpoints to ask"}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	type answer struct {
		resp *pb.MemberListResponse
		err  error
		ep   string
	}
	answers := make(chan answer, len(t.Endpoints))
	for _, ep := range t.Endpoints {
		ask := func() {
			resp, err := o.Cluster.MemberList(ctx, ep, serializable)
			answers <- answer{resp, err, ep}
		}
		if o.InOrder {
			ask()
		} else {
			go ask()
		}
	}
	var problems []string
	for range t.Endpoints {
		a := <-answers
		if a.err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", a.ep, a.err))
			continue
		}
		if t.Pinned != 0 && a.resp.Header.ClusterId != t.Pinned {
			v.addForeign(Foreign{Endpoint: a.ep, ClusterID: a.resp.Header.ClusterId, MemberID: a.resp.Header.MemberId})
			problems = append(problems, fmt.Sprintf("%s: answers for cluster %s, not %s", a.ep, IDString(a.resp.Header.ClusterId), IDString(t.Pinned)))
			continue
		}
		list := &memberList{ClusterID: a.resp.Header.ClusterId}
		for _, m := range a.resp.Members {
			list.Members = append(list.Members, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
		}
		return list, nil // the deferred cancel stops the others
	}
	slices.Sort(problems)
	return nil, problems
}

func (v *View) addForeign(f Foreign) {
	if !slices.ContainsFunc(v.Foreign, func(g Foreign) bool { return g.Endpoint == f.Endpoint }) {
		v.Foreign = append(v.Foreign, f)
	}
}

// fillHealth asks every member, and every listed endpoint that is no
// member's, for its Status, all in parallel.
func (o *Observer) fillHealth(ctx context.Context, v *View, listed []string) {
	var probes []string
	for _, ep := range listed {
		if !slices.ContainsFunc(v.Members, func(m Member) bool { return o.clientURL(m) == ep }) {
			probes = append(probes, ep)
		}
	}
	var (
		mu       sync.Mutex
		done     sync.WaitGroup
		statuses = make([]*pb.StatusResponse, len(v.Members))
	)
	for i := range v.Members {
		done.Go(func() {
			h, s := o.health(ctx, v.Members[i], v.ClusterID)
			v.Members[i].Health, statuses[i] = h, s
		})
	}
	for _, ep := range probes {
		done.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			s, err := o.Cluster.Status(ctx, ep)
			if err != nil || s.Header.ClusterId == v.ClusterID {
				return
			}
			mu.Lock()
			v.addForeign(Foreign{Endpoint: ep, ClusterID: s.Header.ClusterId, MemberID: s.Header.MemberId})
			mu.Unlock()
		})
	}
	done.Wait()
	for i, m := range v.Members {
		if s := statuses[i]; s != nil && s.Header.ClusterId != v.ClusterID {
			v.addForeign(Foreign{Endpoint: o.clientURL(m), ClusterID: s.Header.ClusterId, MemberID: s.Header.MemberId})
		}
	}
	v.settle(statuses)
}

// Surveyed is a member with its Status answer (nil when it did not
// answer), for a caller that asked the members itself: ObservationOf
// makes the observation the rule book reads from them.
type Surveyed struct {
	Member // its Health is filled in from Status
	Status *pb.StatusResponse
	Err    error // why Status is nil
}

// ObservationOf is the observation of cluster clusterID that the members'
// Status answers make: each member's health as the Observer judges it,
// the alarms each raised, and the leader.
func ObservationOf(clusterID uint64, members []Surveyed) Observation {
	o := Observation{ClusterID: clusterID}
	statuses := make([]*pb.StatusResponse, len(members))
	for i, sm := range members {
		m := sm.Member
		switch {
		case sm.Status != nil:
			m.Health = StatusHealth(sm.Status, clusterID, m.ID, first(m.ClientURLs))
		case sm.Err != nil:
			m.Health = Health{Problem: sm.Err.Error()}
		default:
			m.Health = Health{Problem: "no answer"}
		}
		o.Members, statuses[i] = append(o.Members, m), sm.Status
	}
	o.settle(statuses)
	return o
}

// settle completes an observation from the members' Status answers (in
// the order of Members): the alarms, then the leader, which is what the
// members that can see one agree on; with a split view the highest term
// wins.
func (o *Observation) settle(statuses []*pb.StatusResponse) {
	o.attributeAlarms(statuses)
	var term uint64
	for _, m := range o.Members {
		if m.InRaft() && m.Health.RaftTerm >= term {
			term, o.LeaderID = m.Health.RaftTerm, m.Health.Leader
		}
	}
}

// attributeAlarms collects the cluster's alarms from the members' Status
// answers (every member reports all of them) and marks each member with
// the alarms it raised itself: a NOSPACE raised by one member is that
// member's problem, not every member's.
func (o *Observation) attributeAlarms(statuses []*pb.StatusResponse) {
	for i, s := range statuses {
		if s == nil || o.Members[i].Health.Problem != "" {
			continue
		}
		for _, e := range s.Errors {
			if a, ok := etcdclient.ParseAlarm(e); ok {
				if !slices.Contains(o.Alarms, a) {
					o.Alarms = append(o.Alarms, a)
				}
			}
		}
	}
	for i := range o.Members {
		for _, a := range o.Alarms {
			if a.MemberID == o.Members[i].ID {
				o.Members[i].Health.Alarms = append(o.Members[i].Health.Alarms, a.Type)
			}
		}
	}
}

func (o *Observer) health(ctx context.Context, m Member, clusterID uint64) (Health, *pb.StatusResponse) {
	endpoint := o.clientURL(m)
	if endpoint == "" {
		return Health{Problem: "no client URL"}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	s, err := o.Cluster.Status(ctx, endpoint)
	if err != nil {
		problem := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			problem = fmt.Sprintf("no answer within %s", o.Timeout)
		}
		if !m.Started() {
			problem = "not started: " + problem
		}
		h := Health{Problem: problem}
		if o.peerListening(ctx, m.PeerURLs) {
			h.PeerListening = true
			if m.IsLearner {
				h.Problem = "learner runs and catches up; etcd serves its client port once it published itself"
			} else {
				h.Problem += " (its peer port listens: its server runs, and etcd serves the client port once it applied the keyspace and published itself)"
			}
		}
		return h, nil
	}
	return StatusHealth(s, clusterID, m.ID, endpoint), s
}

// StatusHealth is what a member's Status answer, from its endpoint, says
// of it as a member of cluster clusterID: in raft as itself, or the
// problem. The alarms it raised are attributed from all the answers
// (ObservationOf).
func StatusHealth(s *pb.StatusResponse, clusterID, memberID uint64, endpoint string) Health {
	h := Health{Reachable: true, Leader: s.Leader, RaftTerm: s.RaftTerm, RaftIndex: s.RaftIndex,
		RaftAppliedIndex: s.RaftAppliedIndex, DBSize: s.DbSize, Version: s.Version, StorageVersion: s.StorageVersion}
	if d := s.GetDowngradeInfo(); d.GetEnabled() {
		h.DowngradeTarget = d.GetTargetVersion()
	}
	var other []string
	for _, e := range s.Errors {
		if _, alarm := etcdclient.ParseAlarm(e); !alarm && e != "etcdserver: no leader" {
			other = append(other, e)
		}
	}
	switch {
	case s.Header.ClusterId != clusterID:
		h.Problem = fmt.Sprintf("answers for cluster %s, not %s", IDString(s.Header.ClusterId), IDString(clusterID))
		h.WrongIdentity = true
	case s.Header.MemberId != memberID:
		h.Problem = fmt.Sprintf("endpoint %s is member %s, not %s", endpoint, IDString(s.Header.MemberId), IDString(memberID))
		h.WrongIdentity = true
	case s.Leader == 0:
		h.Problem = "no leader"
	case len(other) > 0:
		h.Problem = strings.Join(other, "; ")
	}
	return h
}

// clientURL is the member's first published client URL, or for a member
// that has not published yet, the one derived from its peer URL's IP.
func (o *Observer) clientURL(m Member) string {
	if len(m.ClientURLs) > 0 {
		return m.ClientURLs[0]
	}
	for _, u := range m.PeerURLs {
		if ip, ok := identity.IPFromURL(u); ok {
			return o.Scheme.For(ip).ClientURL
		}
	}
	return ""
}

func (o *Observer) peerListening(ctx context.Context, peerURLs []string) bool {
	if o.PeerListening != nil {
		return o.PeerListening(ctx, peerURLs)
	}
	return DialPeer(ctx, peerURLs)
}

// Endpoints returns the client URLs to observe the cluster through: every
// listed member's, plus the published ones of current members (which may
// have left the list but still answer), deduplicated and sorted.
func Endpoints(desired []identity.Member, members []Member, extra ...string) []string {
	var eps []string
	for _, d := range desired {
		eps = append(eps, d.ClientURL)
	}
	for _, m := range members {
		eps = append(eps, m.ClientURLs...)
	}
	eps = append(eps, extra...)
	slices.Sort(eps)
	return slices.Compact(eps)
}

// ClientURLs returns the listed members' client URLs.
func ClientURLs(desired []identity.Member) []string {
	urls := make([]string, len(desired))
	for i, d := range desired {
		urls[i] = d.ClientURL
	}
	return urls
}

// DialPeer dials a member's peer listener: a TCP connection (no TLS
// handshake needed) says its server runs.
func DialPeer(ctx context.Context, peerURLs []string) bool {
	for _, raw := range peerURLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			continue
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
		if err == nil {
			conn.Close()
			return true
		}
	}
	return false
}
