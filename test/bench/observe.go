package main

import (
	"context"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// observer is the one observation both sides are timed by: the member
// list, asked every pollEvery through a client of all four nodes, until
// the member that joins (known by its peer URL, which it has from the
// moment it is added) is a voter, or the member that leaves is gone.
type observer struct {
	t   *tb
	cli *clientv3.Client
}

const (
	pollEvery = 5 * time.Millisecond
	// changeDeadline bounds every wait for a membership change.
	changeDeadline = 2 * time.Minute
)

func newObserver(t *tb, endpoints []string) *observer {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	t.check(err, "etcd client")
	t.Cleanup(func() { cli.Close() })
	return &observer{t: t, cli: cli}
}

// memberState is what the list says of one member.
type memberState int

const (
	absent memberState = iota
	learner
	voter
)

func (s memberState) String() string { return [...]string{"absent", "a learner", "a voter"}[s] }

// waitFor polls until the member with peerURL is in state want and
// returns when it saw it.
func (o *observer) waitFor(peerURL string, want memberState) time.Time {
	deadline := time.Now().Add(changeDeadline)
	last, lastErr := absent, error(nil)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := o.cli.MemberList(ctx)
		cancel()
		if err == nil {
			last = absent
			for _, m := range resp.Members {
				if slices.Contains(m.PeerURLs, peerURL) {
					last = learner
					if !m.IsLearner {
						last = voter
					}
				}
			}
			if last == want {
				return time.Now()
			}
		}
		lastErr = err
		time.Sleep(pollEvery)
	}
	o.t.Fatalf("member %s did not become %s within %s (it is %s; last member list error: %v)", peerURL, want, changeDeadline, last, lastErr)
	return time.Time{}
}

// waitVoters waits until the cluster has exactly n members, all started
// voters.
func (o *observer) waitVoters(n int) {
	deadline := time.Now().Add(changeDeadline)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := o.cli.MemberList(ctx)
		cancel()
		if err == nil && len(resp.Members) == n && !slices.ContainsFunc(resp.Members, func(m *pb.Member) bool {
			return m.IsLearner || len(m.ClientURLs) == 0
		}) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	o.t.Fatalf("the cluster did not reach %d started voters within %s", n, changeDeadline)
}

// leader returns the peer URL of the member that leads, as its own Status
// says.
func (o *observer) leader() string {
	deadline := time.Now().Add(changeDeadline)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := o.cli.MemberList(ctx)
		cancel()
		if err == nil {
			for _, m := range resp.Members {
				if len(m.ClientURLs) == 0 {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				s, err := o.cli.Status(ctx, m.ClientURLs[0])
				cancel()
				if err == nil && s.Leader == m.ID && len(m.PeerURLs) > 0 {
					return m.PeerURLs[0]
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	o.t.Fatalf("no member led within %s", changeDeadline)
	return ""
}

// members returns the peer URLs of the current members.
func (o *observer) members() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := o.cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, m := range resp.Members {
		urls = append(urls, m.PeerURLs...)
	}
	return urls, nil
}
