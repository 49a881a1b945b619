package campaign

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/test/harness"
)

// keyPrefix holds the clients' keys; nothing else writes there.
const keyPrefix = "/campaign/"

// callTimeout bounds one client operation: past it, its outcome is
// unknown.
const callTimeout = 2 * time.Second

// newClient connects to endpoints from inside the clients' namespace.
func newClient(endpoints []string, tlsConfig *tls.Config, clientNS string) (*clientv3.Client, error) {
	dial := harness.DialInNetns(clientNS)
	return clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: callTimeout, TLS: tlsConfig, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})},
	})
}

// workload runs clients doing puts, gets, deletes and compare-and-swaps
// on a few keys, recording each operation in the history.
type workload struct {
	hist    *history
	keys    int
	clients []*clientv3.Client
	seed    uint64

	wg   sync.WaitGroup
	stop chan struct{}

	mu     sync.Mutex
	acked  map[string]bool // values written (put, cas) whose call returned success
	failed int             // operations with an unknown outcome
}

func key(i int) string { return fmt.Sprintf("%sk%02d", keyPrefix, i) }

// start runs every client until halt.
func (w *workload) start() {
	w.stop = make(chan struct{})
	for i, cli := range w.clients {
		w.wg.Go(func() { w.run(i, cli) })
	}
}

// halt stops the clients and waits for their last operations.
func (w *workload) halt() {
	close(w.stop)
	w.wg.Wait()
}

func (w *workload) run(client int, cli *clientv3.Client) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(client)))
	seq := 0
	last := map[string]string{} // the value this client last saw in each key
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(time.Duration(5+rng.IntN(20)) * time.Millisecond):
		}
		k := key(rng.IntN(w.keys))
		seq++
		value := fmt.Sprintf("c%d-%d", client, seq)
		var in input
		switch p := rng.IntN(100); {
		case p < 40:
			in = input{Kind: opGet, Key: k}
		case p < 70:
			in = input{Kind: opPut, Key: k, Value: value}
		case p < 90:
			in = input{Kind: opCAS, Key: k, Value: value, Expect: last[k]}
		default:
			in = input{Kind: opDelete, Key: k}
		}
		call := w.hist.now()
		out := do(cli, in)
		w.hist.add(client, in, call, out)
		w.count(in, out)
		switch {
		case out.Unknown:
		case in.Kind == opGet, in.Kind == opCAS && !out.Succeeded:
			last[k] = out.Value
		case in.Kind == opPut, in.Kind == opCAS:
			last[k] = in.Value
		case in.Kind == opDelete:
			last[k] = ""
		}
	}
}

func (w *workload) count(in input, out output) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case out.Unknown:
		w.failed++
	case in.Kind == opPut, in.Kind == opCAS && out.Succeeded:
		w.acked[in.Value] = true
	}
}

// do makes one operation; any error leaves its outcome unknown.
func do(cli *clientv3.Client, in input) output {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	switch in.Kind {
	case opGet:
		resp, err := cli.Get(ctx, in.Key)
		if err != nil {
			return output{Unknown: true}
		}
		out := output{Revision: resp.Header.Revision}
		if len(resp.Kvs) > 0 {
			out.Value = string(resp.Kvs[0].Value)
		}
		return out
	case opPut:
		resp, err := cli.Put(ctx, in.Key, in.Value)
		if err != nil {
			return output{Unknown: true}
		}
		return output{Revision: resp.Header.Revision}
	case opDelete:
		resp, err := cli.Delete(ctx, in.Key)
		if err != nil {
			return output{Unknown: true}
		}
		return output{Deleted: resp.Deleted > 0, Revision: resp.Header.Revision}
	case opCAS:
		cmp := clientv3.Compare(clientv3.Value(in.Key), "=", in.Expect)
		if in.Expect == "" {
			cmp = clientv3.Compare(clientv3.CreateRevision(in.Key), "=", 0)
		}
		resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(in.Key, in.Value)).Else(clientv3.OpGet(in.Key)).Commit()
		if err != nil {
			return output{Unknown: true}
		}
		out := output{Succeeded: resp.Succeeded, Revision: resp.Header.Revision}
		if !resp.Succeeded {
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				out.Value = string(kvs[0].Value)
			}
		}
		return out
	}
	panic("unknown operation " + in.Kind)
}

// event is what the watcher saw: a put of value, or a delete, at revision.
type event struct {
	Revision int64
	Key      string
	Value    string // "" for a delete
}

// watcher follows keyPrefix through the whole campaign.
type watcher struct {
	mu       sync.Mutex
	events   []event
	problems []string
	done     chan struct{}
}

// watch starts following keyPrefix from the cluster's revision now, which
// it reads before it returns: the workload starts after it, so every write
// comes later. (A watch without a revision starts whenever its stream
// reaches a member, and the first writes could come before that.)
func watch(ctx context.Context, cli *clientv3.Client) (*watcher, error) {
	var rev int64
	if _, err := eventually.Within(30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		resp, err := cli.Get(ctx, keyPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil {
			rev = resp.Header.Revision
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("read the revision the watch starts from: %w", err)
	}
	w := &watcher{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev + 1)}
			for resp := range cli.Watch(clientv3.WithRequireLeader(ctx), keyPrefix, opts...) {
				if err := resp.Err(); err != nil {
					if errors.Is(err, context.Canceled) || ctx.Err() != nil {
						return
					}
					if resp.CompactRevision > 0 {
						w.problem(fmt.Sprintf("watch compacted at revision %d: events before it were lost to the watch", resp.CompactRevision))
						rev = resp.CompactRevision - 1
					}
					break
				}
				w.mu.Lock()
				for _, e := range resp.Events {
					w.events = append(w.events, event{Revision: e.Kv.ModRevision, Key: string(e.Kv.Key), Value: string(e.Kv.Value)})
					rev = e.Kv.ModRevision
				}
				w.mu.Unlock()
			}
			// The watch ended (no leader, a member gone): watch again from
			// the next revision, after a moment.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w, nil
}

// caughtUp waits until the watch delivered an event at revision rev or
// later, or timeout passed.
func (w *watcher) caughtUp(rev int64, timeout time.Duration) bool {
	_, err := eventually.Within(timeout, 50*time.Millisecond, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := len(w.events); n == 0 || w.events[n-1].Revision < rev {
			return errBehind
		}
		return nil
	})
	return err == nil
}

var errBehind = errors.New("the watch has not delivered the revision yet")

func (w *watcher) problem(p string) {
	w.mu.Lock()
	w.problems = append(w.problems, p)
	w.mu.Unlock()
}

// check says what the watch got wrong: an event seen twice or out of
// revision order, or an acknowledged write it never delivered.
func (w *watcher) check(acknowledged map[string]bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]string(nil), w.problems...)
	seen := map[string]int{}
	for i, e := range w.events {
		if i > 0 && e.Revision <= w.events[i-1].Revision {
			out = append(out, fmt.Sprintf("watch: event %d (%s at revision %d) after one at revision %d", i, e.Key, e.Revision, w.events[i-1].Revision))
		}
		if e.Value != "" {
			seen[e.Value]++
		}
	}
	for v, n := range seen {
		if n > 1 {
			out = append(out, fmt.Sprintf("watch: the put of %s delivered %d times", v, n))
		}
	}
	for v := range acknowledged {
		if seen[v] == 0 && len(w.problems) == 0 {
			out = append(out, fmt.Sprintf("watch: the acknowledged put of %s was never delivered", v))
		}
	}
	return out
}
