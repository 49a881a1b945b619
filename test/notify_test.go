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

// watchdogSec is the WatchdogSec the test runs the agent with. systemd
// restarts a service whose pings are WatchdogSec apart; the agent pings
// every half of it, so a slow machine has half of it to spare.
const watchdogSec = 6 * time.Second

// An agent run by "systemd" (a fake NOTIFY_SOCKET and WATCHDOG_USEC) says
// READY=1 only once its manifest is in place, keeps the watchdog fed,
// reports what it does in STATUS=, and says STOPPING=1 on SIGTERM.
func TestSystemdNotifications(t *testing.T) {
	t.Parallel()
	etcd := harness.EtcdBinary(t)
	socket := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netNotify, StaticPod: etcd,
		Env: func(int) []string {
			return []string{"NOTIFY_SOCKET=" + socket, fmt.Sprintf("WATCHDOG_USEC=%d", watchdogSec.Microseconds())}
		}})
	manifest := manifestPath(c, 1)

	var (
		mu   sync.Mutex
		seen []notification
	)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			_, statErr := os.Stat(manifest)
			mu.Lock()
			seen = append(seen, notification{time.Now(), string(buf[:n]), statErr == nil})
			mu.Unlock()
		}
	}()
	has := func(prefix string) (notification, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range seen {
			if strings.HasPrefix(n.text, prefix) {
				return n, true
			}
		}
		return notification{}, false
	}

	c.WriteMembers(1)
	c.Start(1)
	harness.Eventually(t, convergeTimeout, "READY=1", func() error {
		if _, ok := has("READY=1"); !ok {
			return errorf("not yet")
		}
		return nil
	})
	ready, _ := has("READY=1")
	if !ready.manifestThere {
		t.Error("READY=1 came before the manifest was in place")
	}
	if !strings.Contains(ready.text, "STATUS=local member: ") {
		t.Errorf("READY=1 without a status: %q", ready.text)
	}
	// Watch four pings: no gap may reach WatchdogSec.
	var pings []time.Time
	harness.Eventually(t, 10*watchdogSec, "four watchdog pings", func() error {
		mu.Lock()
		defer mu.Unlock()
		pings = pings[:0]
		for _, n := range seen {
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
		if gap := pings[i].Sub(pings[i-1]); gap >= watchdogSec {
			t.Errorf("watchdog not pinged for %s (WatchdogSec=%s): systemd would restart etcdlet", gap, watchdogSec)
		}
	}

	c.Agent(1).Signal(syscall.SIGTERM)
	harness.Eventually(t, 30*time.Second, "STOPPING=1", func() error {
		if _, ok := has("STOPPING=1"); !ok {
			return errorf("not yet")
		}
		return nil
	})
}
