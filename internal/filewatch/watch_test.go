package filewatch

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsnotify/fsnotify"

	"github.com/etcdlet/etcdlet/internal/fstest"
)

func TestResolve(t *testing.T) {
	// resolve returns real paths; the temporary directory may not be one.
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fstest.Mkdir(t, filepath.Join(dir, "cm", "..ts1"))
	fstest.WriteInPlace(t, filepath.Join(dir, "cm", "..ts1", "members"), "192.0.2.1\n")
	fstest.Symlink(t, "..ts1", filepath.Join(dir, "cm", "..data"))
	fstest.Symlink(t, "..data/members", filepath.Join(dir, "cm", "members"))
	fstest.Mkdir(t, filepath.Join(dir, "a", "b"))
	fstest.Symlink(t, "b/../../cm/members", filepath.Join(dir, "a", "up"))
	fstest.Symlink(t, "loop2", filepath.Join(dir, "a", "loop1"))
	fstest.Symlink(t, "loop1", filepath.Join(dir, "a", "loop2"))
	fstest.WriteInPlace(t, filepath.Join(dir, "a", "file"), "192.0.2.1\n")

	tests := []struct {
		name    string
		path    string
		want    []string // relative to dir
		wantErr string
	}{
		{"plain file", "a/file", []string{"a"}, ""},
		{"missing file", "a/none", []string{"a"}, ""},
		{"ConfigMap layout", "cm/members", []string{"cm", "cm/..ts1"}, ""},
		{"dot-dot after a symlink", "a/up", []string{"a", "cm", "cm/..ts1"}, ""},
		{"missing directory", "gone/deeper/members", []string{"."}, "no such file or directory"},
		{"file used as a directory", "a/file/members", []string{"a"}, "is not a directory"},
		{"symlink loop", "a/loop1", []string{"a"}, "too many levels of symbolic links"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := resolve(filepath.Join(dir, tt.path))
			var want []string
			for _, d := range tt.want {
				want = append(want, filepath.Join(dir, d))
			}
			if !slices.Equal(r.dirs, want) {
				t.Errorf("dirs %v, want %v", r.dirs, want)
			}
			if (r.err == nil) != (tt.wantErr == "") || (r.err != nil && !strings.Contains(r.err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", r.err, tt.wantErr)
			}
		})
	}
}

func TestRenamedOver(t *testing.T) {
	const file = "/etc/etcdlet/members"
	ev := func(op fsnotify.Op, name string) fsnotify.Event { return fsnotify.Event{Op: op, Name: name} }
	tests := []struct {
		name           string
		previous, this fsnotify.Event
		want           bool
	}{
		{"a temporary file renamed over it", ev(fsnotify.Rename, "/etc/etcdlet/.members.tmp"), ev(fsnotify.Create, file), true},
		{"created in place (may still be written)", ev(fsnotify.Remove, file), ev(fsnotify.Create, file), false},
		{"a write", ev(fsnotify.Rename, "/etc/etcdlet/.members.tmp"), ev(fsnotify.Write, file), false},
		{"another file created after a rename", ev(fsnotify.Rename, "/etc/etcdlet/.members.tmp"), ev(fsnotify.Create, "/etc/etcdlet/other"), false},
		{"a rename in another directory", ev(fsnotify.Rename, "/tmp/members"), ev(fsnotify.Create, file), false},
		{"the file itself renamed away, then created", ev(fsnotify.Rename, file), ev(fsnotify.Create, file), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := renamedOver(tt.previous, tt.this, file); got != tt.want {
				t.Errorf("renamedOver(%v, %v) = %v, want %v", tt.previous, tt.this, got, tt.want)
			}
		})
	}
}
