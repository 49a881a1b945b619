package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
	"github.com/etcdlet/etcdlet/test/harness"
)

// memberEnv marks a re-executed floor member process.
const memberEnv = "ETCDLET_BENCH_MEMBER"

// runMember is a plain embedded etcd process: it reads its spec from stdin
// (so it can be started ahead and told to run later, like an idle agent),
// runs etcd with the same configuration the embedded runtime builds, and
// exits on SIGTERM or when etcd stops (its member was removed).
func runMember() {
	var spec runtime.Spec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		fmt.Fprintln(os.Stderr, "member: read spec:", err)
		os.Exit(1)
	}
	cfg, err := embedded.Config(spec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	check(err)
	e, err := embed.StartEtcd(cfg)
	check(err)
	sig := make(chan os.Signal, 1)
	signalNotify(sig)
	select {
	case <-sig:
	case <-e.Server.StopNotify():
	}
	e.Close()
}

// floorMember is one plain etcd process of the floor cluster.
type floorMember struct {
	ip    string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

type floorCluster struct {
	t      *tb
	self   string
	dir    string
	ports  [3]int // client, peer, metrics
	scheme identity.Scheme
}

func (f *floorCluster) ip(n int) string { return fmt.Sprintf("127.0.%d.%d", benchNet+1, n) }

func (f *floorCluster) member(n int) identity.Member {
	return f.scheme.For(mustAddr(f.ip(n)))
}

// prestart starts a member process that waits for its spec.
func (f *floorCluster) prestart(n int) *floorMember {
	cmd := exec.Command(f.self)
	cmd.Env = append(os.Environ(), memberEnv+"=1")
	stdin, err := cmd.StdinPipe()
	check(err)
	check(cmd.Start())
	m := &floorMember{ip: f.ip(n), cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.done) }()
	f.t.Cleanup(func() { m.stop() })
	return m
}

// run hands a member its spec: from here on it is the same server an agent
// would run.
func (f *floorMember) run(spec runtime.Spec) {
	check(json.NewEncoder(f.stdin).Encode(spec))
}

func (f *floorMember) stop() {
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.done
	}
}

func (f *floorCluster) spec(n int, initialCluster, state string, iteration int) runtime.Spec {
	self := f.member(n)
	return runtime.Spec{
		Name: self.Name, DataDir: filepath.Join(f.dir, fmt.Sprintf("n%d-%d", n, iteration)),
		AdvertisePeerURL: self.PeerURL, AdvertiseClientURL: self.ClientURL,
		ListenPeerURLs: []string{self.PeerURL}, ListenClientURLs: []string{self.ClientURL},
		ListenMetricsURL:    "http://" + net.JoinHostPort(f.ip(n), strconv.Itoa(f.ports[2])),
		InitialCluster:      initialCluster,
		InitialClusterState: state, Token: "etcd-main", LogLevel: "warn",
	}
}

// measureFloor issues the same membership calls directly.
func measureFloor(dir string, runs int, idle time.Duration) figures {
	t := &tb{}
	defer t.cleanup()
	self, err := os.Executable()
	check(err)
	f := &floorCluster{t: t, self: self, dir: dir}
	c := harness.NewCluster(t, "", dir, harness.Options{Net: benchNet + 1}) // only for free ports
	f.ports = [3]int{c.Ports.Client, c.Ports.Peer, c.Ports.Metrics}
	f.scheme = identity.Scheme{Cluster: "etcd-main", PeerScheme: "http", ClientScheme: "http", PeerPort: f.ports[1], ClientPort: f.ports[0]}

	initial := identity.InitialCluster([]identity.Member{f.member(1), f.member(2), f.member(3)})
	var members []*floorMember
	for n := 1; n <= 3; n++ {
		m := f.prestart(n)
		m.run(f.spec(n, initial, runtime.StateNew, 0))
		members = append(members, m)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.member(1).ClientURL, f.member(2).ClientURL, f.member(3).ClientURL},
		DialTimeout: time.Second, Logger: zap.NewNop()})
	check(err)
	defer cli.Close()
	waitVoters(t, cli, 3)
	time.Sleep(6 * time.Second) // as for the agents: etcd's 5s connectivity rule

	var fig figures
	for i := 0; i < runs; i++ {
		fourth := f.prestart(4)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		added, err := cli.MemberAddAsLearner(ctx, []string{f.member(4).PeerURL})
		cancel()
		if err != nil {
			check(fmt.Errorf("floor: add learner: %w", err))
		}
		var parts []string
		for _, m := range added.Members {
			name := m.Name
			if m.ID == added.Member.ID {
				name = f.member(4).Name
			}
			parts = append(parts, name+"="+m.PeerURLs[0])
		}
		fourth.run(f.spec(4, strings.Join(parts, ","), runtime.StateExisting, i+1))
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := cli.MemberPromote(ctx, added.Member.ID)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		waitMember(t, cli, f.member(4).Name, func(m *memberState) bool { return m != nil && !m.learner })
		fig.join = append(fig.join, time.Since(start))
		waitVoters(t, cli, 4)

		start = time.Now()
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cli.MemberRemove(ctx, added.Member.ID)
		cancel()
		// A call retried by the client after it applied answers "member
		// not found", as an rpctypes error or as a gRPC status: compare
		// the description, as the agent's error table does.
		if err != nil && rpctypes.ErrorDesc(err) != rpctypes.ErrorDesc(rpctypes.ErrGRPCMemberNotFound) {
			check(fmt.Errorf("floor: remove: %w", err))
		}
		waitMember(t, cli, f.member(4).Name, func(m *memberState) bool { return m == nil })
		fig.leave = append(fig.leave, time.Since(start))
		fourth.stop()
		fmt.Printf("  floor run %d: join %s, leave %s\n", i+1, round(fig.join[i]), round(fig.leave[i]))
	}
	var pids []int
	for _, m := range members {
		pids = append(pids, m.cmd.Process.Pid)
	}
	fig.cpu, fig.rss = idleUsage(t, pids, idle)
	return fig
}

// waitVoters waits until n members are started voters.
func waitVoters(t *tb, cli *clientv3.Client, n int) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := cli.MemberList(ctx)
		cancel()
		if err == nil && len(resp.Members) == n {
			ready := true
			for _, m := range resp.Members {
				ready = ready && !m.IsLearner && len(m.ClientURLs) > 0
			}
			if ready {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("floor cluster did not reach %d voters", n)
}

// idleUsage samples CPU time and RSS of processes over a window.
func idleUsage(t *tb, pids []int, window time.Duration) ([]float64, []int64) {
	before := make([]float64, len(pids))
	for i, pid := range pids {
		before[i] = cpuSeconds(t, pid)
	}
	time.Sleep(window)
	cpu := make([]float64, len(pids))
	rss := make([]int64, len(pids))
	for i, pid := range pids {
		cpu[i] = 100 * (cpuSeconds(t, pid) - before[i]) / window.Seconds()
		rss[i] = rssBytes(t, pid)
	}
	return cpu, rss
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on Linux.
const clockTicks = 100

func cpuSeconds(t *tb, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read stat of %d: %v", pid, err)
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks
}

func rssBytes(t *tb, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read status of %d: %v", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb * 1024
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}
