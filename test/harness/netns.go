package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

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
func DialInNetns(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
		err = inNetns(name, func() error {
			var d net.Dialer
			conn, err = d.DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
}

// ListenInNetns listens on addr inside the network namespace name.
func ListenInNetns(name, network, addr string) (ln net.Listener, err error) {
	err = inNetns(name, func() error {
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// inNetns runs open, which makes a socket, on a thread switched into the
// namespace name and back: a socket belongs to the namespace it was
// created in, whatever the thread does afterwards.
func inNetns(name string, open func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", name, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", name, err)
	}
	// Back before the thread is unlocked: a thread left in another
	// namespace must never serve another goroutine.
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("leave network namespace %s: %v", name, err))
		}
	}()
	return open()
}

// ForwardFromNetns makes target, an address of this process's own
// namespace (a server on the machine's loopback), reachable at addr
// inside the network namespace name: every connection accepted there is
// copied both ways to a connection to target. It stops after the test.
func ForwardFromNetns(t TB, name, addr, target string) {
	t.Helper()
	ln, err := ListenInNetns(name, "tcp", addr)
	if err != nil {
		t.Fatalf("forward %s in %s to %s: %v", addr, name, target, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return // closed after the test
			}
			go forward(in, target)
		}
	}()
}

// forward copies in to a new connection to target and back, until either
// side closes; a target that does not answer closes in.
func forward(in net.Conn, target string) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// The other way may still carry an answer: close only the
		// writing half, as the other end asked.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(out, in)
	go copyHalf(in, out)
	<-done
	<-done
}
