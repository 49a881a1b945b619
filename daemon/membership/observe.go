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

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

// View is what one observation pass learned about the cluster.
type View struct {
	Observation
	// Reached is true when some endpoint answered a linearizable
	// MemberList: the members are current and the cluster has quorum.
	Reached bool
	// Established is true when a cluster with started members exists,
	// even if it has no quorum right now (learned from a serializable
	// MemberList). A node never bootstraps while this is true.
	Established bool
	// Problems lists why endpoints did not answer, for logs and status.
	Problems []string
}

// Observer reads the cluster. Every call has its own timeout and calls to
// different endpoints run in parallel, so one dead endpoint costs at most
// one timeout per pass and never stalls the loop.
type Observer struct {
	Pool    *etcdclient.Pool
	Timeout time.Duration
	// Scheme derives client URLs for members that have not published
	// theirs yet (learners that just started).
	Scheme identity.Scheme
}

// Observe lists the members through any of the candidate endpoints and
// asks every member for its status.
func (o *Observer) Observe(ctx context.Context, endpoints []string) View {
	var v View
	list, problems := o.memberList(ctx, endpoints, false)
	v.Problems = problems
	if list == nil {
		// No quorum, or nobody up. A serializable answer still tells an
		// established cluster (members that published client URLs) from
		// nodes that are themselves only bootstrapping.
		if s, _ := o.memberList(ctx, endpoints, true); s != nil {
			v.Established = slices.ContainsFunc(s.Members, func(m Member) bool { return m.Started() })
			v.ClusterID = s.ClusterID
		}
		return v
	}
	v.Reached, v.Established = true, true
	v.ClusterID = list.ClusterID
	v.Members = list.Members
	o.fillHealth(ctx, &v)
	return v
}

type memberList struct {
	ClusterID uint64
	Members   []Member
}

// memberList asks all endpoints at once and returns the first answer.
func (o *Observer) memberList(ctx context.Context, endpoints []string, serializable bool) (*memberList, []string) {
	if len(endpoints) == 0 {
		return nil, []string{"no endpoints to ask"}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	type answer struct {
		list *memberList
		err  error
		ep   string
	}
	answers := make(chan answer, len(endpoints))
	for _, ep := range endpoints {
		go func() {
			list, err := o.listFrom(ctx, ep, serializable)
			answers <- answer{list, err, ep}
		}()
	}
	var problems []string
	for range endpoints {
		a := <-answers
		if a.err == nil {
			return a.list, nil // the deferred cancel stops the others
		}
		problems = append(problems, fmt.Sprintf("%s: %v", a.ep, a.err))
	}
	slices.Sort(problems)
	return nil, problems
}

func (o *Observer) listFrom(ctx context.Context, endpoint string, serializable bool) (*memberList, error) {
	e, err := o.Pool.Get(endpoint)
	if err != nil {
		return nil, err
	}
	resp, err := e.MemberList(ctx, serializable)
	if err != nil {
		return nil, err
	}
	list := &memberList{ClusterID: resp.Header.ClusterId}
	for _, m := range resp.Members {
		list.Members = append(list.Members, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return list, nil
}

// fillHealth asks every member for its Status in parallel.
func (o *Observer) fillHealth(ctx context.Context, v *View) {
	var wg sync.WaitGroup
	for i := range v.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.Members[i].Health = o.health(ctx, v.Members[i], v.ClusterID)
		}()
	}
	wg.Wait()
	// The leader is what the members that can see one agree on; with a
	// split view the highest term wins.
	var term uint64
	for _, m := range v.Members {
		if m.Healthy() && m.Health.RaftTerm >= term {
			term, v.LeaderID = m.Health.RaftTerm, m.Health.Leader
		}
	}
}

func (o *Observer) health(ctx context.Context, m Member, clusterID uint64) Health {
	endpoint := o.clientURL(m)
	if endpoint == "" {
		return Health{Problem: "no client URL"}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	e, err := o.Pool.Get(endpoint)
	if err != nil {
		return Health{Problem: err.Error()}
	}
	s, err := e.Status(ctx)
	if err != nil {
		problem := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			problem = fmt.Sprintf("no answer within %s", o.Timeout)
		}
		if !m.Started() {
			problem = "not started: " + problem
		}
		h := Health{Problem: problem}
		if m.IsLearner && peerListening(ctx, m) {
			h.PeerListening = true
			h.Problem = "learner runs and catches up; etcd serves its client port once it published itself"
		}
		return h
	}
	h := Health{Reachable: true, Leader: s.Leader, RaftTerm: s.RaftTerm, RaftIndex: s.RaftIndex,
		RaftAppliedIndex: s.RaftAppliedIndex, DBSize: s.DbSize, Version: s.Version}
	switch {
	case s.Header.ClusterId != clusterID:
		h.Problem = fmt.Sprintf("answers for cluster %s, not %s", IDString(s.Header.ClusterId), IDString(clusterID))
	case s.Header.MemberId != m.ID:
		h.Problem = fmt.Sprintf("endpoint %s is member %s, not %s", endpoint, IDString(s.Header.MemberId), IDString(m.ID))
	case len(s.Errors) > 0:
		h.Problem = strings.Join(s.Errors, "; ")
	case s.Leader == 0:
		h.Problem = "no leader"
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

// peerListening dials the member's peer listener: a TCP connection (no TLS
// handshake needed) says its server runs.
func peerListening(ctx context.Context, m Member) bool {
	for _, raw := range m.PeerURLs {
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
