package pacemaker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/runner"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// A real two-node corosync + pacemaker cluster, one node per network
// namespace (corosync allows one instance per host, libqb's IPC sockets are
// per network namespace) with private mount, UTS and PID namespaces (state
// directories bind-mounted from a scratch directory, the host name set to
// the node name, and everything a node started dying with it).
//
// Each node runs this test binary as the PID 1 of its PID namespace
// (nodeInit), which starts corosync and pacemakerd. Killing the unshare
// process that created the namespace kills the whole node: that is the
// cleanup, on every path.

const (
	envNodeDir  = "ETCDLET_LIVE_NODE_DIR"
	envNodeName = "ETCDLET_LIVE_NODE_NAME"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envNodeDir); dir != "" {
		os.Exit(nodeInit(dir, os.Getenv(envNodeName)))
	}
	os.Exit(m.Run())
}

// nodeInit runs inside the node's namespaces.
func nodeInit(dir, name string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "node %s: "+format+"\n", append([]any{name}, args...)...)
		return 1
	}
	if err := syscall.Sethostname([]byte(name)); err != nil {
		return fail("sethostname: %v", err)
	}
	for src, dst := range map[string]string{
		"lib": "/var/lib/pacemaker", "corolib": "/var/lib/corosync", "shm": "/dev/shm",
		"log": "/var/log/pacemaker", "run": "/run",
		// Each start of a node is a boot of its own: the two-node
		// failover trusts only what a node saw in its current boot.
		"boot_id": "/proc/sys/kernel/random/boot_id",
	} {
		if err := syscall.Mount(filepath.Join(dir, src), dst, "", syscall.MS_BIND, ""); err != nil {
			return fail("bind mount %s on %s: %v", src, dst, err)
		}
	}
	out, err := os.Create(filepath.Join(dir, "daemons.out"))
	if err != nil {
		return fail("%v", err)
	}
	corosync := exec.Command("corosync", "-f", "-c", filepath.Join(dir, "corosync.conf"))
	corosync.Stdout, corosync.Stderr = out, out
	if err := corosync.Start(); err != nil {
		return fail("start corosync: %v", err)
	}
	// pacemakerd needs a running corosync; wait for its IPC to answer.
	if _, err := eventually.Within(15*time.Second, 100*time.Millisecond, func() error {
		return exec.Command("corosync-cmapctl", "totem.cluster_name").Run()
	}); err != nil {
		return fail("corosync did not come up: %v", err)
	}
	pacemakerd := exec.Command("pacemakerd", "-f")
	pacemakerd.Env = append(os.Environ(), "PCMK_logfile="+filepath.Join(dir, "log", "pacemaker.log"))
	pacemakerd.Stdout, pacemakerd.Stderr = out, out
	if err := pacemakerd.Start(); err != nil {
		return fail("start pacemakerd: %v", err)
	}
	// SIGUSR1 simulates the failure under test: corosync dies hard.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	for range sigs {
		_ = corosync.Process.Kill()
	}
	return 0
}

type liveNode struct {
	name string
	addr string
	dir  string
	// ns is the node's network namespace; it outlives the node's
	// processes (a node powered off keeps its cable).
	ns string
	// veth is its end of the cable to the other node.
	veth    string
	unshare *exec.Cmd
	// initPID is nodeInit's PID as the host sees it; nsenter targets it.
	initPID int
	// down is closed once the node's processes are gone (powerOff).
	down chan struct{}
}

type liveCluster struct {
	nodes [2]*liveNode
	mu    sync.Mutex // guards the nodes' processes (a fencing may power one off)
}

// liveOptions shape a live cluster.
type liveOptions struct {
	// powerOffWhenFenced makes a fencing what it is on real hosts: the
	// moment fence_dummy records an action against a node, its processes
	// are killed (the node stays off until restarted).
	powerOffWhenFenced bool
}

