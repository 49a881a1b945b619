// Package etcdclient gives etcdlet's other packages bounded, per-endpoint
// access to etcd: one connection per endpoint URL (so one dead endpoint
// never stalls calls meant for another), TLS from the configuration, an
// explicit table that classifies etcd errors as done, retry or fatal, and
// a bounded retry with per-attempt timeouts, exponential backoff and jitter.
package etcdclient

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/etcdlet/etcdlet/config"
)

// Pool caches one connection per endpoint URL. It is safe for concurrent
// use.
type Pool struct {
	tls         *tls.Config
	dialTimeout time.Duration

	mu        sync.Mutex
	endpoints map[string]*conn
}

// NewPool builds a pool whose connections present the given TLS files
// (when enabled) and give up connecting after dialTimeout.
func NewPool(files config.TLSFiles, dialTimeout time.Duration) (*Pool, error) {
	tlsConfig, err := ClientTLS(files)
	if err != nil {
		return nil, err
	}
	return &Pool{tls: tlsConfig, dialTimeout: dialTimeout, endpoints: map[string]*conn{}}, nil
}

// ClientTLS turns TLS files into a client TLS config; nil when TLS is off.
func ClientTLS(files config.TLSFiles) (*tls.Config, error) {
	if !files.Enabled() {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: files.CertFile, KeyFile: files.KeyFile, TrustedCAFile: files.CAFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load etcd client TLS (cert %s, key %s, CA %s): %w", files.CertFile, files.KeyFile, files.CAFile, err)
	}
	return cfg, nil
}

// connectParams reconnect quickly: gRPC's default backoff grows to two
// minutes, long after a restarted or newly started member answers again.
func (p *Pool) connectParams() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
		MinConnectTimeout: p.dialTimeout,
	})
}

// Cluster is the etcd API the membership engine uses, each call addressed
// to one endpoint (a member's client URL). *Pool implements it against
// real etcd; the simulator implements it against its model of a cluster.
// Errors are etcd's own (rpctypes, gRPC status), which Classify reads.
type Cluster interface {
	MemberList(ctx context.Context, endpoint string, serializable bool) (*pb.MemberListResponse, error)
	Status(ctx context.Context, endpoint string) (*pb.StatusResponse, error)
	MemberAddAsLearner(ctx context.Context, endpoint, peerURL string) (*pb.MemberAddResponse, error)
	MemberPromote(ctx context.Context, endpoint string, id uint64) error
	MemberRemove(ctx context.Context, endpoint string, id uint64) error
	// MoveLeader hands leadership to transferee; only the leader serves it.
	MoveLeader(ctx context.Context, endpoint string, transferee uint64) error
	// AlarmDisarm clears one member's alarm.
	AlarmDisarm(ctx context.Context, endpoint string, member uint64, alarm pb.AlarmType) error
	// Retain keeps the connections of these endpoints only.
	Retain(keep []string)
}

var _ Cluster = (*Pool)(nil)

// conn is the connection to one member's client URL. Its calls fail
// fast when the member is down, instead of waiting for it until the call's
// deadline as etcd's client does by default (WaitForReady), and they are
// not retried behind the caller's back.
type conn struct {
	url  string
	conn *grpc.ClientConn
}

// get returns the connection to one endpoint, creating it on first use.
// Creating it does not dial.
func (p *Pool) get(endpoint string) (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.endpoints[endpoint]; ok {
		return e, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("etcd endpoint %q: not a URL with a host", endpoint)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		if p.tls == nil {
			return nil, fmt.Errorf("etcd endpoint %s uses https but no client TLS is configured (etcd.tls.client or agent.etcdClientTLS)", endpoint)
		}
		creds = credentials.NewTLS(p.tls.Clone())
	}
	grpcConn, err := grpc.NewClient("passthrough:///"+u.Host, grpc.WithTransportCredentials(creds), p.connectParams())
	if err != nil {
		return nil, fmt.Errorf("connect to etcd endpoint %s: %w", endpoint, err)
	}
	e := &conn{url: endpoint, conn: grpcConn}
	p.endpoints[endpoint] = e
	return e, nil
}

var failFast = grpc.WaitForReady(false)

// MemberList lists the members; linearizable unless serializable is set.
func (p *Pool) MemberList(ctx context.Context, endpoint string, serializable bool) (*pb.MemberListResponse, error) {
	e, err := p.get(endpoint)
	if err != nil {
		return nil, err
	}
	return pb.NewClusterClient(e.conn).MemberList(ctx, &pb.MemberListRequest{Linearizable: !serializable}, failFast)
}

