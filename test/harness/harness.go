// Package harness runs etcdlet agents as real processes for the end-to-end
// tests and the benchmark: each agent is the built binary with embedded
// etcd on its own 127.0.x.y address, sharing one members file, as several
// hosts would share an externally managed list.
package harness

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/eventually"
)

// TB is the part of testing.TB the harness needs, so the benchmark
// program can drive it too.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	Failed() bool
}

var _ TB = (testing.TB)(nil)

// BuildBinary compiles ./cmd/etcdlet into dir and returns its path.
func BuildBinary(dir string) (string, error) { return Build(dir, "./cmd/etcdlet") }

// Build builds the repository's command pkg (./cmd/etcdlet, say) into dir
// and returns the binary's path.
func Build(dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// RepoRoot is the repository root (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// The raft timing every test cluster's members run with, written into
// their configuration (etcd.extraArgs) so that a test can derive its
// bounds from it: etcd's own defaults.
const (
	HeartbeatInterval = 100 * time.Millisecond
	ElectionTimeout   = time.Second
)

// Options shape a cluster's configuration.
type Options struct {
	// Net is the third byte of the agents' 127.0.<Net>.<n> addresses; give
	// every test its own so that tests never share an address.
	Net int
	// Replicas sets cluster.replicas when non-zero.
	Replicas int
	// TLS, when set, gives the certificates for peer and client traffic.
	// Without it (and without Insecure), NewCluster issues a CA and
	// certificates for every address of the cluster: every test cluster is
	// secured, as etcdlet requires off loopback.
	TLS *TLSFiles
	// Insecure, when set, runs the cluster without TLS; it says why the
	// test needs plaintext. Off loopback it sets etcd.insecure.
	Insecure string
	// ReconcileInterval defaults to 2s.
	ReconcileInterval time.Duration
	// IdleInterval defaults to ReconcileInterval: the agents keep passing
	// at that interval when settled. Tests that wait for an agent to
	// notice what no event announces (a member killed behind its back)
	// then wait as long as they always did; TestIdleAgentsSlowDown and the
	// benchmark (Defaults) run with a longer one.
	IdleInterval time.Duration
	// Defaults runs the agents with etcdlet's own defaults for the agent
	// settings that shape its speed and cost (agent.reconcileInterval,
	// agent.idleInterval, agent.logLevel, agent.logFormat), as the
	// benchmark does; ReconcileInterval and IdleInterval are then ignored. Logs are JSON all the same:
	// logFormat auto writes JSON when the output is not a terminal.
	Defaults bool
	// Addr, when set, gives agent n's address instead of 127.0.<Net>.<n>.
	Addr func(n int) string
	// DetectAddress leaves node.address empty: agents detect it.
	DetectAddress bool
	// Wrap, when set, returns the command line that runs etcdlet for agent
	// n, e.g. inside a network namespace.
	Wrap func(n int, argv []string) []string
	// Ports, when set, are used as they are (addresses in namespaces the
	// host cannot probe).
	Ports *Ports
	// Dial, when set, is how the test's etcd clients (Client, ClientOf)
	// reach the agents' addresses, e.g. inside their network namespaces.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Extra is appended to every agent's configuration (more top-level
	// sections, e.g. "pacemaker:").
	Extra string
	// ExtraFor, when set, is appended to agent n's configuration after Extra.
	ExtraFor func(n int) string
	// EtcdArgs, when set, gives more etcd.extraArgs for agent n's member.
	EtcdArgs func(n int) map[string]string
	// EtcdConfig and AgentConfig are YAML lines added to every agent's
	// etcd and agent sections (indented by two spaces, e.g.
	// "  moveAsideLimit: 2\n").
	EtcdConfig, AgentConfig string
	// Env, when set, gives extra environment for agent n's process.
	Env func(n int) []string
	// Members, when set, replaces the members section (the members file
	// is then unused), e.g. "members:\n  source: etcd-resource\n".
	Members string
	// StaticPod runs the agents with etcd.runtime static-pod; each node
	// gets a Kubelet that runs the manifest's etcd with this binary.
	StaticPod string
	// StaticPodImage, when set, is agent n's staticPod.image ("": the
	// default), and EtcdForImage the binary that runs an image (""
	// for StaticPod): etcd releases of other minors stand for their
	// images.
	StaticPodImage func(n int) string
	EtcdForImage   func(image string) string
	// OwnLists gives every agent a members file of its own (MembersOf),
	// as hosts have: WriteMembers writes them all at once, WriteMembersOn
	// some of them, so that a list change can reach the hosts one after
	// another.
	OwnLists bool
	// Bootstrap is cluster.bootstrap. Empty: consent, for the fresh agents
	// of most tests form their cluster by themselves; "explicit" (etcdlet's
	// own default) makes a new cluster wait for an operator's act. With
	// members.source etcd-resource it is left out (never).
	Bootstrap string
	// Founder, when non-zero, names agent Founder's address in
	// cluster.founder (with Bootstrap "explicit").
	Founder int
}

// Cluster is a set of agents sharing a members file.
type Cluster struct {
	t       TB
	Binary  string
	Dir     string
	Opts    Options
	Ports   Ports
	Members string // path of the members file

	mu       sync.Mutex
	agents   map[int]*Agent
	kubelets map[int]*Kubelet
}

// Ports are shared by every agent of a cluster (one address each).
// AgentPeer is the agent peer endpoint (agent.peerPort).
type Ports struct{ Client, Peer, Metrics, Agent, AgentPeer int }

// NewCluster prepares a cluster directory and free ports; no agent runs yet.
func NewCluster(t TB, binary, dir string, opts Options) *Cluster {
	t.Helper()
	if opts.ReconcileInterval == 0 {
		opts.ReconcileInterval = 2 * time.Second
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("%v", err)
	}
	c := &Cluster{t: t, Binary: binary, Dir: dir, Opts: opts, Members: filepath.Join(dir, "members"), agents: map[int]*Agent{}, kubelets: map[int]*Kubelet{}}
	if opts.TLS == nil && opts.Insecure == "" {
		ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		for n := 1; n <= 9; n++ {
			ips = append(ips, net.ParseIP(c.IP(n)))
		}
		files, err := GenerateTLS(filepath.Join(dir, "pki"), ips)
		if err != nil {
			t.Fatalf("issue test certificates: %v", err)
		}
		c.Opts.TLS = files
	}
	if opts.Ports != nil {
		c.Ports = *opts.Ports
	} else {
		ips := make([]string, 0, 9)
		for n := 1; n <= 9; n++ {
			ips = append(ips, c.IP(n))
		}
		c.Ports = freePorts(t, ips)
	}
	t.Cleanup(c.StopAll)
	return c
}

// IP returns the address of agent n: 127.0.<Net>.<n> unless Options.Addr
// says otherwise.
func (c *Cluster) IP(n int) string {
	if c.Opts.Addr != nil {
		return c.Opts.Addr(n)
	}
	return fmt.Sprintf("127.0.%d.%d", c.Opts.Net, n)
}

// LocalIP is where agent n's metrics and agent listeners are: its own
// address when that is a loopback address (several agents share the
// host's loopback), else 127.0.0.1, inside the agent's own network
// namespace, as etcdlet requires of listeners without client certificates.
func (c *Cluster) LocalIP(n int) string {
	if ip := net.ParseIP(c.IP(n)); ip != nil && ip.IsLoopback() {
		return c.IP(n)
	}
	return "127.0.0.1"
}

// loopback reports whether every address the cluster may use is a
// loopback address.
func (c *Cluster) loopback() bool {
	for n := 1; n <= 9; n++ {
		if ip := net.ParseIP(c.IP(n)); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// ClusterName is every test cluster's cluster.name.
const ClusterName = "etcd-main"

// Name is agent n's member name.
func (c *Cluster) Name(n int) string { return ClusterName + "-" + c.IP(n) }

// ClientURL is agent n's client URL.
func (c *Cluster) ClientURL(n int) string {
	scheme := "http"
	if c.Opts.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(c.IP(n), strconv.Itoa(c.Ports.Client))
}

// DataDir is agent n's etcd data dir.
func (c *Cluster) DataDir(n int) string { return filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "data") }

// StateDir is node n's agent.stateDir.
func (c *Cluster) StateDir(n int) string { return filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "state") }

// ManifestDir is agent n's kubelet manifest dir (static-pod runtime).
func (c *Cluster) ManifestDir(n int) string {
	return filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "manifests")
}

