package memberlist

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unblockFIFO opens the write end of a FIFO so that a reader stuck in
// open(2) (the defect under test) returns and the test binary can exit.
func unblockFIFO(path string) {
	if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

// age dates path (or what it links to) a minute back, so that a
// reconcile pass does not leave it to the watch as just modified.
func age(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func TestRefreshRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	tests := []struct {
		name string
		// make creates what the members path names.
		make    func(t *testing.T, path string)
		wantErr string
	}{
		{"named pipe", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unblockFIFO(path) })
			age(t, path)
		}, "is a named pipe, want a regular file"},
		{"symlink to a named pipe", func(t *testing.T, path string) {
			fifo := filepath.Join(filepath.Dir(path), "pipe")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unblockFIFO(fifo) })
			if err := os.Symlink("pipe", path); err != nil {
				t.Fatal(err)
			}
			age(t, path)
		}, "is a named pipe, want a regular file"},
		{"unix socket", func(t *testing.T, path string) {
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			age(t, path)
		}, "is a socket, want a regular file"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			age(t, path)
		}, "is a directory, want a regular file"},
		{"character device", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}, "is a character device, want a regular file"},
		{"oversized file", func(t *testing.T, path string) {
			line := "# " + strings.Repeat("x", 1021) + "\n" // 1 KiB of comment
			writeSettled(t, path, strings.Repeat(line, 1025))
		}, "is 1049600 bytes, must be at most 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A short directory: a unix socket path must fit in 108 bytes.
			dir, err := os.MkdirTemp("", "memberlist")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			path := filepath.Join(dir, "members")
			tt.make(t, path)
			good := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
			s := New(fileConfig(path, 0), slog.New(slog.NewTextHandler(io.Discard, nil)), good)

			done := make(chan bool)
			go func() { done <- s.Refresh() }()
			select {
			case changed := <-done:
				if changed {
					t.Error("a refused file changed the list")
				}
			case <-time.After(watchDeadline):
				t.Fatalf("reading the members file blocked for more than %s", watchDeadline)
			}
			err = s.Err()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and saying %q", err, path, tt.wantErr)
			}
			if current(s) != "192.0.2.1 " {
				t.Errorf("the last good list must stay in force, got %q", current(s))
			}
		})
	}
}
