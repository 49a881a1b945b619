// Package exepages gives back the pages of the running executable that a
// busy moment touched.
//
// A Go program's code and read-only data are mapped from its executable.
// Every page it touches stays mapped, and counts in its resident size,
// until the process exits: the package initialisation, building the
// command tree, a join or a snapshot touch pages that an idle agent never
// reads again. On top, the kernel maps the cached pages around each one
// touched (fault-around): 32 MiB of etcdlet's 68 MB executable were
// resident in an idle agent, of which it reads about half.
//
// Release unmaps them with madvise(MADV_DONTNEED). They are clean pages
// of a file: the next read maps them again from the page cache (or reads
// them from disk), so nothing is lost, and while unmapped they are the
// first the kernel reclaims when memory runs short. Only read-only
// mappings that hold no private copy of a page are released: a page
// written since the mapping was made (a relocation, a debugger's
// breakpoint) would be lost.
package exepages

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release unmaps the clean read-only pages of the running executable and
// returns how many bytes of them were resident. From then on the kernel
// maps only the page read, not its neighbours (MADV_RANDOM): an idle
// agent reads its code here and there, and fault-around added about a
// tenth to what stays resident.
func Release() (int64, error) {
	maps, err := releasable("self")
	if err != nil {
		return 0, err
	}
	var released int64
	for _, m := range maps {
		for _, advice := range []int{unix.MADV_DONTNEED, unix.MADV_RANDOM} {
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), uintptr(advice)); errno != 0 {
				return released, fmt.Errorf("release %x-%x of %s (advice %d): %w", m.start, m.end, m.path, advice, errno)
			}
		}
		released += m.resident
	}
	return released, nil
}

// releasable reads the mappings of process pid ("self" for this one) and
// keeps those Release may unmap (releasableOf).
func releasable(pid string) ([]mapping, error) {
	exe, err := os.Readlink("/proc/" + pid + "/exe")
	if err != nil {
		return nil, fmt.Errorf("find the executable: %w", err)
	}
	f, err := os.Open("/proc/" + pid + "/smaps")
	if err != nil {
		return nil, fmt.Errorf("read the mappings: %w", err)
	}
	defer func() { _ = f.Close() }()
	maps, err := parseSmaps(f)
	if err != nil {
		return nil, fmt.Errorf("read the mappings: %w", err)
	}
	return releasableOf(maps, exe), nil
}

// mapping is one entry of /proc/self/smaps.
type mapping struct {
	start, end uint64
	perms      string // "r-xp"
	path       string
	resident   int64 // Rss, bytes
	anonymous  int64 // Anonymous: private copies of pages, bytes
}

// releasableOf are the mappings of the executable at exe that are
// private, never writable and hold no private copy of a page.
func releasableOf(maps []mapping, exe string) []mapping {
	var out []mapping
	for _, m := range maps {
		if m.path == exe && len(m.perms) == 4 && m.perms[1] == '-' && m.perms[3] == 'p' && m.anonymous == 0 && m.resident > 0 {
			out = append(out, m)
		}
	}
	return out
}

// parseSmaps reads the format of proc_pid_smaps(5): a header line per
// mapping ("start-end perms offset dev inode path") followed by
// "Field: value kB" lines.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var maps []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		key, value, isField := strings.Cut(line, ":")
		if isField && !strings.Contains(key, " ") && !strings.Contains(key, "-") {
			if len(maps) == 0 {
				return nil, fmt.Errorf("field %q before any mapping", key)
			}
			m := &maps[len(maps)-1]
			switch key {
			case "Rss":
				m.resident = kilobytes(value)
			case "Anonymous":
				m.anonymous = kilobytes(value)
			}
			continue
		}
		m, err := parseHeader(line)
		if err != nil {
			return nil, err
		}
		maps = append(maps, m)
	}
	return maps, sc.Err()
}

func parseHeader(line string) (mapping, error) {
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return mapping{}, fmt.Errorf("mapping %q: want start-end perms offset dev inode [path]", line)
	}
	lo, hi, _ := strings.Cut(fields[0], "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mapping{}, fmt.Errorf("mapping %q: bad address range", line)
	}
	m := mapping{start: start, end: end, perms: fields[1]}
	// The path is the rest of the line after the inode, and may hold
	// spaces (" (deleted)" once the executable was replaced).
	rest := line
	for range 5 {
		rest = strings.TrimLeft(rest, " ")
		rest = rest[strings.IndexByte(rest+" ", ' '):]
	}
	m.path = strings.TrimLeft(rest, " ")
	return m, nil
}

// kilobytes reads " 1234 kB".
func kilobytes(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
	return n << 10
}