// Kubelet returns node n's kubelet stand-in, starting it on first use.
func (c *Cluster) Kubelet(n int) *Kubelet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.kubelets[n]; ok {
		return k
	}
	etcdFor := func(image string) string {
		if c.Opts.EtcdForImage != nil {
			if bin := c.Opts.EtcdForImage(image); bin != "" {
				return bin
			}
		}
		return c.Opts.StaticPod
	}
	k := StartKubelet(c.t, c.ManifestDir(n), etcdFor, filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "etcd.log"))
	c.kubelets[n] = k
	return k
}

// ConfigPath is agent n's configuration file.
func (c *Cluster) ConfigPath(n int) string {
	return filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "config.yaml")
}

// WriteMembers replaces the members file atomically (write, rename), the
// way an external tool updates it; with OwnLists, every agent's.
func (c *Cluster) WriteMembers(ns ...int) {
	c.t.Helper()
	if !c.Opts.OwnLists {
		c.WriteMembersRaw(membersContent(c, ns))
		return
	}
	c.WriteMembersOn(seq9(), ns...)
}

// WriteMembersOn writes the list ns into the members files of the agents
// hosts (OwnLists): a list change reaching some hosts only.
func (c *Cluster) WriteMembersOn(hosts []int, ns ...int) {
	c.t.Helper()
	if !c.Opts.OwnLists {
		c.t.Fatalf("WriteMembersOn needs Options.OwnLists")
	}
	for _, h := range hosts {
		writeAtomically(c.t, c.MembersOf(h), membersContent(c, ns))
	}
}

