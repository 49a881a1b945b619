// Package trust checks that a file etcdlet acts on can only have been
// written by root, the way sshd's StrictModes checks authorized_keys.
//
// etcdlet runs as root and takes decisions from files: the configuration
// picks the programs it runs and the image of the etcd pod, the members
// file decides who joins and whose data is moved aside, the certificates
// decide whom etcd trusts. A file that another user can rewrite, or that
// sits in a directory where another user can swap it, hands that user
// those decisions. So every component of the path, and of every symbolic
// link on the way, must be owned by root (or by the user etcdlet runs as)
// and must not be writable by group or others.
//
// One exception keeps shared temporary directories usable: a directory
// writable by everyone that has the sticky bit set (/tmp) is accepted,
// because there nobody but an entry's owner can rename or remove it, and
// the next component is itself checked for its owner.
package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds the symbolic links followed for one path, as the
// kernel's own limit (40) does.
const maxLinks = 40

// Check returns nil when path, every directory above it and every
// symbolic link on the way are owned by root or by the user etcdlet runs
// as and are not writable by group or others (see the package comment),
// and an error that names the offending component and how to fix it
// otherwise. path must be absolute. A missing component is reported with
// an error that wraps fs.ErrNotExist.
func Check(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: must be an absolute path", path)
	}
	w := walker{euid: os.Geteuid()}
	if err := w.walk(path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// CheckDir is Check for a directory etcdlet keeps its own files in and
// reads them back from (the state dir, a snapshot store), which it creates
// when it is missing. The directory itself is checked when it exists, else
// the nearest directory above it that does, where it will be created (the
// path is cut at its last component as os.MkdirAll does). Unlike a
// directory on the way to a file, the one checked must not be writable by
// others even with the sticky bit: there anyone could create the entries
// etcdlet reads back before it does. It must be a directory. path must be
// absolute.
func CheckDir(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: must be an absolute path", path)
	}
	existing, exists, err := nearestExisting(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	where := path
	if !exists {
		where = fmt.Sprintf("%s does not exist yet; %s, where it would be created", path, existing)
	}
	w := walker{euid: os.Geteuid()}
	if err := w.walk(existing); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	fi, err := os.Stat(existing)
	if err != nil {
		return fmt.Errorf("%s: cannot check %s: %w", where, existing, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: %s is not a directory", where, existing)
	}
	return nil
}

// nearestExisting returns path and true when it exists (as a name: a
// symbolic link counts, and walk then checks where it leads), else the
// nearest existing directory above it and false.
func nearestExisting(path string) (string, bool, error) {
	full := strings.TrimRight(path, "/")
	for p := full; p != ""; p = strings.TrimRight(p[:strings.LastIndex(p, "/")], "/") {
		_, err := os.Lstat(p)
		if err == nil {
			return p, p == full, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", false, fmt.Errorf("cannot check %s: %w", p, err)
		}
	}
	return "/", full == "", nil
}

type walker struct {
	euid  int
	links int
}

// walk checks path component by component from the root, following
// symbolic links (each link itself checked where it lies).
func (w *walker) walk(path string) error {
	current := "/"
	root, err := os.Lstat(current)
	if err != nil {
		return fmt.Errorf("cannot check %s: %w", current, err)
	}
	if err := w.checkInfo(current, root, false); err != nil {
		return err
	}
	// Not filepath.Clean: it would resolve "link/.." lexically, where the
	// kernel goes up from wherever the link leads.
	rest := strings.Split(path, "/")
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		next := filepath.Join(current, name)
		if name == ".." {
			current = filepath.Dir(current)
			continue
		}
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s does not exist: %w", next, fs.ErrNotExist)
			}
			return fmt.Errorf("cannot check %s: %w", next, err)
		}
		if err := w.checkInfo(next, fi, len(rest) > 0); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			current = next
			continue
		}
		w.links++
		if w.links > maxLinks {
			return fmt.Errorf("more than %d symbolic links on the way to %s", maxLinks, next)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return fmt.Errorf("cannot read the symbolic link %s: %w", next, err)
		}
		if filepath.IsAbs(target) {
			// Restart from the root with the rest of the path appended.
			current = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return nil
}

// checkInfo applies the rules to one component. dir says the walk goes on
// below it, so a sticky world-writable directory is acceptable there.
func (w *walker) checkInfo(path string, fi fs.FileInfo, dir bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("cannot read the owner of %s", path)
	}
	if uid := int(st.Uid); uid != 0 && uid != w.euid {
		return fmt.Errorf("%s is owned by uid %d, must be owned by root%s: another user could change what etcdlet acts on (chown root %s)",
			path, uid, w.orSelf(), path)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil // a link's own mode bits mean nothing on Linux
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 {
		return nil
	}
	if dir && fi.IsDir() && fi.Mode()&fs.ModeSticky != 0 {
		return nil
	}
	who := "group"
	if perm&0o002 != 0 {
		who = "others"
	}
	return fmt.Errorf("%s is writable by %s (mode %04o), must be writable by its owner only: another user could change what etcdlet acts on (chmod go-w %s)",
		path, who, perm, path)
}

func (w *walker) orSelf() string {
	if w.euid == 0 {
		return ""
	}
	return fmt.Sprintf(" or uid %d (the user etcdlet runs as)", w.euid)
}
