package instancelock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/eventually"
)

func TestOneAgentPerStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	if held, err := Held(dir); err != nil || held {
		t.Fatalf("a state dir that does not exist: held %v, %v", held, err)
	}
	lock, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the state dir was created %v (%v), want 0700", fi.Mode(), err)
	}
	if held, err := Held(dir); err != nil || !held {
		t.Errorf("while locked: held %v, %v", held, err)
	}
	if _, err := Acquire(dir); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), dir) {
		t.Errorf("a second agent on the state dir: %v, want ErrHeld naming the dir", err)
	}
	if other, err := Acquire(filepath.Join(filepath.Dir(dir), "other")); err != nil {
		t.Errorf("another state dir: %v", err)
	} else {
		other.Release()
	}
	lock.Release()
	if held, err := Held(dir); err != nil || held {
		t.Errorf("after Release: held %v, %v", held, err)
	}
	again, err := Acquire(dir)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	again.Release()
}

// TestLockOfAnotherProcess: the lock of an agent in another process is
// seen, and dies with it (a crash leaves no stale lock).
func TestLockOfAnotherProcess(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Fatal("flock not found: apt-get install -y util-linux")
	}
	dir := t.TempDir()
	// --no-fork: flock execs sleep, so that killing it drops the lock.
	holder := exec.Command(flock, "--exclusive", "--no-fork", dir, "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	eventually.Nil(t, 10*time.Second, "the other process holds the lock", func() error {
		if held, err := Held(dir); err != nil || !held {
			return fmt.Errorf("held %v, %v", held, err)
		}
		return nil
	})
	if _, err := Acquire(dir); !errors.Is(err, ErrHeld) {
		t.Errorf("while another process holds it: %v, want ErrHeld", err)
	}
	_ = holder.Process.Kill()
	_ = holder.Wait()
	lock, err := Acquire(dir)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	lock.Release()
}
