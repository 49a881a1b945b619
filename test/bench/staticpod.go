package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
	"github.com/etcdlet/etcdlet/test/harness"
)

// staticPodFigures are the static-pod runtime's costs.
type staticPodFigures struct {
	// Per operation: render and write a changed manifest through the
	// protection guard, against the atomic write of the same bytes.
	renderWrite, writeFloor time.Duration
	// Per operation: render an unchanged spec and find the file equal (the
	// every-pass case), against reading the file and comparing it.
	renderSkip, skipFloor time.Duration
	// Agent start to READY=1 with the manifest in place, against
	// `etcdlet status` (start, load the same config, one look at the
	// cluster, exit).
	ready, readyFloor []time.Duration
	// Idle cost: the agents alone (etcd in its own process), the etcd
	// processes they manage, and the same etcd processes once the agents
	// are stopped; then the agents again, passing every reconcile
	// interval however settled (agent.idleInterval set to it).
	agents, etcd, etcdAlone, agentsUnpaced usage
}

// measureRenderWrite times rendering the manifest and writing it through
// the protection guard, alternating two specs so every write changes the
// file (and the kubelet would restart etcd), and rendering an unchanged
// spec (the every-pass case, no write).
func measureRenderWrite(t *tb, dir string, n int, f *staticPodFigures) {
	cfg, err := config.Parse([]byte("cluster: {name: etcd-main}\nmembers: {source: static, addresses: [192.0.2.10, 192.0.2.11, 192.0.2.12]}\netcd: {runtime: static-pod}\nstaticPod: {manifestDir: " + filepath.Join(dir, "manifests") + "}\n"))
	t.check(err, "render config")
	scheme := identity.SchemeFrom(cfg)
	addrs, _ := cfg.DesiredMembers()
	self := scheme.For(netip.MustParseAddr("192.0.2.10"))
	specs := []runtime.Spec{
		runtime.BuildSpec(runtime.SettingsFrom(cfg), self, identity.InitialCluster(scheme.ForAll(addrs)), runtime.StateNew),
		runtime.BuildSpec(runtime.SettingsFrom(cfg), self, identity.InitialCluster(scheme.ForAll(addrs)), runtime.StateExisting),
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	guard := protect.New(protect.Options{Enabled: true, Interval: time.Hour, Log: quiet})
	rt := staticpod.New(cfg.StaticPod, filepath.Join(dir, "state"), guard, quiet)

	start := time.Now()
	for i := range n {
		t.check(rt.Apply(context.Background(), specs[i%2]), "apply")
	}
	f.renderWrite = time.Since(start) / time.Duration(n)
	start = time.Now()
	for range n {
		t.check(rt.Apply(context.Background(), specs[0]), "apply")
	}
	f.renderSkip = time.Since(start) / time.Duration(n)

	data, err := rt.Render(specs[0])
	t.check(err, "render")
	floor := filepath.Join(dir, "floor.yaml")
	start = time.Now()
	for range n {
		t.check(atomicfile.Write(floor, data, 0o600), "write")
	}
	f.writeFloor = time.Since(start) / time.Duration(n)
	start = time.Now()
	for range n {
		onDisk, err := os.ReadFile(floor)
		t.check(err, "read")
		if !bytes.Equal(onDisk, data) {
			t.Fatalf("the floor's file changed")
		}
	}
	f.skipFloor = time.Since(start) / time.Duration(n)
}

// measureReady starts a one-member static-pod cluster, then restarts its
// agent repeatedly with the manifest already in place and unchanged, and
// times each start until systemd would hear READY=1. The floor is
// `etcdlet status` on the same config: the same binary starting, loading
// the config and looking at the cluster once, which the agent must do at
// least before it can say it is ready.
func measureReady(t *tb, binary, dir string, runs int, f *staticPodFigures) {
	t.check(os.MkdirAll(dir, 0o700), "ready dir")
	socket := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	t.check(err, "notify socket")
	defer conn.Close()
	c := harness.NewCluster(t, binary, dir, harness.Options{Net: netReady, StaticPod: harness.EtcdBinary(t), Defaults: true,
		Env: func(int) []string { return []string{"NOTIFY_SOCKET=" + socket} }})
	c.WriteMembers(1)
	c.Start(1)
	c.Wait(c.Client(), changeDeadline, 1)
	awaitReady(t, conn)
	manifest := filepath.Join(c.ManifestDir(1), "etcd.yaml")
	before, err := os.ReadFile(manifest)
	t.check(err, "read the manifest")
	for range runs {
		c.Agent(1).Stop()
		start := time.Now()
		c.Agent(1).Restart()
		awaitReady(t, conn)
		f.ready = append(f.ready, time.Since(start))
		after, err := os.ReadFile(manifest)
		t.check(err, "read the manifest")
		if !bytes.Equal(after, before) {
			t.Fatalf("a restart of etcdlet changed the manifest")
		}

		start = time.Now()
		out, err := exec.Command(binary, "status", "--config", c.ConfigPath(1)).CombinedOutput()
		f.readyFloor = append(f.readyFloor, time.Since(start))
		t.check(err, "etcdlet status (the floor): "+string(out))
	}
}

func awaitReady(t *tb, conn *net.UnixConn) {
	const within = time.Minute
	buf := make([]byte, 4096)
	t.check(conn.SetReadDeadline(time.Now().Add(within)), "notify socket")
	for {
		n, err := conn.Read(buf)
		t.check(err, "wait for READY=1 (within "+within.String()+")")
		if strings.HasPrefix(string(buf[:n]), "READY=1") {
			return
		}
	}
}

// measureStaticPodIdle runs three agents with the static-pod runtime and
// etcdlet's defaults, etcd run by the kubelet stand-in from their
// manifests, and measures over one window the agents alone and the etcd
// processes they manage. Then it stops the agents (etcd keeps running
// under the kubelet, as on a real node) and measures the same etcd
// processes again without them: what the agent adds to etcd's own cost.
// Last, it restarts the agents with agent.idleInterval at the reconcile
// interval and measures them again: what the idle pace saves.
func measureStaticPodIdle(t *tb, binary, dir string, idle time.Duration, f *staticPodFigures) {
	c := harness.NewCluster(t, binary, dir, harness.Options{Net: netStaticPod, StaticPod: harness.EtcdBinary(t), Defaults: true,
		Insecure: "the figures compare with the embedded runtime's, measured without TLS"})
	c.WriteMembers(1, 2, 3)
	for n := 1; n <= 3; n++ {
		c.WriteConfig(n)
		c.Start(n)
	}
	c.Wait(c.Client(), changeDeadline, 1, 2, 3)
	// Three settled passes before the agents slow down to their idle pace.
	time.Sleep(warmDown + 3*config.DefaultReconcileInterval)
	agents := agentPIDs(c, 1, 2, 3)
	etcd := etcdPIDs(t, c)
	both := idleUsage(t, append(slices.Clone(agents), etcd...), idle)
	f.agents = usage{cpu: both.cpu[:3], rss: both.rss[:3]}
	f.etcd = usage{cpu: both.cpu[3:], rss: both.rss[3:]}

	for n := 1; n <= 3; n++ {
		c.Agent(n).Stop()
	}
	time.Sleep(warmDown)
	if now := etcdPIDs(t, c); !slices.Equal(now, etcd) {
		t.Fatalf("etcd was restarted when the agents stopped (processes %v, then %v)", etcd, now)
	}
	f.etcdAlone = idleUsage(t, etcd, idle)

	c.Opts.AgentConfig = fmt.Sprintf("  idleInterval: %s\n", config.DefaultReconcileInterval)
	for n := 1; n <= 3; n++ {
		c.WriteConfig(n)
		c.Agent(n).Restart()
	}
	c.Wait(c.Client(), changeDeadline, 1, 2, 3)
	time.Sleep(warmDown)
	f.agentsUnpaced = idleUsage(t, agentPIDs(c, 1, 2, 3), idle)
}

func etcdPIDs(t *tb, c *harness.Cluster) []int {
	var pids []int
	for n := 1; n <= 3; n++ {
		pid := c.Kubelet(n).PID()
		if pid == 0 {
			t.Fatalf("no etcd runs for node %d", n)
		}
		pids = append(pids, pid)
	}
	return pids
}
