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
// list, asked every pollEvery through a client of the three members that
// stay, until the fourth member (known by its peer URL, which it has from
// the moment it is added) is a voter, or is gone.
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

// memberState is what the list says of the fourth member.
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
