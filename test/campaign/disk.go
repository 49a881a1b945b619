package campaign

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// pruneAbove is the share of a host's disk in use past which the campaign,
// as an operator would, deletes the data dirs etcdlet moved aside there,
// oldest first. etcdlet keeps every one (it never deletes data), each
// holds etcd's preallocated 64 MB log, and a campaign moves many aside.
const pruneAbove = 0.5

// pruneMovedAside deletes host n's moved-aside data dirs, oldest first,
// while its disk is more than pruneAbove full; the journal forgets them,
// for the operator deleted them, not etcdlet. It returns how many went.
func (cp *campaign) pruneMovedAside(n int) int {
	dataDir := cp.c.DataDir(n)
	disk := filepath.Dir(dataDir)
	var moved []string
	for _, pattern := range []string{dataDir + ".etcdlet-moved-*", filepath.Join(dataDir, "etcdlet-moved-*")} {
		m, _ := filepath.Glob(pattern)
		moved = append(moved, m...)
	}
	// The names end in their UTC time, so their order is their age within
	// each pattern; a mount point's dirs (inside) are rare enough here.
	slices.SortFunc(moved, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	pruned := 0
	for _, dir := range moved {
		if used(disk) <= pruneAbove {
			break
		}
		cp.obs.wipe(dir, func() { cp.must(os.RemoveAll(dir)) })
		pruned++
	}
	return pruned
}

// used is the share of the filesystem holding dir that is in use.
func used(dir string) float64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Blocks == 0 {
		return 0
	}
	return 1 - float64(st.Bavail)/float64(st.Blocks)
}
