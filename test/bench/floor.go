package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
	"github.com/etcdlet/etcdlet/test/harness"
)

// The floor is what the membership changes cost without an agent: plain
// etcd processes running the same embedded etcd configuration etcdlet
// builds, and a watch (fsnotify) on the same kind of members file that,
// on the write's event, issues the etcd calls an ideal agent would:
// MemberAddAsLearner, hand the fourth process its spec, MemberPromote
// every 10ms until etcd allows it; or MemberRemove. No validation, no
// lock, no settle, no look at the cluster first.

// memberEnv marks a re-executed floor member process.
const memberEnv = "ETCDLET_BENCH_MEMBER"

// runMember is a plain embedded etcd process: it reads its spec from stdin
// (so it can be started ahead and told to run later, like an idle agent),
// runs etcd with the same configuration the embedded runtime builds, and
// exits on SIGTERM or when etcd stops (its member was removed).
func runMember() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "bench member:", err)
		os.Exit(1)
	}
	var spec runtime.Spec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		fail(fmt.Errorf("read spec: %w", err))
	}
	e, err := embedded.Start(spec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fail(err)
	}
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
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// floorCluster is the floor's nodes, their etcd processes, and its
// members file (the harness cluster gives addresses, ports and the file
// writer, the same as the agents').
type floorCluster struct {
	t      *tb
	self   string
	c      *harness.Cluster
	scheme identity.Scheme
	cli    *clientv3.Client

	mu        sync.Mutex
	procs     map[int]*floorMember     // node -> its etcd process
	ids       map[int]uint64           // node -> its member ID while a member
	clients   map[int]*clientv3.Client // node -> a client of its endpoint alone
	iteration int                      // names fresh data dirs
}

// node returns a client of node n's endpoint alone, dialed once.
func (f *floorCluster) node(n int) *clientv3.Client {
	if c, ok := f.clients[n]; ok {
		return c
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{f.c.ClientURL(n)}, DialTimeout: time.Second, Logger: zap.NewNop()})
	f.t.check(err, "floor: client of one node")
	f.t.Cleanup(func() { c.Close() })
	f.clients[n] = c
	return c
}

// staying is a member other than n.
func (f *floorCluster) staying(n int) int {
	for m := 1; m <= nodes; m++ {
		if m != n && f.ids[m] != 0 {
			return m
		}
	}
	f.t.Fatalf("floor: no member but node %d", n)
	return 0
}

// prestart starts a member process that waits for its spec.
func (f *floorCluster) prestart() *floorMember {
	cmd := exec.Command(f.self)
	cmd.Env = append(os.Environ(), memberEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	f.t.check(err, "floor member")
	f.t.check(cmd.Start(), "start a floor member")
	m := &floorMember{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		if err := cmd.Wait(); err != nil && !errors.Is(err, os.ErrProcessDone) && stderr.Len() > 0 {
			fmt.Fprintf(os.Stderr, "floor member %d: %v: %s", cmd.Process.Pid, err, stderr.String())
		}
		close(m.done)
	}()
	f.t.Cleanup(m.stop)
	return m
}

// run hands a member its spec: from here on it is the same server an agent
// would run.
func (f *floorCluster) run(m *floorMember, spec runtime.Spec) {
	f.t.check(json.NewEncoder(m.stdin).Encode(spec), "hand a floor member its spec")
}

func (m *floorMember) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

func (f *floorCluster) spec(n int, initialCluster, state string, iteration int) runtime.Spec {
	self := f.scheme.For(mustAddr(f.c.IP(n)))
	return runtime.Spec{
		Name: self.Name, DataDir: filepath.Join(f.c.Dir, fmt.Sprintf("n%d-%d", n, iteration)),
		AdvertisePeerURL: self.PeerURL, AdvertiseClientURL: self.ClientURL,
		ListenPeerURLs: []string{self.PeerURL}, ListenClientURLs: []string{self.ClientURL},
		ListenMetricsURL:    "http://" + net.JoinHostPort(f.c.IP(n), strconv.Itoa(f.c.Ports.Metrics)),
		InitialCluster:      initialCluster,
		InitialClusterState: state, Token: "etcd-main", LogLevel: "warn",
	}
}

// measureFloor runs the floor through the same cycles as the agents,
// timed the same way: from the members-file write to the same observation.
// Then it measures the idle cost of the three members.
func measureFloor(t *tb, dir string, runs, keyspace int, idle time.Duration) (membershipFigures, usage) {
	self, err := os.Executable()
	t.check(err, "find the benchmark's own executable")
	c := harness.NewCluster(t, "", dir, harness.Options{Net: netFloor, Insecure: "the floor is plain embedded etcd"})
	f := &floorCluster{t: t, self: self, c: c, procs: map[int]*floorMember{}, ids: map[int]uint64{}, clients: map[int]*clientv3.Client{},
		scheme: identity.Scheme{Cluster: "etcd-main", PeerScheme: "http", ClientScheme: "http", PeerPort: c.Ports.Peer, ClientPort: c.Ports.Client}}

	initial := identity.InitialCluster(f.scheme.ForAll([]netip.Addr{mustAddr(c.IP(1)), mustAddr(c.IP(2)), mustAddr(c.IP(3))}))
	for n := 1; n <= 3; n++ {
		f.procs[n] = f.prestart()
		f.run(f.procs[n], f.spec(n, initial, runtime.StateNew, 0))
	}
	f.cli, err = clientv3.New(clientv3.Config{Endpoints: clientURLs(c), DialTimeout: time.Second, Logger: zap.NewNop()})
	t.check(err, "floor etcd client")
	t.Cleanup(func() { f.cli.Close() })
	obs := newObserver(t, clientURLs(c))
	obs.waitVoters(3)
	f.learnIDs()
	fillKeyspace(t, obs, keyspace)
	c.WriteMembers(1, 2, 3)

	// The controller: on each event of the members file, add the nodes
	// that are new to it, then remove those it no longer lists (a
	// replacement adds first, as etcdlet does: the cluster never has fewer
	// voters than before).
	listed := map[int]bool{1: true, 2: true, 3: true}
	stopWatch := watchMembersFile(t, c.Members, func(list []string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for n := 1; n <= nodes; n++ {
			if slices.Contains(list, c.IP(n)) && !listed[n] {
				listed[n] = true
				f.add(n)
			}
		}
		for n := 1; n <= nodes; n++ {
			if !slices.Contains(list, c.IP(n)) && listed[n] {
				listed[n] = false
				f.remove(n)
			}
		}
	})
	defer stopWatch()

	cy := &cycle{t: t, c: c, obs: obs, write: c.WriteMembers,
		pid: func(n int) int {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.procs[n].cmd.Process.Pid
		},
		prepare: func(joining int) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.iteration++
			f.procs[joining] = f.prestart()
		},
		settled: func(left int) {
			f.mu.Lock()
			m := f.procs[left]
			f.mu.Unlock()
			// etcd stops a removed member's server: its process exits.
			select {
			case <-m.done:
			case <-time.After(changeDeadline):
				t.Fatalf("floor: the removed member's process did not exit within %s", changeDeadline)
			}
		}}
	fig := cy.run(runs, "floor")

	time.Sleep(warmDown)
	var pids []int
	f.mu.Lock()
	for n, listedNow := range listed {
		if listedNow {
			pids = append(pids, f.procs[n].cmd.Process.Pid)
		}
	}
	f.mu.Unlock()
	return fig, idleUsage(t, pids, idle)
}

