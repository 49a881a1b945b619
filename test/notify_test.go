package test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// notification is one sd_notify datagram and what was true when it came.
type notification struct {
	at            time.Time
	text          string
	manifestThere bool
}

// watchdogTimeout is the WatchdogSec the test runs the agent with. systemd
// restarts a service whose pings are WatchdogSec apart; the agent pings
// every half of it, so a slow machine has half of it to spare.
const watchdogTimeout = 6 * time.Second

// fakeSystemd records the sd_notify datagrams an agent sends to socket,
// each with whether manifest existed when it came.
type fakeSystemd struct {
	mu   sync.Mutex
	seen []notification
}

func listenNotify(t *testing.T, socket, manifest string) *fakeSystemd {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeSystemd{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			_, statErr := os.Stat(manifest)
			f.mu.Lock()
			f.seen = append(f.seen, notification{time.Now(), string(buf[:n]), statErr == nil})
			f.mu.Unlock()
		}
	}()
	return f
}

// has returns the first notification that starts with prefix.
func (f *fakeSystemd) has(prefix string) (notification, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.seen {
		if strings.HasPrefix(n.text, prefix) {
			return n, true
		}
	}
	return notification{}, false
}

// waitFor waits for a notification that starts with prefix.
func (f *fakeSystemd) waitFor(t *testing.T, timeout time.Duration, prefix string) notification {
	t.Helper()
	harness.Eventually(t, timeout, prefix, func() error {
		if _, ok := f.has(prefix); !ok {
			return errorf("not yet")
		}
		return nil
	})
	n, _ := f.has(prefix)
	return n
}

// notifyEnv is the environment systemd gives a Type=notify unit with
// WatchdogSec=watchdogTimeout.
func notifyEnv(socket string) func(int) []string {
	return func(int) []string {
		return []string{"NOTIFY_SOCKET=" + socket, fmt.Sprintf("WATCHDOG_USEC=%d", watchdogTimeout.Microseconds())}
	}
}

// An agent run by "systemd" (a fake NOTIFY_SOCKET and WATCHDOG_USEC) says
// READY=1 only once its manifest is in place, keeps the watchdog fed also
// while it idles between passes for longer than WatchdogSec, reports what
// it does in STATUS=, and says STOPPING=1 on SIGTERM.
func TestSystemdNotifications(t *testing.T) {
	t.Parallel()
	etcd := harness.EtcdBinary(t)
	socket := filepath.Join(t.TempDir(), "notify.sock")
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netNotify, StaticPod: etcd, Env: notifyEnv(socket),
		IdleInterval: 4 * watchdogTimeout})
	f := listenNotify(t, socket, manifestPath(c, 1))

	c.WriteMembers(1)
	c.Start(1)
	ready := f.waitFor(t, convergeTimeout, "READY=1")
	if !ready.manifestThere {
		t.Error("READY=1 came before the manifest was in place")
	}
	if !strings.Contains(ready.text, "STATUS=local member: ") {
		t.Errorf("READY=1 without a status: %q", ready.text)
	}
	// Watch four pings: no gap may reach WatchdogSec.
	var pings []time.Time
	harness.Eventually(t, 10*watchdogTimeout, "four watchdog pings", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		pings = pings[:0]
		for _, n := range f.seen {
			if n.text == "WATCHDOG=1" && n.at.After(ready.at) {
				pings = append(pings, n.at)
			}
		}
		if len(pings) < 4 {
			return errorf("%d pings", len(pings))
		}
		return nil
	})
	for i := 1; i < len(pings); i++ {
		if gap := pings[i].Sub(pings[i-1]); gap >= watchdogTimeout {
			t.Errorf("watchdog not pinged for %s (WatchdogSec=%s): systemd would restart etcdlet", gap, watchdogTimeout)
		}
	}
	// The watchdog does not set the pace: the loop idles for longer.
	awaitIdlePace(t, c, 2*watchdogTimeout, 1)

	c.Agent(1).Signal(syscall.SIGTERM)
	f.waitFor(t, 30*time.Second, "STOPPING=1")
}

// READY=1 never waits on something only the kubelet provides: the member
// list is often a ConfigMap volume the kubelet mounts, and the kubelet is
// ordered after etcdlet's READY=1. Without a list the agent is ready after
// its first pass (nothing to do yet) and says why in STATUS=; a list that
// appears later is acted on as usual.
func TestReadyWithoutAMemberList(t *testing.T) {
	t.Parallel()
	etcd := harness.EtcdBinary(t)
	socket := filepath.Join(t.TempDir(), "notify.sock")
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netReadyNoList, StaticPod: etcd, Env: notifyEnv(socket)})
	f := listenNotify(t, socket, manifestPath(c, 1))

	c.Start(1) // no members file yet
	ready := f.waitFor(t, convergeTimeout, "READY=1")
	if !strings.Contains(ready.text, "STATUS=ready, nothing to run: no member list") {
		t.Errorf("READY=1 without a list should say why there is nothing to do: %q", ready.text)
	}
	if ready.manifestThere {
		t.Error("a manifest was written without a member list")
	}

	// The list arrives (the kubelet mounted its volume): the member starts.
	c.WriteMembers(1)
	cli := c.ClientOf(1)
	c.Wait(cli, convergeTimeout, 1)
	if _, err := os.Stat(manifestPath(c, 1)); err != nil {
		t.Errorf("the member runs but its manifest is not in place: %v", err)
	}
}
