package etcdclient

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
)

// countedLease counts the renewals sent through it.
type countedLease struct {
	clientv3.Lease
	renewals atomic.Int32
}

func (c *countedLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	c.renewals.Add(1)
	return c.Lease.KeepAliveOnce(ctx, id)
}

// The keep-alive of every client the pool makes keeps a lease alive well
// past its TTL with one renewal per half of the TTL (etcd's own wakes
// every 500 ms whatever the TTL), and ends, closing its channel, when the
// lease is revoked, when the caller is done, and when the cluster stops
// answering for longer than the TTL.
func TestKeepAliveRenewsAtHalfTheTTL(t *testing.T) {
	members := etcdtest.Start(t, 1)
	cli := poolClient(t, etcdtest.ClientURLs(members))
	counted := &countedLease{Lease: cli.Lease.(quietLease).Lease}
	cli.Lease = quietLease{Lease: counted, attemptTimeout: 3 * time.Second}
	ctx := context.Background()
	const ttl = 3 // seconds: a renewal every 1.5 s

	grant := func() clientv3.LeaseID {
		t.Helper()
		lease, err := cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return lease.ID
	}
	closed := func(answers <-chan *clientv3.LeaseKeepAliveResponse, within time.Duration, why string) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case _, open := <-answers:
				if !open {
					return
				}
			case <-deadline:
				t.Fatalf("the keep-alive did not end within %s after %s", within, why)
			}
		}
	}

	t.Run("keeps the lease alive with few renewals", func(t *testing.T) {
		id := grant()
		answers, err := cli.KeepAlive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		counted.renewals.Store(0)
		time.Sleep(3 * ttl * time.Second)
		left, err := cli.TimeToLive(ctx, id)
		if err != nil || left.TTL <= 0 {
			t.Fatalf("the lease expired while kept alive (TTL left %v, %v)", left, err)
		}
		// Nine seconds at one renewal per 1.5 s, give or take one at either end.
		if n := counted.renewals.Load(); n < 5 || n > 7 {
			t.Errorf("%d renewals in %d s of a %d s lease, want about one per 1.5 s", n, 3*ttl, ttl)
		}
		if _, err := cli.Revoke(ctx, id); err != nil {
			t.Fatal(err)
		}
		closed(answers, 2*time.Second, "the lease was revoked")
	})
	t.Run("ends with the caller", func(t *testing.T) {
		id := grant()
		keep, stop := context.WithCancel(ctx)
		answers, err := cli.KeepAlive(keep, id)
		if err != nil {
			t.Fatal(err)
		}
		stop()
		closed(answers, time.Second, "its context ended")
		time.Sleep((ttl + 1) * time.Second)
		if left, err := cli.TimeToLive(ctx, id); err != nil || left.TTL > 0 {
			t.Fatalf("the lease was renewed after the keep-alive ended (TTL left %v, %v)", left, err)
		}
	})
	t.Run("ends when the cluster stops answering", func(t *testing.T) {
		id := grant()
		answers, err := cli.KeepAlive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		<-answers // renewed once: the TTL is known
		members[0].Close()
		closed(answers, (ttl+2)*time.Second, "the only member stopped")
	})
}

// A member that stops answering without closing its connection (a host
// powered off, a partition that drops packets) costs a renewal sent to it
// one attempt's timeout, not the lease: the next attempt goes to another
// member, and the lease lives on.
func TestKeepAliveSurvivesAMemberThatStopsAnswering(t *testing.T) {
	members := etcdtest.Start(t, 3)
	urls := etcdtest.ClientURLs(members)
	silent := &freezingProxy{}
	urls[0] = silent.start(t, urls[0])
	cli := poolClient(t, urls)
	cli.Lease = quietLease{Lease: cli.Lease.(quietLease).Lease, attemptTimeout: time.Second}
	ctx := context.Background()
	const ttl = 6 // seconds: a renewal every two
	lease, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	answers, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	<-answers
	silent.frozen.Store(true)
	end := time.After(3 * ttl * time.Second)
	for {
		select {
		case _, open := <-answers:
			if !open {
				t.Fatal("the keep-alive gave the lease up while two of three members answer")
			}
			continue
		case <-end:
		}
		break
	}
	other, err := clientv3.New(clientv3.Config{Endpoints: urls[1:], DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if left, err := other.TimeToLive(ctx, lease.ID); err != nil || left.TTL <= 0 {
		t.Fatalf("the lease expired (TTL left %v, %v)", left, err)
	}
}

// poolClient is the client a pool makes for urls, closed with the test.
func poolClient(t *testing.T, urls []string) *clientv3.Client {
	t.Helper()
	pool, err := NewPool(config.TLSFiles{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cli, err := pool.NewMulti(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// freezingProxy forwards TCP to one address until frozen; then it keeps
// every connection open and forwards nothing, either way.
type freezingProxy struct{ frozen atomic.Bool }

func (p *freezingProxy) start(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", u.Host)
			if err != nil {
				_ = in.Close()
				continue
			}
			t.Cleanup(func() { _ = in.Close(); _ = out.Close() })
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	return u.Scheme + "://" + l.Addr().String()
}

func (p *freezingProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if p.frozen.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}
