package atomicfile

import (
	"bufio"
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

// TestMain re-executes this test binary as the writer a test kills. The
// writer says "writing" once its first write is done, so that every kill
// lands in the rewrite loop rather than in the process's start-up.
func TestMain(m *testing.M) {
	if path := os.Getenv("ATOMICFILE_WRITER"); path != "" {
		for i := 0; ; i++ {
			if err := Write(path, contents[i%2], 0o600); err != nil {
				os.Exit(2)
			}
			if i == 0 {
				os.Stdout.WriteString("writing\n")
			}
		}
	}
	os.Exit(m.Run())
}

// TestKillDuringWrite kills a process while it rewrites a file, many times
// at random moments: the file is always the old or the new content, never
// a mix, with its mode; leftovers are dotfiles, which the kubelet ignores.
// A kill that leaves a temporary file behind landed mid-write, between the
// temporary file's creation and its rename: the test goes on until enough
// kills did, otherwise it would prove nothing.
func TestKillDuringWrite(t *testing.T) {
	const wantMidWrite, maxRounds = 10, 300
	dir := t.TempDir()
	path := filepath.Join(dir, "etcd.yaml")
	if err := Write(path, contents[0], 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	midWrite, round := 0, 0
	for ; midWrite < wantMidWrite && round < maxRounds; round++ {
		killWriter(t, self, path)

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
		leftover := false
		for _, e := range entries {
			switch {
			case e.Name() == "etcd.yaml":
			case strings.HasPrefix(e.Name(), ".etcd.yaml.tmp-"):
				leftover = true
				// Removed so that the next round's leftover is its own.
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("round %d: leftover %s would be read by the kubelet", round, e.Name())
			}
		}
		if leftover {
			midWrite++
		}
	}
	t.Logf("%d of %d kills landed mid-write", midWrite, round)
	if midWrite < wantMidWrite {
		t.Fatalf("only %d of %d kills landed mid-write (want %d): the crash was not tested", midWrite, round, wantMidWrite)
	}
}

// killWriter starts a writer on path, waits until it is rewriting the file,
// and kills it at a random moment of its loop.
func killWriter(t *testing.T, self, path string) {
	t.Helper()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_WRITER="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "writing\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the writer did not start writing: %q, %v", line, err)
	}
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // the random moment of the crash
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}