// requireLiveEnvironment fails (never skips) without root or a tool.
func requireLiveEnvironment(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the live pacemaker test needs root (network, mount and PID namespaces): run it as root")
	}
	hints := map[string]string{
		"corosync": "apt-get install -y pacemaker-cli-utils", "pacemakerd": "apt-get install -y pacemaker-cli-utils",
		"crm_mon": "apt-get install -y pacemaker-cli-utils", "cibadmin": "apt-get install -y pacemaker-cli-utils",
		"corosync-cmapctl": "apt-get install -y pacemaker-cli-utils", "fence_dummy": "apt-get install -y pacemaker-cli-utils (fence-agents)",
		"ip": "apt-get install -y iproute2", "unshare": "apt-get install -y util-linux", "nsenter": "apt-get install -y util-linux",
	}
	for tool, hint := range hints {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found in PATH: %s", tool, hint)
		}
	}
	if _, err := user.Lookup("hacluster"); err != nil {
		t.Fatal("user hacluster missing: apt-get install -y pacemaker-cli-utils")
	}
}

// startCluster creates the namespaces and starts both nodes. Cleanup is
// registered before anything is created.
func startCluster(t testing.TB) *liveCluster { return startClusterWith(t, liveOptions{}) }

func startClusterWith(t testing.TB, opts liveOptions) *liveCluster {
	t.Helper()
	requireLiveEnvironment(t)
	suffix := randomHex(t, 3)
	root, err := os.MkdirTemp("", "etcdlet-pcmk-")
	if err != nil {
		t.Fatal(err)
	}
	// The pacemaker daemons run as hacluster and must reach their dirs.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &liveCluster{}
	namespaces := []string{"etcdlet-" + suffix + "-0", "etcdlet-" + suffix + "-1"}
	t.Cleanup(func() { c.stop(t, namespaces, root) })

	veth := []string{"etl" + suffix + "a", "etl" + suffix + "b"}
	for i, ns := range namespaces {
		run(t, "ip", "netns", "add", ns)
		c.nodes[i] = &liveNode{name: fmt.Sprintf("master-%d", i), addr: fmt.Sprintf("192.0.2.%d", i+1), dir: filepath.Join(root, fmt.Sprint(i)), ns: ns, veth: veth[i]}
	}
	run(t, "ip", "link", "add", veth[0], "netns", namespaces[0], "type", "veth", "peer", "name", veth[1], "netns", namespaces[1])
	for i, ns := range namespaces {
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		run(t, "ip", "-n", ns, "addr", "add", c.nodes[i].addr+"/24", "dev", veth[i])
		run(t, "ip", "-n", ns, "link", "set", veth[i], "up")
	}
	for _, n := range c.nodes {
		writeNodeFiles(t, n, root)
		// fence_dummy reads a missing status file as "off": every node
		// starts powered on.
		writeFile(t, fenceStatusFile(root, n), []byte("on"), 0o644)
	}
	if opts.powerOffWhenFenced {
		c.powerOffWhenFenced(t, root)
	}
	for i := range c.nodes {
		c.startNode(t, i)
	}
	return c
}

func fenceStatusFile(root string, n *liveNode) string {
	return filepath.Join(root, "fence_dummy."+n.name)
}

// startNode boots node i: its namespaces, corosync and pacemakerd, with a
// boot ID of its own.
func (c *liveCluster) startNode(t testing.TB, i int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	writeFile(t, filepath.Join(n.dir, "boot_id"), []byte(fmt.Sprintf("%s-%s-%s-%s-%s\n",
		randomHex(t, 4), randomHex(t, 2), randomHex(t, 2), randomHex(t, 2), randomHex(t, 6))), 0o444)
	n.unshare = exec.Command("ip", "netns", "exec", n.ns,
		"unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
		os.Args[0])
	n.unshare.Env = append(os.Environ(), envNodeDir+"="+n.dir, envNodeName+"="+n.name)
	n.unshare.Stdout, n.unshare.Stderr = os.Stderr, os.Stderr
	if err := n.unshare.Start(); err != nil {
		t.Fatalf("start %s: %v", n.name, err)
	}
	down := make(chan struct{})
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		close(down)
	}(n.unshare)
	n.down = down
	n.initPID = waitChild(t, n.unshare.Process.Pid)
	t.Logf("%s: netns %s, unshare pid %d, init pid %d, dir %s", n.name, n.ns, n.unshare.Process.Pid, n.initPID, n.dir)
}

