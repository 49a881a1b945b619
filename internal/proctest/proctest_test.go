package proctest

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/eventually"
)

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("the test process itself reads as not alive")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Error("a running child reads as not alive")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed but not yet waited for: a zombie, which is dead.
	eventually.True(t, 10*time.Second, "the killed child reads as not alive before it is reaped", func() bool { return !Alive(pid) })
	_ = cmd.Wait()
	if Alive(pid) {
		t.Error("a reaped child reads as alive")
	}
}
