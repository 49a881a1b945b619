package campaign

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// diskSize is the size of each host's disk: its data dir, the dirs moved
// aside and its state dir share it, as on a host. etcd preallocates its
// write-ahead log in 64 MB files.
const diskSize = "256m"

// mountDisk gives a host a small filesystem of its own (tmpfs), so that a
// fault can fill it; it is unmounted after the test, once the agents have
// stopped.
func mountDisk(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+diskSize+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs on %s (a host's disk): %v: %s", diskSize, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fill writes a file that takes every free byte of the filesystem that
// holds dir; it returns the file, which a heal removes.
func fill(dir string) (string, error) {
	path := filepath.Join(dir, "campaign-filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path, nil
			}
			return path, fmt.Errorf("fill %s: %w", dir, err)
		}
	}
}
