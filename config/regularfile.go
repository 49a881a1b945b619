package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular marks a path that is not a regular file.
var ErrNotRegular = errors.New("want a regular file")

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
// Symlinks are followed; what they lead to must be a regular file of at
// most limit bytes. Errors read as the rest of a sentence about the path
// ("is a named pipe, want a regular file"); a missing file's error wraps
// fs.ErrNotExist.
func ReadRegular(path string, limit int64) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, describeOpenError(path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot be read: %w", err)
	}
	if err := CheckRegular(fi.Mode()); err != nil {
		return nil, nil, err
	}
	if fi.Size() > limit {
		return nil, nil, fmt.Errorf("is %d bytes, must be at most %d bytes", fi.Size(), limit)
	}
	// The file may grow after the stat: the limit holds regardless.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot be read: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("is more than %d bytes, must be at most %d bytes", limit, limit)
	}
	return data, fi, nil
}

// describeOpenError turns an open failure into what the user must fix.
// Opening a socket fails with "no such device or address", which hides
// that the path simply names the wrong kind of file.
func describeOpenError(path string, err error) error {
	if fi, statErr := os.Stat(path); statErr == nil {
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
