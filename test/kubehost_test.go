package test

// Control-plane hosts with a real kubelet: Debian hosts booted with
// systemd-nspawn (nspawn_test.go), each in its own network namespace on a
// shared bridge, with Debian's containerd and runc, the kubelet v1.37.1 of
// hack/kube-node.sh as the Kubernetes packages install it, and etcdlet from
// its .deb, configured as docs/kubeadm.md says
// (../shared/reference/test-infrastructure.md (h) and (i)).

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/etcdlet/etcdlet/test/harness"
)

const (
	envKubeNode       = "ETCDLET_KUBE_NODE"
	envContainerdDebs = "ETCDLET_CONTAINERD_DEBS"
	kubeVersion       = "v1.37.1"
	// The hosts' subnet (TEST-NET-2), on a bridge in a namespace of the
	// test's own; the test process reaches it from there, as .254.
	labSubnet = "198.51.100."
	labGate   = labSubnet + "254"
	// Where the hosts see the kubelet and kubeadm, and the images.
	kubeNodeMount = "/opt/kube-node"
	imagesMount   = "/opt/test-images"
	// What the package ships for the time before kubeadm (docs/kubeadm.md).
	standaloneDir    = "/usr/share/etcdlet/kubelet-standalone"
	standaloneDropIn = "/etc/systemd/system/kubelet.service.d/20-etcdlet-standalone.conf"
	standaloneConfig = "/etc/etcdlet/kubelet-standalone.yaml"
	etcdManifest     = "/etc/kubernetes/manifests/etcd.yaml"
	dataDir          = "/var/lib/etcdlet/etcd"
	membersFile      = "/etc/etcdlet/members"
	pkiDir           = "/etc/kubernetes/pki"
)

// labSeq numbers the labs of a test run: their namespaces' names must
// differ, also between tests running in parallel.
var labSeq atomic.Int64

// kubeLab is the network and what every host of a test shares.
type kubeLab struct {
	t        *testing.T
	name     string // prefix of its namespaces' names
	bridgeNS string
	hostRoot
	kubeNode string // the kubelet and kubeadm, bound into every host
	kubeadm  string // kubeadm, run here to make certificates
	ca       string // the etcd CA (kubeadm's etcd/ca.{crt,key})
	booted   []*kubeHost
}

// kubeHost is one control-plane host of the lab.
type kubeHost struct {
	*nspawnHost
	name, ip, ns string
}

// newKubeLab makes the etcd CA and the bridge the hosts connect to; the
// hosts' root is built once for all tests (kuberoot_test.go).
func newKubeLab(t *testing.T) *kubeLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test boots Debian hosts with systemd-nspawn and needs root: run `sudo make test`")
	}
	requireTools(t, map[string]string{"systemd-nspawn": "systemd-container", "nsenter": "util-linux", "chroot": "coreutils",
		"tar": "tar", "ip": "iproute2"})
	l := &kubeLab{t: t, kubeNode: envDir(t, envKubeNode, "hack/kube-node.sh", "kubelet", "kubeadm")}
	l.kubeadm = filepath.Join(l.kubeNode, "kubeadm")
	l.hostRoot = sharedHostRoot(t, l.kubeNode, envDir(t, envContainerdDebs, "hack/containerd-debs.sh"))
	l.name = fmt.Sprintf("etcdlet-%d-l%d", os.Getpid(), labSeq.Add(1))
	l.bridgeNS = l.name + "-br"
	harness.AddNetns(t, l.bridgeNS)
	run(t, "ip", "-n", l.bridgeNS, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", l.bridgeNS, "addr", "add", labGate+"/24", "dev", "br0")
	run(t, "ip", "-n", l.bridgeNS, "link", "set", "br0", "up")
	l.ca = filepath.Join(t.TempDir(), "pki")
	l.kubeadmCerts(l.ca, 1, "etcd-ca")
	return l
}

// envDir is the directory an environment variable names, holding files.
func envDir(t *testing.T, env, script string, files ...string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		t.Fatalf("%s is not set: run `export %s=$(%s)` (it builds or downloads it once into the cache) or `make test`", env, env, script)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s=%s: %v; run `export %s=$(%s)`", env, dir, err, env, script)
		}
	}
	return dir
}

