package systemd

import (
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// fakeSystemd listens where $NOTIFY_SOCKET points, as systemd does.
func fakeSystemd(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func TestNotifier(t *testing.T) {
	conn := fakeSystemd(t)
	n := NewNotifier(slog.New(slog.NewTextHandler(io.Discard, nil)))
	n.Status("starting")
	if got := receive(t, conn); got != "STATUS=starting" {
		t.Errorf("got %q", got)
	}
	n.Status("starting") // unchanged: not sent again
	n.Ready("local member: keep")
	if got := receive(t, conn); got != "READY=1\nSTATUS=local member: keep" {
		t.Errorf("got %q", got)
	}
	n.Ready("again") // once only
	n.Watchdog()
	if got := receive(t, conn); got != "WATCHDOG=1" {
		t.Errorf("got %q (a second READY or a repeated STATUS was sent)", got)
	}
	n.Stopping()
	if got := receive(t, conn); got != "STOPPING=1\nSTATUS=stopping" {
		t.Errorf("got %q", got)
	}
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", "")
	if got := WatchdogInterval(); got != 15*time.Second {
		t.Errorf("WatchdogInterval() = %s, want half of WatchdogSec=30s", got)
	}
	t.Setenv("WATCHDOG_USEC", "")
	if got := WatchdogInterval(); got != 0 {
		t.Errorf("without a watchdog: %s", got)
	}
}