// Status asks the member about itself.
func (p *Pool) Status(ctx context.Context, endpoint string) (*pb.StatusResponse, error) {
	e, err := p.get(endpoint)
	if err != nil {
		return nil, err
	}
	return pb.NewMaintenanceClient(e.conn).Status(ctx, &pb.StatusRequest{}, failFast)
}

// MemberAddAsLearner adds a learner with the given peer URL.
func (p *Pool) MemberAddAsLearner(ctx context.Context, endpoint, peerURL string) (*pb.MemberAddResponse, error) {
	e, err := p.get(endpoint)
	if err != nil {
		return nil, err
	}
	return pb.NewClusterClient(e.conn).MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{peerURL}, IsLearner: true}, failFast)
}

// MemberPromote makes a learner a voter.
func (p *Pool) MemberPromote(ctx context.Context, endpoint string, id uint64) error {
	e, err := p.get(endpoint)
	if err != nil {
		return err
	}
	_, err = pb.NewClusterClient(e.conn).MemberPromote(ctx, &pb.MemberPromoteRequest{ID: id}, failFast)
	return err
}

// MemberRemove removes a member.
func (p *Pool) MemberRemove(ctx context.Context, endpoint string, id uint64) error {
	e, err := p.get(endpoint)
	if err != nil {
		return err
	}
	_, err = pb.NewClusterClient(e.conn).MemberRemove(ctx, &pb.MemberRemoveRequest{ID: id}, failFast)
	return err
}

// MoveLeader hands leadership to transferee; only the leader serves it.
func (p *Pool) MoveLeader(ctx context.Context, endpoint string, transferee uint64) error {
	e, err := p.get(endpoint)
	if err != nil {
		return err
	}
	_, err = pb.NewMaintenanceClient(e.conn).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: transferee}, failFast)
	return err
}

// AlarmDisarm clears one member's alarm.
func (p *Pool) AlarmDisarm(ctx context.Context, endpoint string, member uint64, alarm pb.AlarmType) error {
	e, err := p.get(endpoint)
	if err != nil {
		return err
	}
	_, err = pb.NewMaintenanceClient(e.conn).Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: member, Alarm: alarm}, failFast)
	return err
}

// NewMulti returns an etcd client balancing over several endpoints, owned
// by the caller. The writer lock uses one: the lock session needs etcd's
// client, and it should keep its lease alive while any voter answers.
func (p *Pool) NewMulti(endpoints []string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: p.dialTimeout,
		// A ping per connection (one per endpoint) every 30 s finds a
		// connection to a host that vanished without closing it within
		// 32 s; meanwhile a call sent there times out and the next goes
		// to another endpoint. Every 10 s cost an idle agent 18 wake-ups
		// a minute for the same.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: p.dialTimeout,
		TLS:                  p.tls,
		DialOptions:          []grpc.DialOption{p.connectParams()},
		// etcdlet logs what matters itself; the client's own zap output
		// would only repeat dial failures of endpoints known to be down.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("create etcd client for %v: %w", endpoints, err)
	}
	c.Lease = quietLease{Lease: c.Lease, attemptTimeout: p.dialTimeout + time.Second}
	return c, nil
}

// Retain closes and forgets the connections of endpoints not in keep, so
// the pool follows membership instead of growing with every address seen.
func (p *Pool) Retain(keep []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for url, e := range p.endpoints {
		if !slices.Contains(keep, url) {
			_ = e.conn.Close()
			delete(p.endpoints, url)
		}
	}
}

// Close closes every connection.
func (p *Pool) Close() {
	p.Retain(nil)
}

// Defragment defragments one member's backend. The member stalls its
// applies meanwhile; ctx bounds the call (it can take minutes).
func (p *Pool) Defragment(ctx context.Context, endpoint string) error {
	e, err := p.get(endpoint)
	if err != nil {
		return err
	}
	_, err = pb.NewMaintenanceClient(e.conn).Defragment(ctx, &pb.DefragmentRequest{}, failFast)
	return err
}

// AlarmList lists the cluster's raised alarms.
func (p *Pool) AlarmList(ctx context.Context, endpoint string) ([]*pb.AlarmMember, error) {
	e, err := p.get(endpoint)
	if err != nil {
		return nil, err
	}
	resp, err := pb.NewMaintenanceClient(e.conn).Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET}, failFast)
	if err != nil {
		return nil, err
	}
	return resp.Alarms, nil
}

// Compact compacts the keyspace up to rev, waiting until the compaction
// is applied (physical) so that the space is reusable when it returns.
func (p *Pool) Compact(ctx context.Context, endpoint string, rev int64) error {
	e, err := p.get(endpoint)
	if err != nil {
		return err
	}
	_, err = pb.NewKVClient(e.conn).Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: true}, failFast)
	return err
}
