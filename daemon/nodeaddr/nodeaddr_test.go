package nodeaddr

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestPick(t *testing.T) {
	local := addrs("127.0.0.1", "192.0.2.11", "2001:db8::11")
	tests := []struct {
		name       string
		candidates []netip.Addr
		want       string
		err        string
	}{
		{"one listed address is local", addrs("192.0.2.10", "192.0.2.11", "192.0.2.12"), "192.0.2.11", ""},
		{"IPv6", addrs("2001:db8::10", "2001:db8::11"), "2001:db8::11", ""},
		{"none is local", addrs("192.0.2.20", "192.0.2.21"), "", "none of the listed addresses"},
		{"several are local", addrs("192.0.2.11", "2001:db8::11"), "", "several listed addresses are assigned locally"},
		{"duplicates count once", addrs("192.0.2.11", "192.0.2.11"), "192.0.2.11", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pick(tt.candidates, local)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "set node.address") {
					t.Errorf("error %v, want one saying %q and how to fix it", err, tt.err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Errorf("Pick = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestDetectInNetworkNamespace creates a network namespace with member
// addresses on its loopback and detects the node address inside it, as
// etcdlet does on a host, through netlink.
func TestDetectInNetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a network namespace and needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN): run `sudo make test`")
	}
	name := fmt.Sprintf("etcdlet-nodeaddr-%d", os.Getpid())
	ns := newNamespace(t, name)

	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"192.0.2.10/32", "192.0.2.11/32", "2001:db8::10/128"} {
		addr, _ := netlink.ParseAddr(a)
		if err := h.AddrAdd(lo, addr); err != nil {
			t.Fatalf("add %s: %v", a, err)
		}
	}
	local, err := LocalAddresses(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range addrs("192.0.2.10", "192.0.2.11", "2001:db8::10", "127.0.0.1") {
		if !slices.Contains(local, want) {
			t.Errorf("LocalAddresses() = %v, missing %s", local, want)
		}
	}

	// Detect() reads the namespace of the calling thread, as on a host.
	inside := func(candidates []netip.Addr) (netip.Addr, error) {
		type result struct {
			ip  netip.Addr
			err error
		}
		done := make(chan result)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine, namespace and all
			if err := netns.Set(ns); err != nil {
				done <- result{err: err}
				return
			}
			ip, err := Detect(candidates)
			done <- result{ip, err}
		}()
		r := <-done
		return r.ip, r.err
	}
	if ip, err := inside(addrs("192.0.2.9", "192.0.2.10", "192.0.2.12")); err != nil || ip.String() != "192.0.2.10" {
		t.Errorf("Detect = %v, %v; want 192.0.2.10", ip, err)
	}
	if ip, err := inside(addrs("2001:db8::9", "2001:db8::10")); err != nil || ip.String() != "2001:db8::10" {
		t.Errorf("Detect IPv6 = %v, %v", ip, err)
	}
	// 127.0.0.2 is routed locally through 127.0.0.0/8 but is not assigned:
	// an exact match is what counts.
	if _, err := inside(addrs("127.0.0.2", "192.0.2.12")); err == nil {
		t.Error("Detect picked an address that is not assigned to an interface")
	}
	if _, err := inside(addrs("192.0.2.10", "192.0.2.11")); err == nil || !strings.Contains(err.Error(), "several") {
		t.Errorf("two local listed addresses must be an error, got %v", err)
	}
}

func newNamespace(t *testing.T, name string) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.NewNamed(name) // also switches this thread into it
	if err != nil {
		t.Fatalf("create network namespace %s: %v", name, err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatalf("return to the original namespace: %v", err)
	}
	t.Cleanup(func() {
		ns.Close()
		_ = netns.DeleteNamed(name)
	})
	return ns
}
