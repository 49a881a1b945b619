// Package systemd holds etcdlet's systemd unit, the kubelet drop-in that
// orders the kubelet after etcdlet, and the Go glue for sd_notify: READY,
// STATUS, WATCHDOG and STOPPING messages to the service manager.
package systemd

import (
	"log/slog"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier talks to systemd through $NOTIFY_SOCKET. Without one (not run by
// systemd) every call is a no-op.
type Notifier struct {
	log *slog.Logger

	mu         sync.Mutex
	ready      bool
	lastStatus string
}

// NewNotifier returns a notifier that logs failed sends at debug level.
func NewNotifier(log *slog.Logger) *Notifier { return &Notifier{log: log} }

func (n *Notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Debug("sd_notify failed", "state", state, "error", err)
	}
}

// Ready sends READY=1 once; later calls do nothing.
func (n *Notifier) Ready(status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ready {
		return
	}
	n.ready = true
	n.lastStatus = status
	n.send(daemon.SdNotifyReady + "\nSTATUS=" + status)
}

// Status sends STATUS=<status> when it differs from the last one.
func (n *Notifier) Status(status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if status == n.lastStatus {
		return
	}
	n.lastStatus = status
	n.send("STATUS=" + status)
}

// Watchdog sends WATCHDOG=1: the main loop is alive.
func (n *Notifier) Watchdog() { n.send(daemon.SdNotifyWatchdog) }

// Stopping sends STOPPING=1.
func (n *Notifier) Stopping() { n.send(daemon.SdNotifyStopping + "\nSTATUS=stopping") }

// WatchdogInterval is how often the loop must ping: half of WatchdogSec,
// as systemd recommends; 0 when the watchdog is off.
func WatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0
	}
	return d / 2
}
