// Package campaign runs etcdlet against real faults: agents on hosts that
// are network namespaces of their own, clients writing and reading through
// the whole campaign, and a schedule of faults and list changes drawn from
// a seed (kill -9, SIGSTOP, partitions, packet loss, lists that reach the
// hosts seconds apart). At the end it checks the clients' history for
// linearizability and the invariants etcdlet promises: one cluster, no
// data dir deleted, no agent crashed but by a kill, convergence within a
// minute once the faults stop. See docs/development.md.
package campaign

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/test/harness"
)

// Options of a campaign.
type Options struct {
	Seed uint64
	// Duration is how long faults are injected; the campaign goes on
	// until MinFaults were, too.
	Duration  time.Duration
	MinFaults int
	// Only, when set, limits the faults to these kinds (FaultKinds).
	Only []string
	// Source is where the agents read the list: SourceFile, a members
	// file per host that a list change reaches host after host, or
	// SourceResource, etcd-druid's Etcd on a kube-apiserver that restarts
	// among the faults.
	Source string
	// Binary is the etcdlet binary the agents run.
	Binary string
	// Replay is the command line that replays this campaign, for the
	// report.
	Replay string
}

// Result is what a campaign did and found.
type Result struct {
	Faults      map[string]int // by kind
	ListChanges int
	Operations  int // client operations checked
	Unknown     int // of which the outcome was unknown
	// MembershipChanges are the membership calls the agents made (done).
	MembershipChanges int
	// ExitsOnFullDisk counts agents that exited while their disk was full.
	ExitsOnFullDisk int
	// HoldersPaused counts agents stopped past the writer lock's lease
	// while they held it.
	HoldersPaused int
	// MovedAsidePruned counts the moved-aside data dirs the campaign
	// deleted, as an operator would, to keep the hosts' disks from
	// filling up (pruneMovedAside).
	MovedAsidePruned int
	// WipesSkipped counts wipes not made because the cluster was not
	// whole: a second member without data could cost quorum for good.
	WipesSkipped int
	// LongestQuorumLoss is the longest a quorum read failed after a
	// fault healed.
	LongestQuorumLoss time.Duration
	Convergence       time.Duration
	Violations        []string
}

const (
	hosts    = 5         // hosts 1..5 run agents; host 6 the clients
	clientNS = hosts + 1 // the clients' host
	keys     = 12        // the clients' keys
	clients  = 4
	// convergeWithin is how long the agents may take to converge once the
	// faults stopped and every host has the same list.
	convergeWithin = 60 * time.Second
	// lockTTL is the agents' agent.lockTTL: short, so that a pause outlasts
	// the writer lock's lease.
	lockTTL = 6 * time.Second
)

func hostAddr(n int) string { return fmt.Sprintf("198.51.100.%d", 10+n) }

// campaign is one run's state.
type campaign struct {
	t      *testing.T
	opts   Options
	rng    *rand.Rand
	c      *harness.Cluster
	ns     func(int) string
	net    *network
	list   []int // the list every host has
	result Result
	// keptDir outlives the test: the logs and history of a violation.
	keptDir string
	obs     *observer
	cli     *clientv3.Client // of every host's member, from the clients' namespace
	kube    *kube            // with SourceResource
	delays  *delays          // the hosts' delay proxies

	mu       sync.Mutex
	stopped  map[int]string // agents stopped by a fault (kill, pause), and how
	problems []string       // violations found while running
	seenDown map[int]bool   // agents already reported as exited
}

