package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular marks a path that is not a regular file.
var ErrNotRegular = errors.New("want a regular file")

// ErrTooLarge marks a file over the limit of a read. Its error reads as
// before ("is N bytes, must be at most L bytes"); errors.Is tells it apart
// from a file that cannot be read at all.
var ErrTooLarge = errors.New("file over the size limit")

// tooLarge is a file over the limit of a read.
type tooLarge struct{ msg string }

func (e *tooLarge) Error() string        { return e.msg }
func (e *tooLarge) Is(target error) bool { return target == ErrTooLarge }

// ReadRegularFile reads a small input file (a members file, a CIB file)
// without ever blocking on it; see ReadRegular.
func ReadRegularFile(path string, limit int64) ([]byte, error) {
	data, _, err := ReadRegular(path, limit)
	return data, err
}

// ReadRegular reads a small file without ever blocking on it and returns
// what it read with the file's info. open(2) of a named pipe for reading
// waits for a writer, which would stall the agent's loop and its shutdown,
// so the file is opened non-blocking and checked on the open descriptor (no
// window between a stat and the open in which the path could be swapped).
// Symlinks are followed (a members file in a ConfigMap volume is a chain of
// them); what they lead to must be a regular file of at most limit bytes.
// Errors read as the rest of a sentence about the path ("is a named pipe,
// want a regular file"); a missing file's error wraps fs.ErrNotExist, a
// file that is not regular ErrNotRegular, one over the limit ErrTooLarge.
func ReadRegular(path string, limit int64) ([]byte, fs.FileInfo, error) {
	return readRegular(path, limit, true)
}

// ReadRegularNoFollow is ReadRegular for a file that must be the path
// itself, such as a file etcdlet writes and guards: a symbolic link as the
// last component is refused ("is a symbolic link, want a regular file",
// wrapping ErrNotRegular), never followed, so that nothing is read from
// wherever someone pointed it. Directories on the way are resolved as
// usual.
func ReadRegularNoFollow(path string, limit int64) ([]byte, fs.FileInfo, error) {
	return readRegular(path, limit, false)
}

func readRegular(path string, limit int64, follow bool) ([]byte, fs.FileInfo, error) {
	f, fi, err := openRegular(path, follow)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, nil, &tooLarge{fmt.Sprintf("is %d bytes, must be at most %d bytes", fi.Size(), limit)}
	}
	// The file may grow after the stat: the limit holds regardless. The
	// buffer is sized from the stat, so a file that did not grow is read
	// into one allocation (the room beyond it is for the read that sees
	// the end).
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, nil, fmt.Errorf("cannot be read: %w", err)
	}
	data := buf.Bytes()
	if int64(len(data)) > limit {
		return nil, nil, &tooLarge{fmt.Sprintf("is more than %d bytes, must be at most %d bytes", limit, limit)}
	}
	return data, fi, nil
}

// openRegular opens a file for reading without ever blocking on it and
// checks on the open descriptor that it is a regular file (no window
// between a stat and the open in which the path could be swapped).
func openRegular(path string, follow bool) (*os.File, fs.FileInfo, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	if !follow {
		// open(2) fails with ELOOP on a symlink as the last component.
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, nil, describeOpenError(path, err, follow)
	}
	fi, err := f.Stat()
	if err == nil {
		err = CheckRegular(fi.Mode())
	} else {
		err = fmt.Errorf("cannot be read: %w", err)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// describeOpenError turns an open failure into what the user must fix.
// Opening a socket fails with "no such device or address", and opening a
// symlink without following it with "too many levels of symbolic links",
// which hide that the path simply names the wrong kind of file. The path
// is looked at the way it was opened (lstat when not following), so an
// ELOOP from a loop elsewhere in the path is not mistaken for a symlink
// as the last component.
func describeOpenError(path string, err error, follow bool) error {
	stat := os.Stat
	if !follow {
		stat = os.Lstat
	}
	if fi, statErr := stat(path); statErr == nil {
		if kindErr := CheckRegular(fi.Mode()); kindErr != nil {
			return kindErr
		}
	}
	return fmt.Errorf("cannot be read: %w", err)
}

// CheckRegular refuses anything but a regular file, saying what it is.
func CheckRegular(m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	return fmt.Errorf("is %s, %w", fileKind(m), ErrNotRegular)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "not a regular file (" + m.Type().String() + ")"
	}
}