// MembersOf is agent n's members file: its own with OwnLists, else the
// shared one.
func (c *Cluster) MembersOf(n int) string {
	if c.Opts.OwnLists {
		return filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "members")
	}
	return c.Members
}

func membersContent(c *Cluster, ns []int) string {
	var b strings.Builder
	b.WriteString("# written by the test harness\n")
	for _, n := range ns {
		b.WriteString(c.IP(n) + "\n")
	}
	return b.String()
}

func seq9() []int { return []int{1, 2, 3, 4, 5, 6, 7, 8, 9} }

// WriteMembersRaw writes arbitrary content to the members file atomically.
func (c *Cluster) WriteMembersRaw(content string) {
	c.t.Helper()
	writeAtomically(c.t, c.Members, content)
}

// WriteMembersRawOn writes arbitrary content to the members files of the
// agents hosts (OwnLists).
func (c *Cluster) WriteMembersRawOn(hosts []int, content string) {
	c.t.Helper()
	for _, h := range hosts {
		writeAtomically(c.t, c.MembersOf(h), content)
	}
}

func writeAtomically(t TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatalf("write members file: %v", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatalf("write members file: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("write members file: %v", err)
	}
}

// WriteConfig writes agent n's configuration file.
func (c *Cluster) WriteConfig(n int) {
	c.t.Helper()
	if err := os.MkdirAll(filepath.Dir(c.ConfigPath(n)), 0o700); err != nil {
		c.t.Fatalf("%v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster:\n  name: %s\n", ClusterName)
	if c.Opts.Replicas > 0 {
		fmt.Fprintf(&b, "  replicas: %d\n", c.Opts.Replicas)
	}
	switch {
	case strings.Contains(c.Opts.Members, "etcd-resource"):
	case c.Opts.Bootstrap == "":
		b.WriteString("  bootstrap: consent\n")
	default:
		fmt.Fprintf(&b, "  bootstrap: %s\n", c.Opts.Bootstrap)
	}
	if c.Opts.Founder > 0 {
		fmt.Fprintf(&b, "  founder: %s\n", c.IP(c.Opts.Founder))
	}
	if c.Opts.Members != "" {
		b.WriteString(c.Opts.Members)
	} else {
		fmt.Fprintf(&b, "members:\n  source: file\n  file: %s\n", c.MembersOf(n))
	}
	if !c.Opts.DetectAddress {
		fmt.Fprintf(&b, "node:\n  address: %s\n", c.IP(n))
	}
	if c.Opts.StaticPod != "" {
		fmt.Fprintf(&b, "staticPod:\n  manifestDir: %s\n", c.ManifestDir(n))
		if c.Opts.StaticPodImage != nil && c.Opts.StaticPodImage(n) != "" {
			fmt.Fprintf(&b, "  image: %s\n", c.Opts.StaticPodImage(n))
		}
	}
	fmt.Fprintf(&b, "etcd:\n  dataDir: %s\n  clientPort: %d\n  peerPort: %d\n  listenMetricsURL: http://%s\n  logLevel: warn\n",
		c.DataDir(n), c.Ports.Client, c.Ports.Peer, net.JoinHostPort(c.LocalIP(n), strconv.Itoa(c.Ports.Metrics)))
	if c.Opts.StaticPod != "" {
		b.WriteString("  runtime: static-pod\n")
	}
	args := map[string]string{}
	if !c.Opts.Defaults {
		args["heartbeat-interval"] = strconv.FormatInt(HeartbeatInterval.Milliseconds(), 10)
		args["election-timeout"] = strconv.FormatInt(ElectionTimeout.Milliseconds(), 10)
	}
	if c.Opts.EtcdArgs != nil {
		maps.Copy(args, c.Opts.EtcdArgs(n))
	}
	if len(args) > 0 {
		b.WriteString("  extraArgs:\n")
		for _, k := range slices.Sorted(maps.Keys(args)) {
			fmt.Fprintf(&b, "    %s: %q\n", k, args[k])
		}
	}
	if tls := c.Opts.TLS; tls != nil {
		fmt.Fprintf(&b, "  tls:\n    client: {certFile: %s, keyFile: %s, caFile: %s}\n    peer: {certFile: %s, keyFile: %s, caFile: %s}\n",
			tls.ServerCert, tls.ServerKey, tls.CA, tls.ServerCert, tls.ServerKey, tls.CA)
	} else if !c.loopback() {
		fmt.Fprintf(&b, "  insecure: true # %s\n", c.Opts.Insecure)
	}
	b.WriteString(c.Opts.EtcdConfig)
	fmt.Fprintf(&b, "agent:\n  stateDir: %s\n  listen: \"%s\"\n  peerPort: %d\n",
		c.StateDir(n), net.JoinHostPort(c.LocalIP(n), strconv.Itoa(c.Ports.Agent)), c.Ports.AgentPeer)
	if !c.Opts.Defaults {
		fmt.Fprintf(&b, "  reconcileInterval: %s\n  idleInterval: %s\n  logFormat: json\n  logLevel: debug\n",
			c.Opts.ReconcileInterval, cmp.Or(c.Opts.IdleInterval, c.Opts.ReconcileInterval))
	}
	if tls := c.Opts.TLS; tls != nil {
		fmt.Fprintf(&b, "  etcdClientTLS: {certFile: %s, keyFile: %s, caFile: %s}\n", tls.ClientCert, tls.ClientKey, tls.CA)
	}
	b.WriteString(c.Opts.AgentConfig)
	b.WriteString(c.Opts.Extra)
	if c.Opts.ExtraFor != nil {
		b.WriteString(c.Opts.ExtraFor(n))
	}
	if err := os.WriteFile(c.ConfigPath(n), []byte(b.String()), 0o600); err != nil {
		c.t.Fatalf("%v", err)
	}
}

// Start writes agent n's configuration (first time) and starts it.
func (c *Cluster) Start(n int) *Agent {
	c.t.Helper()
	if _, err := os.Stat(c.ConfigPath(n)); err != nil {
		c.WriteConfig(n)
	}
	if c.Opts.StaticPod != "" {
		c.Kubelet(n)
	}
	c.mu.Lock()
	a, ok := c.agents[n]
	if !ok {
		a = &Agent{c: c, N: n, Log: filepath.Join(c.Dir, fmt.Sprintf("n%d", n), "agent.log")}
		c.agents[n] = a
	}
	c.mu.Unlock()
	a.start()
	return a
}

// Agent returns agent n, or nil when it was never started.
func (c *Cluster) Agent(n int) *Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agents[n]
}

// StopAll stops every running agent; on a failed test it first prints the
// tail of each agent's log.
func (c *Cluster) StopAll() {
	c.mu.Lock()
	agents := make([]*Agent, 0, len(c.agents))
	for _, a := range c.agents {
		agents = append(agents, a)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() { a.Stop() })
	}
	wg.Wait()
	if c.t.Failed() {
		for _, a := range agents {
			c.t.Logf("--- tail of agent %d log (%s):\n%s", a.N, a.Log, tail(a.Log, 40))
		}
	}
}

// Eventually waits until cond returns nil, and at the deadline fails the
// test with cond's last error (internal/eventually).
func Eventually(t TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	eventually.Nil(t, timeout, what, cond)
}

// freePorts finds five ports free on every given address.
func freePorts(t TB, ips []string) Ports {
	t.Helper()
	var ports []int
	for attempt := 0; len(ports) < 5 && attempt < 100; attempt++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatalf("find free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		free := true
		for _, ip := range ips {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free && !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	if len(ports) < 5 {
		t.Fatalf("could not find 5 ports free on %v", ips)
	}
	return Ports{Client: ports[0], Peer: ports[1], Metrics: ports[2], Agent: ports[3], AgentPeer: ports[4]}
}

// Tail returns the last lines of a file, or why it cannot be read.
func Tail(path string, lines int) string {
	return tailWhere(path, lines, func(string) bool { return true })
}

// tail is Tail of an agent's log without the embedded etcd's lines.
func tail(path string, lines int) string {
	return tailWhere(path, lines, func(l string) bool { return !strings.Contains(l, `"component":"etcd"`) })
}

// tailWhere returns the last lines of a file that keep accepts.
func tailWhere(path string, lines int, keep func(string) bool) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var all []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if keep(l) {
			all = append(all, l)
		}
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
