package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Client returns an etcd client over every address the cluster may use.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	ns := make([]int, 9)
	for i := range ns {
		ns[i] = i + 1
	}
	return c.ClientOf(ns...)
}

// ClientOf returns an etcd client over the addresses of agents ns only
// (when another cluster answers on some of the addresses).
func (c *Cluster) ClientOf(ns ...int) *clientv3.Client {
	c.t.Helper()
	var eps []string
	for _, n := range ns {
		eps = append(eps, c.ClientURL(n))
	}
	var tlsConfig *tls.Config
	if c.Opts.TLS != nil {
		var err error
		if tlsConfig, err = c.Opts.TLS.ClientConfig(); err != nil {
			c.t.Fatalf("%v", err)
		}
	}
	var dial []grpc.DialOption
	if d := c.Opts.Dial; d != nil {
		dial = append(dial, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d(ctx, "tcp", addr) }))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, TLS: tlsConfig, Logger: zap.NewNop(), DialOptions: dial})
	if err != nil {
		c.t.Fatalf("etcd client: %v", err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// MemberList asks each address in turn (1s each) for a linearizable list.
func (c *Cluster) MemberList(cli *clientv3.Client) ([]*pb.Member, error) {
	var errs []string
	for n := 1; n <= 9; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := cli.MemberList(ctx)
		cancel()
		if err == nil {
			return resp.Members, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("no member list: %s", strings.Join(errs, "; "))
}

// Expect checks that the members are exactly the voters ns (by name and
// peer URL), none a learner, each started and answering Status with a
// leader.
func (c *Cluster) Expect(cli *clientv3.Client, ns ...int) error {
	members, err := c.MemberList(cli)
	if err != nil {
		return err
	}
	var got, want []string
	for _, n := range ns {
		want = append(want, c.Name(n))
	}
	for _, m := range members {
		label := m.Name
		if m.IsLearner {
			label += "(learner)"
		}
		if len(m.ClientURLs) == 0 {
			label += "(unstarted)"
		}
		got = append(got, label)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("members %v, want voters %v", got, want)
	}
	for _, m := range members {
		n := c.indexOf(m.Name)
		if want := c.PeerURL(n); !slices.Equal(m.PeerURLs, []string{want}) {
			return fmt.Errorf("member %s has peer URLs %v, want [%s]", m.Name, m.PeerURLs, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := cli.Status(ctx, m.ClientURLs[0])
		cancel()
		if err != nil {
			return fmt.Errorf("status of %s: %v", m.Name, err)
		}
		if s.Leader == 0 {
			return fmt.Errorf("%s reports no leader", m.Name)
		}
	}
	return nil
}

// Wait waits until Expect holds.
func (c *Cluster) Wait(cli *clientv3.Client, timeout time.Duration, ns ...int) {
	c.t.Helper()
	Eventually(c.t, timeout, fmt.Sprintf("members are exactly voters %v", ns), func() error { return c.Expect(cli, ns...) })
}

func (c *Cluster) indexOf(name string) int {
	for n := 1; n <= 9; n++ {
		if c.Name(n) == name {
			return n
		}
	}
	return 0
}

// PeerURL is agent n's peer URL, as etcdlet builds it.
func (c *Cluster) PeerURL(n int) string {
	return strings.Replace(c.ClientURL(n), fmt.Sprintf(":%d", c.Ports.Client), fmt.Sprintf(":%d", c.Ports.Peer), 1)
}

// Writer keeps writing to the cluster and measures the longest time
// without a successful write: the cluster's write availability.
type Writer struct {
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	start    time.Time
	lastOK   time.Time
	maxGap   time.Duration
	gapEnd   time.Time
	writes   int
	failures int
	lastErr  error
}

// WriteTimeout is the timeout of each of the Writer's writes.
const WriteTimeout = time.Second

// StartWriter writes a key every 20ms, each write with WriteTimeout.
func (c *Cluster) StartWriter(cli *clientv3.Client) *Writer {
	w := &Writer{stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), WriteTimeout)
			_, err := cli.Put(ctx, "/harness/writer", fmt.Sprint(i))
			cancel()
			w.record(err)
		}
	}()
	c.t.Cleanup(w.Stop)
	return w
}

func (w *Writer) record(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if err != nil {
		w.failures++
		w.lastErr = err
		return
	}
	w.writes++
	since := w.lastOK
	if since.IsZero() {
		since = w.start
	}
	if now.Sub(since) > w.maxGap {
		w.maxGap, w.gapEnd = now.Sub(since), now
	}
	w.lastOK = now
}

// Stop stops writing; idempotent.
func (w *Writer) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// Report is what the writer saw. MaxGap is the longest time without a
// successful write, counted from the writer's start.
type Report struct {
	Writes, Failures int
	MaxGap           time.Duration
	GapEnd           time.Time
	LastOK           time.Time
	LastErr          error
}

// Report returns the figures so far.
func (w *Writer) Report() Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Report{Writes: w.writes, Failures: w.failures, MaxGap: w.maxGap, GapEnd: w.gapEnd, LastOK: w.lastOK, LastErr: w.lastErr}
}