// Run runs a campaign and returns what it found; t fails on a violation.
func Run(t *testing.T, opts Options) Result {
	cp := &campaign{t: t, opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x5eed)),
		stopped: map[int]string{}, seenDown: map[int]bool{}, result: Result{Faults: map[string]int{}}}
	cp.ns = harness.BridgedHosts(t, "camp", clientNS, func(n int) string { return hostAddr(n) + "/24" })
	cp.net = newNetwork(cp.ns, hostAddr)
	for n := 1; n <= clientNS; n++ {
		if err := cp.net.setUp(n); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	for n := 1; n <= hosts; n++ {
		mountDisk(t, filepath.Join(dir, fmt.Sprintf("n%d", n)))
	}
	cp.delays = cp.startDelays(t.TempDir())
	cp.list = []int{1, 2, 3}
	var kubernetes string
	if opts.Source == SourceResource {
		cp.kube, kubernetes = cp.startKube(t.TempDir(), cp.list)
	}
	cp.c = harness.NewCluster(t, opts.Binary, dir, harness.Options{
		Addr:        hostAddr,
		Ports:       &harness.Ports{Client: 2379, Peer: 2380, Metrics: 2381, Agent: 9479, AgentPeer: 2382},
		OwnLists:    true,
		AgentConfig: fmt.Sprintf("  lockTTL: %s\n", lockTTL),
		Extra:       kubernetes,
		Wrap: func(n int, argv []string) []string {
			return append([]string{"ip", "netns", "exec", cp.ns(n)}, argv...)
		},
	})
	cp.c.WriteMembers(cp.list...)
	for n := 1; n <= hosts; n++ {
		cp.c.Start(n)
	}
	cp.killMidBootstrap()
	cp.cli = cp.client(cp.allHosts())
	if d, err := cp.converge(cp.cli); err != nil {
		t.Fatalf("the first three hosts did not form a cluster: %v", err)
	} else {
		t.Logf("campaign seed %d: three hosts formed a cluster in %s", opts.Seed, d.Round(time.Millisecond))
	}
	cp.delayProxiesCarry()
	if cp.kube != nil {
		cp.switchToResource()
		t.Logf("every agent reads the list from the Etcd %s now", cp.kube.key)
	}

	hist := newHistory()
	w := &workload{hist: hist, keys: keys, seed: opts.Seed, acked: map[string]bool{}}
	for range clients {
		w.clients = append(w.clients, cp.client(cp.allHosts()))
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watched, err := watch(watchCtx, cp.client(cp.allHosts()))
	if err != nil {
		t.Fatal(err)
	}
	cp.obs = cp.observe()
	w.start()

	cp.inject()

	cp.healAll()
	cp.rollout(cp.list, false)
	d, err := cp.converge(cp.cli)
	cp.result.Convergence = d
	if err != nil {
		cp.violation(fmt.Sprintf("the agents did not converge to the list %v within %s after the faults stopped: %v", cp.list, convergeWithin, err))
	}
	w.halt()
	cp.finalReads(cp.cli, hist)
	ops := hist.operations()
	if rev := lastWrite(ops); !watched.caughtUp(rev, 30*time.Second) {
		cp.violation(fmt.Sprintf("the watch did not deliver the last acknowledged write (revision %d) within 30s", rev))
	}
	stopWatch()
	<-watched.done
	cp.obs.stop()

	cp.result.Operations = len(ops)
	for _, op := range ops {
		if op.Output.(output).Unknown {
			cp.result.Unknown++
		}
	}
	for n := 1; n <= hosts; n++ {
		cp.result.MembershipChanges += cp.c.Agent(n).CountLog("membership change", map[string]string{"outcome": "done"})
	}
	cp.check(ops, w, watched, cp.obs)
	if len(cp.result.Violations) > 0 {
		cp.keep(ops)
	}
	return cp.result
}

// lastWrite is the revision of the last acknowledged write.
func lastWrite(ops []porcupine.Operation) int64 {
	var rev int64
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		if !out.Unknown && (in.Kind == opPut || in.Kind == opCAS && out.Succeeded || in.Kind == opDelete && out.Deleted) {
			rev = max(rev, out.Revision)
		}
	}
	return rev
}

