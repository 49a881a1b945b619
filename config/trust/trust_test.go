package trust

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config/trust/trusttest"
)

// otherUID owns the files of the untrusted cases.
const otherUID = 4242

func TestCheck(t *testing.T) {
	trusttest.RequireRoot(t)
	tests := []struct {
		name string
		// setup builds a layout under root and returns the path to check.
		setup func(t *testing.T, root string) string
		// wantErr is a part of the error, "" for a trusted path.
		wantErr string
	}{
		{"root-owned file in a private directory", func(t *testing.T, root string) string {
			return file(t, root, "etc/members", 0o644)
		}, ""},
		{"group-writable file", func(t *testing.T, root string) string {
			return file(t, root, "members", 0o664)
		}, "members is writable by group (mode 0664)"},
		{"world-writable file", func(t *testing.T, root string) string {
			return file(t, root, "members", 0o646)
		}, "members is writable by others (mode 0646)"},
		{"group-writable directory above the file", func(t *testing.T, root string) string {
			p := file(t, root, "shared/members", 0o644)
			chmod(t, filepath.Join(root, "shared"), 0o775)
			return p
		}, "shared is writable by group (mode 0775)"},
		{"world-writable directory without the sticky bit", func(t *testing.T, root string) string {
			p := file(t, root, "open/members", 0o644)
			chmod(t, filepath.Join(root, "open"), 0o777)
			return p
		}, "open is writable by others (mode 0777)"},
		{"sticky world-writable directory like /tmp", func(t *testing.T, root string) string {
			p := file(t, root, "tmp/etcdlet/members", 0o644)
			chmod(t, filepath.Join(root, "tmp"), 0o777|fs.ModeSticky)
			return p
		}, ""},
		{"file owned by another user", func(t *testing.T, root string) string {
			p := file(t, root, "members", 0o644)
			chown(t, p, otherUID)
			return p
		}, "members is owned by uid 4242, must be owned by root"},
		{"another user's file in a sticky directory", func(t *testing.T, root string) string {
			p := file(t, root, "tmp/members", 0o644)
			chmod(t, filepath.Join(root, "tmp"), 0o777|fs.ModeSticky)
			chown(t, p, otherUID)
			return p
		}, "owned by uid 4242"},
		{"directory owned by another user", func(t *testing.T, root string) string {
			p := file(t, root, "home/members", 0o644)
			chown(t, filepath.Join(root, "home"), otherUID)
			return p
		}, "home is owned by uid 4242"},
		{"a Kubernetes ConfigMap volume's chain of links", func(t *testing.T, root string) string {
			file(t, root, "vol/..2026_11_24_10_00_00.123/members", 0o644)
			link(t, "..2026_11_24_10_00_00.123", filepath.Join(root, "vol/..data"))
			link(t, "..data/members", filepath.Join(root, "vol/members"))
			return filepath.Join(root, "vol/members")
		}, ""},
		{"a link into a world-writable directory", func(t *testing.T, root string) string {
			file(t, root, "open/members", 0o644)
			chmod(t, filepath.Join(root, "open"), 0o777)
			link(t, filepath.Join(root, "open/members"), filepath.Join(root, "etc/members"))
			return filepath.Join(root, "etc/members")
		}, "open is writable by others"},
		{"a relative link that climbs out with ..", func(t *testing.T, root string) string {
			file(t, root, "open/members", 0o644)
			chmod(t, filepath.Join(root, "open"), 0o777)
			link(t, "../open/members", filepath.Join(root, "etc/members"))
			return filepath.Join(root, "etc/members")
		}, "open is writable by others"},
		{"a link owned by another user", func(t *testing.T, root string) string {
			file(t, root, "real/members", 0o644)
			p := filepath.Join(root, "etc/members")
			link(t, filepath.Join(root, "real/members"), p)
			if err := os.Lchown(p, otherUID, 0); err != nil {
				t.Fatal(err)
			}
			return p
		}, "etc/members is owned by uid 4242"},
		{"a loop of links", func(t *testing.T, root string) string {
			link(t, "b", filepath.Join(root, "loop/a"))
			link(t, "a", filepath.Join(root, "loop/b"))
			return filepath.Join(root, "loop/a")
		}, "more than 40 symbolic links"},
		{"a missing file", func(t *testing.T, root string) string {
			return filepath.Join(root, "nothing/here")
		}, "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir() // 0700, under the sticky /tmp
			path := tt.setup(t, root)
			err := Check(path)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check(%s) = %v, want trusted", path, err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Check(%s) = nil, want an error containing %q", path, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Check(%s) = %v, want an error containing %q", path, err, tt.wantErr)
			}
		})
	}
}