// etcdletConfig is /etc/etcdlet/config.yaml of every host, as
// docs/kubeadm.md has it (the members file, kubeadm's certificates, the
// static-pod runtime, the node's address detected as the one listed address
// on the host), with the etcd image built here and without replicas: the
// test changes the list's length.
func etcdletConfig(image string) string {
	return `cluster:
  name: etcd-main
members:
  source: file
  file: ` + membersFile + `
etcd:
  runtime: static-pod
  dataDir: ` + dataDir + `
  tls:
    client: {certFile: /etc/kubernetes/pki/etcd/server.crt, keyFile: /etc/kubernetes/pki/etcd/server.key, caFile: /etc/kubernetes/pki/etcd/ca.crt}
    peer: {certFile: /etc/kubernetes/pki/etcd/peer.crt, keyFile: /etc/kubernetes/pki/etcd/peer.key, caFile: /etc/kubernetes/pki/etcd/ca.crt}
staticPod:
  manifestDir: /etc/kubernetes/manifests
  image: ` + image + `
agent:
  stateDir: /var/lib/etcdlet/agent
  etcdClientTLS: {certFile: /etc/kubernetes/pki/etcd/healthcheck-client.crt, keyFile: /etc/kubernetes/pki/etcd/healthcheck-client.key, caFile: /etc/kubernetes/pki/etcd/ca.crt}
`
}

