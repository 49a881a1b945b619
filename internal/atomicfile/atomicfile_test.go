package atomicfile

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/fstest"
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

// Write replaces what is at the path, never writing through it: a symlink
// is replaced and its target left as it was, a FIFO is replaced without
// being opened (which would block), a directory is refused.
func TestWriteReplacesThePathItself(t *testing.T) {
	const theirs = "theirs\n"
	tests := []struct {
		name string
		// place puts something at path; outside is a directory elsewhere.
		place   func(t *testing.T, path, outside string)
		wantErr bool
		// check verifies what is outside afterwards.
		check func(t *testing.T, outside string)
	}{
		{name: "symlink to a file", place: func(t *testing.T, path, outside string) {
			target := filepath.Join(outside, "target")
			if err := os.WriteFile(target, []byte(theirs), 0o644); err != nil {
				t.Fatal(err)
			}
			fstest.Symlink(t, target, path)
		}, check: func(t *testing.T, outside string) {
			target := filepath.Join(outside, "target")
			got, err := os.ReadFile(target)
			fi, statErr := os.Lstat(target)
			if err != nil || string(got) != theirs || statErr != nil || fi.Mode() != 0o644 {
				t.Errorf("the symlink's target: %q, %v, %v; want %q, 0644, untouched", got, err, fi, theirs)
			}
		}},
		{name: "dangling symlink", place: func(t *testing.T, path, outside string) {
			fstest.Symlink(t, filepath.Join(outside, "nowhere"), path)
		}, check: func(t *testing.T, outside string) {
			if _, err := os.Lstat(filepath.Join(outside, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a file was created where the symlink pointed: %v", err)
			}
		}},
		{name: "symlink to a directory", place: func(t *testing.T, path, outside string) {
			fstest.Symlink(t, outside, path)
		}, check: func(t *testing.T, outside string) {
			if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
				t.Errorf("something was written into the directory the symlink pointed to: %v, %v", entries, err)
			}
		}},
		{name: "FIFO", place: func(t *testing.T, path, _ string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "directory", wantErr: true, place: func(t *testing.T, path, _ string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			path := filepath.Join(dir, "etcd.yaml")
			tt.place(t, path, outside)
			done := make(chan error, 1)
			go func() { done <- Write(path, contents[1], 0o600) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Write blocked")
			}
			fi, statErr := os.Lstat(path)
			switch {
			case tt.wantErr:
				if err == nil || statErr != nil || !fi.IsDir() {
					t.Errorf("Write = %v and the path is %v (%v); want an error, the directory left", err, fi, statErr)
				}
			case err != nil:
				t.Fatalf("Write: %v", err)
			case statErr != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600:
				t.Errorf("the path is %v (%v); want a regular file, 0600", fi, statErr)
			default:
				if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, contents[1]) {
					t.Errorf("the path holds %d bytes (%v), want the %d written", len(got), err, len(contents[1]))
				}
			}
			if tt.check != nil {
				tt.check(t, outside)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(dir, ".etcd.yaml.tmp-*")); len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}
