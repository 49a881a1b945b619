package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// BridgedHosts creates count "hosts": network namespaces, each with a veth
// into a bridge in one more namespace, host n's veth carrying cidr(n)
// (IPv6 without duplicate address detection, so usable at once). It
// returns the namespace name of host n; all are deleted after the test.
func BridgedHosts(t TB, tag string, count int, cidr func(n int) string) func(n int) string {
	t.Helper()
	prefix := fmt.Sprintf("etcdlet-%d-%s", os.Getpid(), tag)
	ns := func(n int) string { return fmt.Sprintf("%s-%d", prefix, n) }
	bridge := prefix + "-br"
	AddNetns(t, bridge)
	mustRun(t, "ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
	mustRun(t, "ip", "-n", bridge, "link", "set", "br0", "up")
	for n := 1; n <= count; n++ {
		AddNetns(t, ns(n))
		port := fmt.Sprintf("port%d", n)
		mustRun(t, "ip", "-n", ns(n), "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", bridge)
		mustRun(t, "ip", "-n", bridge, "link", "set", port, "master", "br0", "up")
		mustRun(t, "ip", "-n", ns(n), "link", "set", "lo", "up")
		mustRun(t, "ip", "-n", ns(n), "link", "set", "eth0", "up")
		argv := []string{"ip", "-n", ns(n), "addr", "add", cidr(n), "dev", "eth0"}
		if strings.Contains(cidr(n), ":") {
			argv = append(argv, "nodad")
		}
		mustRun(t, argv...)
	}
	return ns
}

// AddNetns creates a network namespace that is deleted after the test.
func AddNetns(t TB, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test creates network namespaces and needs root: run `sudo make test`")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip not found in PATH: apt-get install -y --no-install-recommends iproute2 (hack/test-deps.sh installs it)")
	}
	mustRun(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
}

func mustRun(t TB, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// DialInNetns dials from inside the network namespace name, so that a
// client in this process reaches addresses only that namespace reaches.
// The socket is made on a thread switched into the namespace and back: a
// socket belongs to the namespace it was created in, whatever the thread
// does afterwards.
func DialInNetns(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		target, err := netns.GetFromName(name)
		if err != nil {
			return nil, fmt.Errorf("network namespace %s: %w", name, err)
		}
		defer target.Close()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return nil, err
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			return nil, fmt.Errorf("enter network namespace %s: %w", name, err)
		}
		// Back before the thread is unlocked: a thread left in another
		// namespace must never serve another goroutine.
		defer func() {
			if err := netns.Set(orig); err != nil {
				panic(fmt.Sprintf("leave network namespace %s: %v", name, err))
			}
		}()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}
