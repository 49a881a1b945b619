package config

import (
	"errors"
	"io/fs"
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
	case <-time.After(10 * time.Second): // a failure bound: a blocked open never returns
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

// ReadRegularNoFollow reads a regular file only if the path itself is one:
// a symlink as the last component is refused, never followed, and nothing
// blocks. ReadRegular keeps following symlinks (a members file in a
// ConfigMap volume is a chain of them).
func TestReadRegularNoFollow(t *testing.T) {
	const limit = 64
	tests := []struct {
		name string
		// make creates what path names; target is a file it may point to.
		make       func(t *testing.T, path, target string)
		want       string // content read, when wantErr is ""
		wantErr    string
		wantIs     error
		followWant string // what ReadRegular does with the same path: content, or an error part
	}{
		{name: "regular file", make: func(t *testing.T, path, _ string) { rfWrite(t, path, "mine\n") },
			want: "mine\n", followWant: "mine\n"},
		{name: "symlink to a regular file", make: func(t *testing.T, path, target string) { rfSymlink(t, target, path) },
			wantErr: "is a symbolic link, want a regular file", wantIs: ErrNotRegular, followWant: "theirs\n"},
		{name: "dangling symlink", make: func(t *testing.T, path, _ string) { rfSymlink(t, filepath.Join(filepath.Dir(path), "nowhere"), path) },
			wantErr: "is a symbolic link, want a regular file", wantIs: ErrNotRegular, followWant: "no such file or directory"},
		{name: "symlink to a FIFO", make: func(t *testing.T, path, _ string) {
			fifo := filepath.Join(filepath.Dir(path), "fifo")
			rfMkfifo(t, fifo)
			rfSymlink(t, fifo, path)
		}, wantErr: "is a symbolic link, want a regular file", wantIs: ErrNotRegular, followWant: "is a named pipe, want a regular file"},
		{name: "FIFO", make: func(t *testing.T, path, _ string) { rfMkfifo(t, path) },
			wantErr: "is a named pipe, want a regular file", wantIs: ErrNotRegular, followWant: "is a named pipe, want a regular file"},
		{name: "directory", make: func(t *testing.T, path, _ string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is a directory, want a regular file", wantIs: ErrNotRegular, followWant: "is a directory, want a regular file"},
		{name: "over the limit", make: func(t *testing.T, path, _ string) { rfWrite(t, path, strings.Repeat("x", limit+1)) },
			wantErr: "is 65 bytes, must be at most 64 bytes", wantIs: ErrTooLarge, followWant: "is 65 bytes, must be at most 64 bytes"},
		{name: "missing", make: func(*testing.T, string, string) {},
			wantErr: "no such file or directory", wantIs: fs.ErrNotExist, followWant: "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, target := filepath.Join(dir, "etcd.yaml"), filepath.Join(dir, "target")
			rfWrite(t, target, "theirs\n")
			tt.make(t, path, target)

			data, err := rfReadWithin(t, path, func(p string) ([]byte, error) {
				data, _, err := ReadRegularNoFollow(p, limit)
				return data, err
			})
			switch {
			case tt.wantErr == "" && (err != nil || string(data) != tt.want):
				t.Errorf("ReadRegularNoFollow = %q, %v; want %q", data, err, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.wantIs)):
				t.Errorf("ReadRegularNoFollow = %q, %v; want an error with %q that is %v", data, err, tt.wantErr, tt.wantIs)
			}

			data, err = rfReadWithin(t, path, func(p string) ([]byte, error) {
				data, _, err := ReadRegular(p, limit)
				return data, err
			})
			if err == nil && string(data) != tt.followWant || err != nil && !strings.Contains(err.Error(), tt.followWant) {
				t.Errorf("ReadRegular = %q, %v; want %q", data, err, tt.followWant)
			}
			if got := rfContent(t, target); got != "theirs\n" {
				t.Errorf("a symlink's target was changed: %q", got)
			}
		})
	}
}

// A symlinked directory on the way is resolved: only the last component
// must not be a symlink.
func TestReadRegularNoFollowResolvesDirectories(t *testing.T) {
	dir := t.TempDir()
	realDir := filepath.Join(dir, "real")
	if err := os.Mkdir(realDir, 0o700); err != nil {
		t.Fatal(err)
	}
	rfWrite(t, filepath.Join(realDir, "etcd.yaml"), "mine\n")
	rfSymlink(t, realDir, filepath.Join(dir, "manifests"))
	data, _, err := ReadRegularNoFollow(filepath.Join(dir, "manifests", "etcd.yaml"), 64)
	if err != nil || string(data) != "mine\n" {
		t.Fatalf("ReadRegularNoFollow through a symlinked directory = %q, %v", data, err)
	}
}

// rfReadWithin runs read on path and fails the test if it does not return
// within a deadline (a read blocked on a FIFO); a blocked read is then
// released by opening the FIFO for writing.
func rfReadWithin(t *testing.T, path string, read func(string) ([]byte, error)) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() { data, err := read(path); done <- result{data, err} }()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatalf("reading %s blocked", path)
		return nil, nil
	}
}

func rfWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func rfSymlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func rfMkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

func rfContent(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
