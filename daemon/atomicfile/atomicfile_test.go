package atomicfile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// contents are large enough that a write takes several syscalls, so a kill
// can land in the middle of one.
var contents = [][]byte{bytes.Repeat([]byte("old manifest line\n"), 1<<14), bytes.Repeat([]byte("new manifest line\n"), 1<<14)}

// TestMain re-executes this test binary as the writer a test kills.
func TestMain(m *testing.M) {
	if path := os.Getenv("ATOMICFILE_WRITER"); path != "" {
		for i := 0; ; i++ {
			if err := Write(path, contents[i%2], 0o600); err != nil {
				os.Exit(2)
			}
		}
	}
	os.Exit(m.Run())
}

// TestKillDuringWrite kills a process while it rewrites a file, many times
// at random moments: the file is always the old or the new content, never
// a mix, with its mode; leftovers are dotfiles, which the kubelet ignores.
func TestKillDuringWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etcd.yaml")
	if err := Write(path, contents[0], 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 30 {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), "ATOMICFILE_WRITER="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(5+rand.IntN(40)) * time.Millisecond) // the random moment of the crash
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("round %d: the file is gone after a crash: %v", round, err)
		}
		if !bytes.Equal(got, contents[0]) && !bytes.Equal(got, contents[1]) {
			t.Fatalf("round %d: the file holds %d bytes that are neither the old nor the new content", round, len(got))
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: mode %v", round, fi.Mode().Perm())
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "etcd.yaml" && !strings.HasPrefix(e.Name(), ".") {
				t.Fatalf("round %d: leftover %s would be read by the kubelet", round, e.Name())
			}
		}
	}
}