// addHost makes host n (address .n, name cpN): its network namespace on
// the bridge, a copy of the template, its name and its certificates from
// kubeadm. It is not booted yet.
func (l *kubeLab) addHost(n int) *kubeHost {
	t := l.t
	t.Helper()
	h := &kubeHost{name: fmt.Sprintf("cp%d", n), ip: fmt.Sprintf("%s%d", labSubnet, n),
		ns: fmt.Sprintf("%s-h%d", l.name, n)}
	harness.AddNetns(t, h.ns)
	peer := fmt.Sprintf("veth%d", n)
	run(t, "ip", "-n", l.bridgeNS, "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
	run(t, "ip", "-n", l.bridgeNS, "link", "set", peer, "master", "br0", "up")
	run(t, "ip", "-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0")
	run(t, "ip", "-n", h.ns, "link", "set", "eth0", "up")
	run(t, "ip", "-n", h.ns, "link", "set", "lo", "up")
	// kubeadm's preflight wants forwarding on; it is the namespace's own.
	run(t, "ip", "netns", "exec", h.ns, "sh", "-c", "echo 1 >/proc/sys/net/ipv4/ip_forward")
	h.nspawnHost = newNspawnHost(t, l.template)
	h.write("/etc/hostname", h.name+"\n", 0o644)
	h.write("/etc/hosts", fmt.Sprintf("127.0.0.1\tlocalhost\n%s\t%s\n", h.ip, h.name), 0o644)
	pki := h.file(pkiDir)
	for _, f := range []string{"etcd/ca.crt", "etcd/ca.key"} {
		if err := os.MkdirAll(filepath.Join(pki, "etcd"), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join(l.ca, f), filepath.Join(pki, f))
	}
	l.kubeadmCerts(pki, n, "etcd-server", "etcd-peer", "etcd-healthcheck-client", "apiserver-etcd-client")
	return h
}

// kubeadmCerts runs `kubeadm init phase certs PHASE` for each phase, for
// host n, into the certificate dir dir (kubeadm only writes files).
func (l *kubeLab) kubeadmCerts(dir string, n int, phases ...string) {
	t := l.t
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "kubeadm-certs.yaml")
	content := fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint: {advertiseAddress: %s%d}
nodeRegistration: {name: cp%d, criSocket: "unix:///run/containerd/containerd.sock"}
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %s
certificatesDir: %s
`, labSubnet, n, n, kubeVersion, dir)
	if err := os.WriteFile(cfg, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range phases {
		run(t, l.kubeadm, "init", "phase", "certs", p, "--config", cfg)
	}
}

// boot boots the hosts side by side and waits for each.
func (l *kubeLab) boot(hosts ...*kubeHost) {
	l.t.Helper()
	start := time.Now()
	for _, h := range hosts {
		// The kubelet's runc joins the session keyring and loads BPF device
		// filters; nspawn's default filter refuses both.
		h.start(h.ns, "--capability=all", "--system-call-filter=@keyring bpf",
			"--bind-ro="+l.kubeNode+":"+kubeNodeMount, "--bind-ro="+l.images+":"+imagesMount)
	}
	for _, h := range hosts {
		h.waitBooted()
	}
	l.booted = append(l.booted, hosts...)
	// Before each host's own clean-up: all at once, not one after the other.
	l.t.Cleanup(func() {
		var all []*nspawnHost
		for _, h := range l.booted {
			all = append(all, h.nspawnHost)
		}
		powerOffAll(all...)
	})
	l.t.Logf("booted %d hosts in %s", len(hosts), time.Since(start).Round(100*time.Millisecond))
}

// writeMembers writes the members file on every host, as an external tool
// keeps it: the same list everywhere, replaced in one rename.
func writeMembers(t *testing.T, hosts []*kubeHost, listed ...*kubeHost) {
	t.Helper()
	var b strings.Builder
	for _, h := range listed {
		b.WriteString(h.ip + "\n")
	}
	for _, h := range hosts {
		h.write(membersFile+".new", b.String(), 0o644)
		if err := os.Rename(h.file(membersFile+".new"), h.file(membersFile)); err != nil {
			t.Fatal(err)
		}
	}
}

// clientURLs are the hosts' etcd client URLs.
func clientURLs(hosts ...*kubeHost) []string {
	var urls []string
	for _, h := range hosts {
		urls = append(urls, "https://"+net.JoinHostPort(h.ip, "2379"))
	}
	return urls
}

// dialIn returns a dialer that opens TCP connections from inside the
// network namespace ns: a socket belongs to the namespace of the thread
// that creates it.
func dialIn(ns string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			return nil, err
		}
		defer orig.Close()
		target, err := netns.GetFromName(ns)
		if err != nil {
			runtime.UnlockOSThread()
			return nil, err
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			return nil, err
		}
		conn, dialErr := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err := netns.Set(orig); err != nil {
			// The thread stays locked and in the wrong namespace: Go ends it
			// with this goroutine.
			return nil, fmt.Errorf("return to the test's network namespace: %w", err)
		}
		runtime.UnlockOSThread()
		return conn, dialErr
	}
}

// etcdContainers lists the host's containers of the etcd image as
// containerd has them, with their tasks' status ("RUNNING", "STOPPED", or
// "" without a task).
func (h *kubeHost) etcdContainers(image string) (map[string]string, error) {
	containers, err := h.exec("ctr", "-n", "k8s.io", "containers", "ls")
	if err != nil {
		return nil, fmt.Errorf("ctr containers ls: %v: %s", err, containers)
	}
	tasks, err := h.exec("ctr", "-n", "k8s.io", "tasks", "ls")
	if err != nil {
		return nil, fmt.Errorf("ctr tasks ls: %v: %s", err, tasks)
	}
	status := map[string]string{}
	for _, line := range strings.Split(tasks, "\n")[1:] {
		if f := strings.Fields(line); len(f) == 3 {
			status[f[0]] = f[2]
		}
	}
	found := map[string]string{}
	for _, line := range strings.Split(containers, "\n")[1:] {
		if f := strings.Fields(line); len(f) == 3 && f[1] == image {
			found[f[0]] = status[f[0]]
		}
	}
	return found, nil
}

// etcdRuns checks whether containerd runs an etcd container in the host,
// against want.
func (h *kubeHost) etcdRuns(image string, want bool) error {
	containers, err := h.etcdContainers(image)
	if err != nil {
		return err
	}
	running := slices.Contains(slices.Collect(maps.Values(containers)), "RUNNING")
	if running != want {
		return errorf("%s: etcd containers %v (running: %t, want %t)", h.name, containers, running, want)
	}
	return nil
}

// poll is harness.Eventually for conditions that run commands in a host:
// at most one try every 250ms.
func poll(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	var last time.Time
	harness.Eventually(t, timeout, what, func() error {
		time.Sleep(time.Until(last.Add(250 * time.Millisecond)))
		last = time.Now()
		return cond()
	})
}
