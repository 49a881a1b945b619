package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What validate, status and render read must never block: a FIFO is
// refused at once, naming what it is.
func TestReadMembersFileNeverBlocks(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "members")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan Errors, 1)
	go func() { _, errs := ReadMembersFile(fifo); done <- errs }()
	select {
	case errs := <-done:
		if len(errs) != 1 || errs[0].Path != "members.file" || !strings.Contains(errs[0].Error(), "is a named pipe, want a regular file") {
			t.Errorf("errors = %v", errs)
		}
	case <-time.After(time.Second):
		// Unblock the reader so the test binary can exit.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("reading a FIFO members file blocked")
	}
}

func TestReadMembersFileAcceptsARegularFileUpToTheCap(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
	}{
		{"small list", "192.0.2.1\n192.0.2.2\n"},
		{"exactly at the cap", strings.Repeat("# "+strings.Repeat("x", 1021)+"\n", 1024)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "members")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			data, err := ReadRegularFile(path, MaxMembersFileBytes)
			if err != nil || string(data) != tt.content {
				t.Fatalf("ReadRegularFile: %d bytes, %v; want the %d bytes written", len(data), err, len(tt.content))
			}
			if len(tt.content) > MaxMembersFileBytes {
				t.Fatalf("test content over the cap: %d", len(tt.content))
			}
		})
	}
}
