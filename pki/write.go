package pki

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// Layout is where the files go: kubeadm keeps etcd's certificates in
// /etc/kubernetes/pki/etcd and kube-apiserver's etcd client certificate
// one level up, in /etc/kubernetes/pki.
type Layout struct {
	EtcdDir string
	PKIDir  string
}

// KubeadmLayout is kubeadm's layout around an etcd directory: PKIDir is
// its parent.
func KubeadmLayout(etcdDir string) Layout {
	return Layout{EtcdDir: etcdDir, PKIDir: filepath.Dir(filepath.Clean(etcdDir))}
}

// Dir is the directory of a profile's files.
func (l Layout) Dir(p Profile) string {
	if p.Location == InPKIDir {
		return l.PKIDir
	}
	return l.EtcdDir
}

// CertPath is the path of a profile's certificate.
func (l Layout) CertPath(p Profile) string { return filepath.Join(l.Dir(p), p.Name+".crt") }

// KeyPath is the path of a profile's private key.
func (l Layout) KeyPath(p Profile) string { return filepath.Join(l.Dir(p), p.Name+".key") }

// Modes of the files written: private keys are readable by their owner
// only; certificates are public.
const (
	KeyMode  fs.FileMode = 0o600
	CertMode fs.FileMode = 0o644
	// DirMode is the mode of directories Write creates.
	DirMode fs.FileMode = 0o700
)

// File is one file to write.
type File struct {
	Path string
	Data []byte
	Mode fs.FileMode
}

// Files are the set's keys and certificates in the layout, each key
// before its certificate.
func (s *Set) Files(l Layout) []File {
	var files []File
	for _, is := range s.Certs {
		files = append(files,
			File{Path: l.KeyPath(is.Profile), Data: is.KeyPEM, Mode: KeyMode},
			File{Path: l.CertPath(is.Profile), Data: is.CertPEM, Mode: CertMode})
	}
	return files
}

// ExistsError is Write's refusal to replace files without Force.
type ExistsError struct{ Paths []string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("refusing to replace existing files, nothing was written: %s", strings.Join(e.Paths, ", "))
}

// Moved is an existing file kept under a new name.
type Moved struct{ From, To string }

// Report is what Write did.
type Report struct {
	Written    []string
	MovedAside []Moved
}

// WriteOptions tune Write.
type WriteOptions struct {
	// Force replaces existing files, keeping each under
	// <name>.<timestamp>.bak; without it Write refuses to replace any.
	Force bool
	// Now is the time of the timestamp in backup names (UTC, seconds).
	Now time.Time
	// BeforeRename, if set, is called with the content of every staged
	// file as read back from disk, keyed by its final path, after all are
	// written and synced and before any is renamed into place. An error
	// aborts the write with nothing installed.
	BeforeRename func(staged map[string][]byte) error
}

// Write installs files so that each path holds either its old content or
// the complete new one, never a part, and so that an existing file is
// never replaced silently:
//
//  1. any existing path makes Write refuse, naming them all, unless Force;
//  2. missing directories are created with mode 0700;
//  3. every file is written to a temporary file in its directory, with
//     its mode, and fsynced; BeforeRename checks what was written;
//  4. with Force, each existing file is kept as <name>.<timestamp>.bak (a
//     hard link, or a copy where links are not supported), so its name
//     never disappears, and the directories are fsynced;
//  5. the temporary files are renamed into place in the order given (a
//     new path is linked, which fails rather than replaces a file that
//     appeared meanwhile), the directory fsynced after each one.
//
// A failure before step 5 leaves every path as it was, and removes the
// temporary files and the backups it made. A failure during step 5 (which
// takes only renames) returns a *PartialError saying which paths are new.
// Because each rename is durable before the next starts, what a crash
// (of the process or the machine) leaves is a prefix of that order: every
// file up to some point new, every later one old, the backups complete.
func Write(files []File, opts WriteOptions) (*Report, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	files = slices.Clone(files)
	seen := map[string]bool{}
	var dirs []string
	for i := range files {
		files[i].Path = filepath.Clean(files[i].Path)
		p := files[i].Path
		if seen[p] {
			return nil, fmt.Errorf("%s is to be written twice", p)
		}
		seen[p] = true
		if d := filepath.Dir(p); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	existed := map[string]bool{}
	var existing []string
	for _, f := range files {
		fi, err := os.Lstat(f.Path)
		switch {
		case err == nil && fi.IsDir():
			return nil, fmt.Errorf("%s is a directory", f.Path)
		case err == nil:
			existed[f.Path] = true
			existing = append(existing, f.Path)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	if len(existing) > 0 && !opts.Force {
		return nil, &ExistsError{Paths: existing}
	}
	for _, d := range dirs {
		if err := mkdirPrivate(d); err != nil {
			return nil, err
		}
	}

	temps := map[string]string{}
	defer func() {
		for _, t := range temps {
			os.Remove(t)
		}
	}()
	for _, f := range files {
		t, err := stage(f)
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", f.Path, err)
		}
		temps[f.Path] = t
	}
	if opts.BeforeRename != nil {
		staged := map[string][]byte{}
		for p, t := range temps {
			data, err := os.ReadFile(t)
			if err != nil {
				return nil, fmt.Errorf("read back %s: %w", t, err)
			}
			staged[p] = data
		}
		if err := opts.BeforeRename(staged); err != nil {
			return nil, fmt.Errorf("nothing was installed: %w", err)
		}
	}

	rep := &Report{}
	stamp := opts.Now.UTC().Format("20060102T150405Z")
	for _, f := range files {
		if !existed[f.Path] {
			continue
		}
		bak, err := backup(f.Path, stamp)
		if err != nil {
			for _, m := range rep.MovedAside {
				os.Remove(m.To) // a second name of a file still in place
			}
			return nil, fmt.Errorf("keep %s aside: %w; nothing was replaced", f.Path, err)
		}
		rep.MovedAside = append(rep.MovedAside, Moved{From: f.Path, To: bak})
	}
	if len(rep.MovedAside) > 0 {
		for _, d := range dirs {
			if err := atomicfile.SyncDir(d); err != nil {
				return nil, fmt.Errorf("sync directory %s after keeping the old files aside: %w; nothing was replaced", d, err)
			}
		}
	}
	for _, f := range files {
		var err error
		if existed[f.Path] {
			err = os.Rename(temps[f.Path], f.Path)
		} else {
			err = installNew(temps[f.Path], f.Path)
		}
		if err != nil {
			return rep, &PartialError{Failed: f.Path, Err: err, Report: *rep, Pending: pending(files, rep.Written, f.Path)}
		}
		delete(temps, f.Path)
		rep.Written = append(rep.Written, f.Path)
		if err := atomicfile.SyncDir(filepath.Dir(f.Path)); err != nil {
			return rep, fmt.Errorf("%s installed, but syncing its directory failed; not installed: [%s]: %w",
				f.Path, strings.Join(pending(files, rep.Written, ""), ", "), err)
		}
	}
	return rep, nil
}

// PartialError is a failure while renaming files into place: the paths in
// Report.Written hold new content, Failed and Pending their old content
// (if any); Report.MovedAside lists the backups.
type PartialError struct {
	Failed  string
	Err     error
	Report  Report
	Pending []string
}

func (e *PartialError) Error() string {
	msg := fmt.Sprintf("install %s: %v; already replaced: [%s]; unchanged: [%s]", e.Failed, e.Err,
		strings.Join(e.Report.Written, ", "), strings.Join(append([]string{e.Failed}, e.Pending...), ", "))
	if len(e.Report.MovedAside) > 0 {
		var kept []string
		for _, m := range e.Report.MovedAside {
			kept = append(kept, m.From+" -> "+m.To)
		}
		msg += "; previous files kept as: " + strings.Join(kept, ", ")
	}
	return msg
}

func (e *PartialError) Unwrap() error { return e.Err }

func pending(files []File, written []string, failed string) []string {
	var rest []string
	for _, f := range files {
		if f.Path != failed && !slices.Contains(written, f.Path) {
			rest = append(rest, f.Path)
		}
	}
	return rest
}

// mkdirPrivate creates dir and its missing parents with mode 0700
// exactly (whatever the umask); existing directories are left alone.
func mkdirPrivate(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], DirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := os.Chmod(missing[i], DirMode); err != nil {
			return err
		}
	}
	return nil
}