// client is a client of the given hosts' members, from the clients'
// namespace, with the cluster's client certificate.
func (cp *campaign) client(ns []int) *clientv3.Client {
	cp.t.Helper()
	tlsConfig, err := cp.c.Opts.TLS.ClientConfig()
	if err != nil {
		cp.t.Fatal(err)
	}
	var eps []string
	for _, n := range ns {
		eps = append(eps, cp.c.ClientURL(n))
	}
	cli, err := newClient(eps, tlsConfig, cp.ns(clientNS))
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (cp *campaign) allHosts() []int { return []int{1, 2, 3, 4, 5} }

// converge waits until the members are the listed hosts, all voters, and
// every one answers with one leader and one cluster ID.
func (cp *campaign) converge(cli *clientv3.Client) (time.Duration, error) {
	return eventually.Within(convergeWithin, 200*time.Millisecond, func() error { return cp.converged(cli) })
}

func (cp *campaign) converged(cli *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, m := range resp.Members {
		if m.IsLearner {
			return fmt.Errorf("%s is a learner", m.Name)
		}
		names = append(names, m.Name)
	}
	var want []string
	for _, n := range cp.list {
		want = append(want, cp.c.Name(n))
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		return fmt.Errorf("members %v, want %v", names, want)
	}
	var leader uint64
	for _, n := range cp.list {
		st, err := cli.Status(ctx, cp.c.ClientURL(n))
		if err != nil {
			return fmt.Errorf("%s: %w", cp.c.Name(n), err)
		}
		if st.Header.ClusterId != resp.Header.ClusterId {
			return fmt.Errorf("%s answers for cluster %x, the list for %x", cp.c.Name(n), st.Header.ClusterId, resp.Header.ClusterId)
		}
		if leader == 0 {
			leader = st.Leader
		}
		if st.Leader == 0 || st.Leader != leader {
			return fmt.Errorf("%s has leader %x, another %x", cp.c.Name(n), st.Leader, leader)
		}
	}
	return nil
}

// finalReads reads every key once the clients stopped, with retries: the
// history ends with what the cluster holds.
func (cp *campaign) finalReads(cli *clientv3.Client, hist *history) {
	for _, v := range readKeys(cli, hist, clients) {
		cp.violation(v)
	}
}

// readKeys reads every key once more, as client, each read retried for
// up to 10s, and returns the keys it could not read.
func readKeys(cli *clientv3.Client, hist *history, client int) []string {
	var failed []string
	for i := range keys {
		in := input{Kind: opGet, Key: key(i)}
		for attempt := 0; ; attempt++ {
			call := hist.now()
			out := do(cli, in)
			if !out.Unknown {
				hist.add(client, in, call, out)
				break
			}
			if attempt == 20 {
				failed = append(failed, fmt.Sprintf("the final read of %s failed 20 times", in.Key))
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return failed
}

func (cp *campaign) violation(v string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.problems = append(cp.problems, v)
	cp.t.Errorf("violation: %s", v)
}

// check runs the checks over what the campaign recorded.
func (cp *campaign) check(ops []porcupine.Operation, w *workload, watched *watcher, obs *observer) {
	// porcupine's search grows with the history, and a long campaign's is
	// long: a quarter of the faults' time, at least five minutes.
	timeout := max(5*time.Minute, cp.opts.Duration/4)
	began := time.Now()
	result, info := checkLinearizable(ops, timeout)
	cp.t.Logf("linearizability of %d operations checked in %s", len(ops), time.Since(began).Round(time.Millisecond))
	switch result {
	case porcupine.Illegal:
		cp.violation(fmt.Sprintf("the client history (%d operations) is not linearizable; the visualization is kept", len(ops)))
		cp.keepVisualization(info)
	case porcupine.Unknown:
		cp.violation(fmt.Sprintf("the linearizability check of %d operations did not finish within %s", len(ops), timeout))
	}
	if p := revisionWentBack(ops); p != "" {
		cp.violation("revision went backwards: " + p)
	}
	for _, p := range watched.check(w.acked) {
		cp.violation(p)
	}
	for _, p := range obs.check() {
		cp.violation(p)
	}
	for _, p := range cp.delays.check() {
		cp.violation(p)
	}
	cp.mu.Lock()
	cp.result.Violations = slices.Clone(cp.problems)
	cp.mu.Unlock()
}

// summary is the report a person reads.
func (r Result) summary(opts Options) string {
	var b strings.Builder
	kinds := slices.Sorted(maps.Keys(r.Faults))
	total := 0
	for _, k := range kinds {
		total += r.Faults[k]
	}
	fmt.Fprintf(&b, "campaign seed %d, the list from the %s: %d faults (", opts.Seed, map[string]string{SourceFile: "members files", SourceResource: "Etcd resource"}[opts.Source], total)
	for i, k := range kinds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, r.Faults[k])
	}
	fmt.Fprintf(&b, "), %d list changes, %d membership changes made by the agents, %d client operations checked (%d with an unknown outcome), quorum back at most %s after a fault healed, converged %s after the faults stopped, %d writer-lock holders paused past their lease, %d agents exited on a full disk, %d moved-aside data dirs pruned, %d wipes skipped, %d violations",
		r.ListChanges, r.MembershipChanges, r.Operations, r.Unknown, r.LongestQuorumLoss.Round(time.Millisecond), r.Convergence.Round(time.Millisecond), r.HoldersPaused, r.ExitsOnFullDisk, r.MovedAsidePruned, r.WipesSkipped, len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n  violation: %s", v)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(&b, "\n  replay: %s", opts.Replay)
	}
	return b.String()
}

// signal sends sig to agent n's process.
func (cp *campaign) signal(n int, sig syscall.Signal) { cp.c.Agent(n).Signal(sig) }
