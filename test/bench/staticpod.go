package main

import (
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
	"github.com/etcdlet/etcdlet/daemon/atomicfile"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod"
	"github.com/etcdlet/etcdlet/test/harness"
)

// staticPodFigures are the static-pod runtime's costs.
type staticPodFigures struct {
	renderWrite, renderSkip, writeFloor time.Duration // per operation
	ready, readyFloor                   []time.Duration
}

// measureRenderWrite times rendering the manifest and writing it through
// the protection guard, alternating two specs so every write changes the
// file (and the kubelet would restart etcd), and rendering an unchanged
// spec (the every-pass case, no write); the floor is the atomic write of
// the same bytes without rendering.
func measureRenderWrite(dir string, n int) staticPodFigures {
	cfg, err := config.Parse([]byte("cluster: {name: etcd-main}\nmembers: {source: static, addresses: [192.0.2.10, 192.0.2.11, 192.0.2.12]}\netcd: {runtime: static-pod}\nstaticPod: {manifestDir: " + filepath.Join(dir, "manifests") + "}\n"))
	check(err)
	scheme := identity.SchemeFrom(cfg)
	addrs, _ := cfg.DesiredMembers()
	self := scheme.For(netip.MustParseAddr("192.0.2.10"))
	specs := []runtime.Spec{
		runtime.BuildSpec(cfg, self, identity.InitialCluster(scheme.ForAll(addrs)), runtime.StateNew),
		runtime.BuildSpec(cfg, self, identity.InitialCluster(scheme.ForAll(addrs)), runtime.StateExisting),
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	guard := protect.New(protect.Options{Enabled: true, Interval: time.Hour, Log: quiet})
	rt := staticpod.New(cfg.StaticPod, filepath.Join(dir, "state"), guard, quiet)

	var f staticPodFigures
	start := time.Now()
	for i := range n {
		check(rt.Apply(context.Background(), specs[i%2]))
	}
	f.renderWrite = time.Since(start) / time.Duration(n)
	start = time.Now()
	for range n {
		check(rt.Apply(context.Background(), specs[0]))
	}
	f.renderSkip = time.Since(start) / time.Duration(n)
	data, err := rt.Render(specs[0])
	check(err)
	floor := filepath.Join(dir, "floor.yaml")
	start = time.Now()
	for range n {
		check(atomicfile.Write(floor, data, 0o600))
	}
	f.writeFloor = time.Since(start) / time.Duration(n)
	return f
}

// measureReady starts a one-member static-pod cluster, then restarts its
// agent repeatedly with the manifest already in place and unchanged, and
// times each start until systemd would hear READY=1. The floor is a bare
// start of the same binary (etcdlet version) until it exits.
func measureReady(binary, dir string, runs int, f *staticPodFigures) {
	t := &tb{}
	defer t.cleanup()
	check(os.MkdirAll(dir, 0o700))
	socket := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	check(err)
	defer conn.Close()
	c := harness.NewCluster(t, binary, dir, harness.Options{Net: benchNet + 2, StaticPod: harness.EtcdBinary(t),
		Env: func(int) []string { return []string{"NOTIFY_SOCKET=" + socket} }})
	c.WriteMembers(1)
	c.Start(1)
	cli := c.Client()
	c.Wait(cli, time.Minute, 1)
	awaitReady(conn)
	manifest, err := os.ReadFile(filepath.Join(c.ManifestDir(1), "etcd.yaml"))
	check(err)
	for range runs {
		c.Agent(1).Stop()
		start := time.Now()
		c.Agent(1).Restart()
		awaitReady(conn)
		f.ready = append(f.ready, time.Since(start))
		now, err := os.ReadFile(filepath.Join(c.ManifestDir(1), "etcd.yaml"))
		check(err)
		if string(now) != string(manifest) {
			t.Fatalf("a restart of etcdlet changed the manifest")
		}
		start = time.Now()
		check(exec.Command(binary, "version").Run())
		f.readyFloor = append(f.readyFloor, time.Since(start))
	}
}

func awaitReady(conn *net.UnixConn) {
	buf := make([]byte, 4096)
	check(conn.SetReadDeadline(time.Now().Add(time.Minute)))
	for {
		n, err := conn.Read(buf)
		check(err)
		if strings.HasPrefix(string(buf[:n]), "READY=1") {
			return
		}
	}
}

func reportStaticPod(f staticPodFigures) {
	fmt.Println()
	fmt.Printf("static-pod runtime\n")
	fmt.Printf("  render + write (manifest changed)   %10s   floor (atomic write only) %10s   ratio %.1fx\n",
		f.renderWrite.Round(time.Microsecond), f.writeFloor.Round(time.Microsecond), float64(f.renderWrite)/float64(f.writeFloor))
	fmt.Printf("  render, unchanged (no write)        %10s\n", f.renderSkip.Round(time.Microsecond))
	fmt.Printf("  start to READY=1, manifest in place %10s (%s–%s)   floor (etcdlet version) %s   ratio %.1fx\n",
		round(median(f.ready)), round(slices.Min(f.ready)), round(slices.Max(f.ready)), round(median(f.readyFloor)),
		float64(median(f.ready))/float64(median(f.readyFloor)))
}