// powerOff kills node i's processes (unshare --kill-child takes its init,
// and the kernel everything in its PID namespace) and waits until they
// are gone. A node already off stays off.
func (c *liveCluster) powerOff(t testing.TB, i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	if n == nil || n.unshare == nil || n.unshare.Process == nil {
		return
	}
	_ = n.unshare.Process.Kill()
	<-n.down
	if n.initPID > 0 {
		waitGone(t, n.initPID, 10*time.Second)
	}
}

// powerOffWhenFenced watches the fence_dummy status files: fence_dummy
// writes one for every power action against its node ("off", then "on"
// for a reboot), and each write powers that node off, as a real fencing
// device would (a rebooted node comes back when the test starts it).
func (c *liveCluster) powerOffWhenFenced(t testing.TB, root string) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(root); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		w.Close()
		<-done
	})
	go func() {
		defer close(done)
		for ev := range w.Events {
			if !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) {
				continue
			}
			for i, n := range c.nodes {
				if ev.Name == fenceStatusFile(root, n) {
					t.Logf("fence_dummy acted against %s: powering it off", n.name)
					c.powerOff(t, i)
				}
			}
		}
	}()
}

// stop kills each node's namespace (unshare --kill-child takes the PID
// namespace's init, and the kernel everything in it), waits for the init
// processes to be gone, then deletes the network namespaces (and with them
// the veth pair) and the scratch directory.
func (c *liveCluster) stop(t testing.TB, namespaces []string, root string) {
	for i := range c.nodes {
		c.powerOff(t, i)
	}
	for _, ns := range namespaces {
		if err := exec.Command("ip", "netns", "del", ns).Run(); err != nil && nsExists(ns) {
			t.Errorf("delete netns %s: %v", ns, err)
		}
	}
	if t.Failed() {
		for _, n := range c.nodes {
			if n != nil {
				logTail(t, filepath.Join(n.dir, "daemons.out"))
				logTail(t, filepath.Join(n.dir, "log", "pacemaker.log"))
			}
		}
	}
	_ = os.RemoveAll(root)
}

// nsRunner runs each command inside a node's namespaces. It wraps the
// real exec runner: the collector under test still runs the real crm_mon,
// cibadmin and corosync-cmapctl, only where the node can see its cluster.
type nsRunner struct {
	inner runner.Runner
	pid   int
}

func (r nsRunner) Run(ctx context.Context, c runner.Command) (runner.Result, error) {
	args := append([]string{"-t", strconv.Itoa(r.pid), "-m", "-n", "-u", "-p", "--", c.Path}, c.Args...)
	return r.inner.Run(ctx, runner.Command{Path: "nsenter", Args: args, Env: c.Env})
}

// killCorosync makes node n's corosync die hard (SIGKILL, via its init).
func (c *liveCluster) killCorosync(t testing.TB, n *liveNode) {
	t.Helper()
	if err := syscall.Kill(n.initPID, syscall.SIGUSR1); err != nil {
		t.Fatalf("signal %s: %v", n.name, err)
	}
}

var corosyncConf = template.Must(template.New("corosync.conf").
	Funcs(template.FuncMap{"inc": func(i int) int { return i + 1 }}).Parse(`totem {
	version: 2
	cluster_name: tnf
	transport: knet
	crypto_cipher: none
	crypto_hash: none
	token: 3000
}
logging {
	to_stderr: yes
	to_logfile: no
	to_syslog: no
}
quorum {
	provider: corosync_votequorum
	two_node: 1
}
nodelist {
{{- range $i, $n := .}}
	node {
		name: {{$n.name}}
		nodeid: {{inc $i}}
		ring0_addr: {{$n.addr}}
	}
{{- end}}
}
`))