// stage writes f to a new temporary file beside f.Path, with f.Mode, and
// syncs it; it returns the temporary file's path.
func stage(f File) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), "."+filepath.Base(f.Path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := tmp.Name()
	err = tmp.Chmod(f.Mode)
	if err == nil {
		_, err = tmp.Write(f.Data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// installNew gives the staged file its final name without replacing
// anything: link(2) fails when the name exists. Where hard links are not
// supported, it checks and renames.
func installNew(tmp, path string) error {
	err := os.Link(tmp, path)
	if err == nil {
		return os.Remove(tmp)
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while writing; not replaced", path)
	}
	if !linkUnsupported(err) {
		return err
	}
	if _, serr := os.Lstat(path); serr == nil {
		return fmt.Errorf("%s appeared while writing; not replaced", path)
	}
	return os.Rename(tmp, path)
}

// backup gives path a second name, <path>.<stamp>.bak (or
// <path>.<stamp>-N.bak when that is taken), and returns it.
func backup(path, stamp string) (string, error) {
	for n := 1; n <= 100; n++ {
		bak := path + "." + stamp + ".bak"
		if n > 1 {
			bak = fmt.Sprintf("%s.%s-%d.bak", path, stamp, n)
		}
		err := os.Link(path, bak)
		if err != nil && linkUnsupported(err) {
			err = copyFile(path, bak)
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return bak, nil
	}
	return "", fmt.Errorf("too many backups of %s at %s", path, stamp)
}

func linkUnsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EMLINK)
}

// copyFile copies src to the new file dst with src's permissions (a
// symbolic link as a link), failing if dst exists.
func copyFile(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if err = out.Chmod(fi.Mode().Perm()); err == nil {
		_, err = io.Copy(out, bytes.NewReader(data))
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}

// Install writes a set in a layout with Write, after checking that every
// staged file reads back exactly as issued and that each certificate and
// key, as read from disk, still passes Verify. opts.BeforeRename, if set,
// runs after that check.
func Install(ca *CA, set *Set, l Layout, opts WriteOptions) (*Report, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	then := opts.BeforeRename
	opts.BeforeRename = func(staged map[string][]byte) error {
		for _, is := range set.Certs {
			certPath, keyPath := l.CertPath(is.Profile), l.KeyPath(is.Profile)
			onDisk := is
			onDisk.CertPEM, onDisk.KeyPEM = staged[certPath], staged[keyPath]
			if !bytes.Equal(onDisk.CertPEM, is.CertPEM) || !bytes.Equal(onDisk.KeyPEM, is.KeyPEM) {
				return fmt.Errorf("%s or %s reads back different from what was written", certPath, keyPath)
			}
			if err := Verify(ca, onDisk, opts.Now); err != nil {
				return fmt.Errorf("%s: %w", certPath, err)
			}
		}
		if then != nil {
			return then(staged)
		}
		return nil
	}
	return Write(set.Files(l), opts)
}