// learnIDs records the member IDs of the bootstrapped members.
func (f *floorCluster) learnIDs() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := f.cli.MemberList(ctx)
	f.t.check(err, "floor: member list")
	for _, m := range resp.Members {
		for n := 1; n <= nodes; n++ {
			if slices.Contains(m.PeerURLs, f.c.PeerURL(n)) {
				f.ids[n] = m.ID
			}
		}
	}
}

// add adds node n as a learner, starts its pre-started process, and
// promotes it as soon as etcd allows.
func (f *floorCluster) add(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	added, err := f.cli.MemberAddAsLearner(ctx, []string{f.c.PeerURL(n)})
	cancel()
	f.t.check(err, "floor: add learner")
	var parts []string
	for _, m := range added.Members {
		name := m.Name
		if m.ID == added.Member.ID {
			name = f.scheme.For(mustAddr(f.c.IP(n))).Name
		}
		parts = append(parts, name+"="+m.PeerURLs[0])
	}
	f.run(f.procs[n], f.spec(n, strings.Join(parts, ","), runtime.StateExisting, f.iteration))
	f.ids[n] = added.Member.ID
	deadline := time.Now().Add(changeDeadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := f.cli.MemberPromote(ctx, added.Member.ID)
		cancel()
		// A promote the client retried after it applied answers "not a
		// learner": done all the same.
		if err == nil || sameError(err, rpctypes.ErrGRPCMemberNotLearner) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("floor: the learner was not promoted within %s: %v", changeDeadline, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// remove removes node n through a member that stays; a leader first hands
// leadership to such a member, as etcdlet does.
func (f *floorCluster) remove(n int) {
	id, to := f.ids[n], f.staying(n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	s, err := f.node(n).Status(ctx, f.c.ClientURL(n))
	cancel()
	if err == nil && s.Leader == id {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := f.node(n).MoveLeader(ctx, f.ids[to])
		cancel()
		f.t.check(err, "floor: move leader")
	}
	deadline := time.Now().Add(changeDeadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := f.node(to).MemberRemove(ctx, id)
		cancel()
		// A removal the client retried after it applied answers "member
		// not found": done all the same.
		if err == nil || sameError(err, rpctypes.ErrGRPCMemberNotFound) {
			f.ids[n] = 0
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("floor: the member was not removed within %s: %v", changeDeadline, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sameError compares by description, as etcdlet's error table does: the
// client reports an etcd error as an rpctypes error or as a gRPC status.
func sameError(err, want error) bool { return rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(want) }

// watchMembersFile calls onList with the file's addresses after every
// event on it (its directory is watched: the file is replaced by rename).
// It returns a function that stops the watch.
func watchMembersFile(t *tb, path string, onList func([]string)) func() {
	w, err := fsnotify.NewWatcher()
	t.check(err, "floor: watch the members file")
	t.check(w.Add(filepath.Dir(path)), "floor: watch the members file's directory")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Name != path || !ev.Has(fsnotify.Create|fsnotify.Write) {
					continue
				}
				data, err := os.ReadFile(path)
				if err != nil {
					continue // replaced again meanwhile; its own event follows
				}
				onList(parseList(data))
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				t.Fatalf("floor: members file watch: %v", err)
			}
		}
	}()
	return func() { w.Close(); <-done }
}

// parseList reads one address per line, skipping blanks and comments.
func parseList(data []byte) []string {
	var list []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			list = append(list, line)
		}
	}
	return list
}