// The CIB both nodes boot with: a short dc-deadtime (the default 20 s
// would dominate the test), fence_dummy devices named and targeted as the
// cluster-etcd-operator does (one with a fencing delay, which keeps the
// node unclean long enough to observe), and Dummy resources under the
// real kubelet and etcd ids. No systemd: resources: without D-Bus their
// probes fail and pacemaker fences both nodes.
const cibTemplate = `<cib crm_feature_set="3.16.1" validate-with="pacemaker-3.9" epoch="5" num_updates="0" admin_epoch="0">
  <configuration>
    <crm_config>
      <cluster_property_set id="cib-bootstrap-options">
        <nvpair id="opt-stonith-enabled" name="stonith-enabled" value="true"/>
        <nvpair id="opt-dc-deadtime" name="dc-deadtime" value="2s"/>
      </cluster_property_set>
    </crm_config>
    <nodes/>
    <resources>
      <primitive id="master-0_redfish" class="stonith" type="fence_dummy">
        <instance_attributes id="m0-ia">
          <nvpair id="m0-hl" name="pcmk_host_list" value="master-0"/>
          <nvpair id="m0-sf" name="status_file" value="ROOT/fence_dummy.master-0"/>
        </instance_attributes>
        <operations><op id="m0-mon" name="monitor" interval="60s"/></operations>
      </primitive>
      <primitive id="master-1_ipmilan" class="stonith" type="fence_dummy">
        <instance_attributes id="m1-ia">
          <nvpair id="m1-hl" name="pcmk_host_list" value="master-1"/>
          <nvpair id="m1-sf" name="status_file" value="ROOT/fence_dummy.master-1"/>
          <nvpair id="m1-delay" name="pcmk_delay_base" value="3s"/>
        </instance_attributes>
        <operations><op id="m1-mon" name="monitor" interval="60s"/></operations>
      </primitive>
      <clone id="kubelet-clone">
        <primitive id="kubelet" class="ocf" provider="pacemaker" type="Dummy">
          <operations><op id="kubelet-mon" name="monitor" interval="10s" timeout="100s"/></operations>
        </primitive>
        <meta_attributes id="kubelet-clone-meta"><nvpair id="kubelet-clone-il" name="interleave" value="true"/></meta_attributes>
      </clone>
      <clone id="etcd-clone">
        <primitive id="etcd" class="ocf" provider="pacemaker" type="Dummy">
          <operations><op id="etcd-mon" name="monitor" interval="30s" timeout="25s"/></operations>
        </primitive>
        <meta_attributes id="etcd-clone-meta">
          <nvpair id="etcd-clone-il" name="interleave" value="true"/>
          <nvpair id="etcd-clone-notify" name="notify" value="true"/>
        </meta_attributes>
      </clone>
    </resources>
    <constraints>
      <rsc_location id="loc-m0" rsc="master-0_redfish" node="master-0" score="-INFINITY"/>
      <rsc_location id="loc-m1" rsc="master-1_ipmilan" node="master-1" score="-INFINITY"/>
      <rsc_order id="order-kubelet-etcd" first="kubelet-clone" then="etcd-clone" kind="Mandatory"/>
    </constraints>
  </configuration>
  <status/>
</cib>
`

func writeNodeFiles(t testing.TB, n *liveNode, root string) {
	t.Helper()
	hacluster, err := user.Lookup("hacluster")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(hacluster.Uid)
	gid, _ := strconv.Atoi(hacluster.Gid)
	for _, d := range []string{"lib/cib", "lib/pengine", "lib/blackbox", "lib/cores", "corolib", "shm", "log", "run"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(n.dir, "shm"), 0o1777); err != nil {
		t.Fatal(err)
	}
	var conf bytes.Buffer
	nodes := []map[string]string{{"name": "master-0", "addr": "192.0.2.1"}, {"name": "master-1", "addr": "192.0.2.2"}}
	if err := corosyncConf.Execute(&conf, nodes); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(n.dir, "corosync.conf"), conf.Bytes(), 0o644)
	cib := filepath.Join(n.dir, "lib", "cib", "cib.xml")
	writeFile(t, cib, []byte(strings.ReplaceAll(cibTemplate, "ROOT", root)), 0o600)
	for _, d := range []string{"lib", "log"} {
		if err := chownR(filepath.Join(n.dir, d), uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}
