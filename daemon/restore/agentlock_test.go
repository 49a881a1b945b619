package restore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/instancelock"
)

// A restore or a recovery rewrites the node's data dir and state: never
// under a running agent, even one whose member is down (its data dir then
// free of etcd's lock), since the agent acts on both between two passes.
func TestNothingIsRestoredUnderARunningAgent(t *testing.T) {
	dir := t.TempDir()
	s := Settings{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "state")}
	if err := os.MkdirAll(filepath.Join(s.DataDir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := instancelock.Acquire(s.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Rejoin(s, time.Now())
	if err == nil || !strings.Contains(err.Error(), "etcdlet's agent runs with agent.stateDir "+s.StateDir+": stop it first") {
		t.Errorf("Rejoin under a running agent: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "member", "wal")); err != nil {
		t.Errorf("the data dir was touched: %v", err)
	}
	lock.Release()
	if _, err := Rejoin(s, time.Now()); err != nil {
		t.Errorf("Rejoin once the agent stopped: %v", err)
	}
}
