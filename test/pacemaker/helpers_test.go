package pacemaker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/internal/proctest"
)

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// waitChild returns the PID of the single child of pid (unshare --fork's
// child, the node's init), waiting for it to appear.
func waitChild(t testing.TB, pid int) int {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
	var child int
	eventually.Nil(t, 10*time.Second, fmt.Sprintf("process %d starts a child", pid), func() error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fields := strings.Fields(string(data))
		if len(fields) == 0 {
			return errors.New("no child yet")
		}
		child, err = strconv.Atoi(fields[0])
		return err
	})
	return child
}

// waitGone waits until pid is gone or a zombie.
func waitGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	if _, err := eventually.Within(within, 50*time.Millisecond, func() error {
		if proctest.Alive(pid) {
			return errors.New("still alive")
		}
		return nil
	}); err != nil {
		t.Errorf("process %d still running %s after its namespace was killed", pid, within)
	}
}

func nsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

func writeFile(t testing.TB, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

func chownR(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// logTail logs the end of a daemon log, for diagnosing a failed run.
func logTail(t testing.TB, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	t.Logf("--- tail of %s\n%s", path, data)
}