// A directory etcdlet keeps its files in is checked where it is, or,
// before it is created, where it will be created; unlike a directory on
// the way to a file, it must not be writable by others even when sticky.
func TestCheckDir(t *testing.T) {
	trusttest.RequireRoot(t)
	tests := []struct {
		name string
		// setup builds a layout under root and returns the directory to check.
		setup   func(t *testing.T, root string) string
		wantErr string
	}{
		{"private directory", func(t *testing.T, root string) string {
			return dir(t, root, "var/lib/etcdlet", 0o700)
		}, ""},
		{"missing directory under a private one", func(t *testing.T, root string) string {
			dir(t, root, "var/lib", 0o755)
			return filepath.Join(root, "var/lib/etcdlet/agent")
		}, ""},
		{"trailing slash", func(t *testing.T, root string) string {
			return dir(t, root, "state", 0o700) + "/"
		}, ""},
		{"directory owned by another user", func(t *testing.T, root string) string {
			p := dir(t, root, "state", 0o700)
			chown(t, p, otherUID)
			return p
		}, "state is owned by uid 4242, must be owned by root"},
		{"group-writable directory", func(t *testing.T, root string) string {
			return dir(t, root, "state", 0o770)
		}, "state is writable by group (mode 0770)"},
		{"sticky world-writable directory itself", func(t *testing.T, root string) string {
			return dir(t, root, "snapshots", 0o777|fs.ModeSticky)
		}, "snapshots is writable by others (mode 0777)"},
		{"missing directory under another user's", func(t *testing.T, root string) string {
			p := dir(t, root, "home/user", 0o755)
			chown(t, p, otherUID)
			return filepath.Join(p, "etcdlet/state")
		}, "etcdlet/state does not exist yet; " + "ROOT/home/user, where it would be created: ROOT/home/user is owned by uid 4242"},
		{"missing directory under a sticky world-writable one", func(t *testing.T, root string) string {
			p := dir(t, root, "tmp", 0o777|fs.ModeSticky)
			return filepath.Join(p, "state")
		}, "tmp is writable by others (mode 0777)"},
		{"existing directory below a sticky one", func(t *testing.T, root string) string {
			dir(t, root, "tmp", 0o777|fs.ModeSticky)
			return dir(t, root, "tmp/state", 0o700)
		}, ""},
		{"a link to another user's directory", func(t *testing.T, root string) string {
			p := dir(t, root, "home/user/state", 0o700)
			chown(t, p, otherUID)
			link(t, p, filepath.Join(root, "var/state"))
			return filepath.Join(root, "var/state")
		}, "home/user/state is owned by uid 4242"},
		{"a file, not a directory", func(t *testing.T, root string) string {
			return file(t, root, "state", 0o600)
		}, "state is not a directory"},
		{"missing below a file", func(t *testing.T, root string) string {
			return filepath.Join(file(t, root, "state", 0o600), "agent")
		}, "state is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			path := tt.setup(t, root)
			wantErr := strings.ReplaceAll(tt.wantErr, "ROOT", root)
			err := CheckDir(path)
			switch {
			case wantErr == "" && err != nil:
				t.Fatalf("CheckDir(%s) = %v, want trusted", path, err)
			case wantErr != "" && err == nil:
				t.Fatalf("CheckDir(%s) = nil, want an error containing %q", path, wantErr)
			case wantErr != "" && !strings.Contains(err.Error(), wantErr):
				t.Fatalf("CheckDir(%s) = %v, want an error containing %q", path, err, wantErr)
			}
		})
	}
	if err := CheckDir("var/lib/etcdlet"); err == nil || !strings.Contains(err.Error(), "must be an absolute path") {
		t.Fatalf("CheckDir(relative) = %v, want the absolute-path rule", err)
	}
}

func TestCheckMissingWrapsNotExist(t *testing.T) {
	err := Check(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Check of a missing file = %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func TestCheckRefusesRelativePaths(t *testing.T) {
	if err := Check("etc/members"); err == nil || !strings.Contains(err.Error(), "must be an absolute path") {
		t.Fatalf("Check(relative) = %v, want the absolute-path rule", err)
	}
}

// file, dir, chmod and chown make the layouts of the tables under root
// (package trusttest).
func file(t *testing.T, root, rel string, mode fs.FileMode) string {
	return trusttest.File(t, filepath.Join(root, rel), mode)
}

func dir(t *testing.T, root, rel string, mode fs.FileMode) string {
	return trusttest.Dir(t, filepath.Join(root, rel), mode)
}

func chmod(t *testing.T, p string, mode fs.FileMode) { trusttest.Chmod(t, p, mode) }

func chown(t *testing.T, p string, uid int) { trusttest.Chown(t, p, uid, 0) }

func link(t *testing.T, target, at string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

// The members file is checked at every read; the check is a few lstat(2)
// calls per path component, against the read itself as the floor.
func BenchmarkCheck(b *testing.B) {
	root := b.TempDir()
	p := filepath.Join(root, "etc", "etcdlet", "members")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("192.0.2.10\n192.0.2.11\n192.0.2.12\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Check(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read (floor)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
