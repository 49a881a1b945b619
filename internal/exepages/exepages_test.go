package exepages

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const smapsFixture = `00400000-01a06000 r-xp 00000000 fd:01 4194 /usr/bin/etcdlet (deleted)
Size:              22552 kB
Rss:               15316 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me dw sd
01a06000-030e0000 r--p 01605000 fd:01 4194 /usr/bin/etcdlet (deleted)
Rss:               16104 kB
Anonymous:             0 kB
030e0000-030e4000 r--p 02cdf000 fd:01 4194 /usr/bin/etcdlet (deleted)
Rss:                  16 kB
Anonymous:             4 kB
030e4000-031b2000 rw-p 02ce3000 fd:01 4194 /usr/bin/etcdlet (deleted)
Rss:                 648 kB
Anonymous:           120 kB
031b2000-05201000 rw-p 00000000 00:00 0 
Rss:                 216 kB
Anonymous:           216 kB
7f9ed922b000-7f9ed9381000 r-xp 00026000 fd:01 811 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 916 kB
Anonymous:             0 kB
7f9ed9400000-7f9ed9401000 r--s 00000000 fd:01 4194 /usr/bin/etcdlet (deleted)
Rss:                   4 kB
Anonymous:             0 kB
7f9ed9500000-7f9ed9501000 r-xp 00000000 fd:01 4195 /usr/bin/etcdlet.dpkg-new
Rss:                   4 kB
Anonymous:             0 kB
7ffd1c9f0000-7ffd1ca11000 rw-p 00000000 00:00 0                          [stack]
Rss:                  20 kB
Anonymous:            20 kB
`

// Only the executable's private read-only mappings without a private copy
// of a page are released: not its data, not a page written since it was
// mapped (a relocation), not a shared mapping, not another file.
func TestReleasable(t *testing.T) {
	maps, err := parseSmaps(strings.NewReader(smapsFixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 9 {
		t.Fatalf("parsed %d mappings, want 9: %+v", len(maps), maps)
	}
	if got := maps[8].path; got != "[stack]" {
		t.Errorf("path of the stack %q", got)
	}
	if got := maps[4].path; got != "" {
		t.Errorf("path of an anonymous mapping %q", got)
	}
	got := releasableOf(maps, "/usr/bin/etcdlet (deleted)")
	if len(got) != 2 || got[0].start != 0x400000 || got[1].end != 0x30e0000 {
		t.Fatalf("releasable = %+v, want the text and the read-only data", got)
	}
	if got[0].resident+got[1].resident != (15316+16104)<<10 {
		t.Errorf("resident %d + %d", got[0].resident, got[1].resident)
	}
	if got := releasableOf(maps, "/usr/bin/etcdlet"); len(got) != 0 {
		t.Errorf("another path's mappings released: %+v", got)
	}
}

func TestParseSmapsRefusesGarbage(t *testing.T) {
	for _, in := range []string{"Rss: 4 kB\n", "zz-00 r-xp 0 0:0 0\n", "00400000-01a06000 r-xp\n"} {
		if _, err := parseSmaps(strings.NewReader(in)); err == nil {
			t.Errorf("parseSmaps(%q) took it", in)
		}
	}
}

// TestMain re-executes this test binary as the process whose pages a test
// releases: "populate" maps every page of its executable, "release" calls
// Release, each answered with a line once done.
func TestMain(m *testing.M) {
	if os.Getenv("EXEPAGES_CHILD") == "" {
		os.Exit(m.Run())
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "populate":
			maps, err := releasable("self")
			for _, m := range maps {
				if err == nil {
					_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_POPULATE_READ)
					if errno != 0 {
						err = errno
					}
				}
			}
			fmt.Printf("populated %v\n", err)
		case "release":
			_, err := Release()
			fmt.Printf("released %v\n", err)
		}
	}
	os.Exit(0)
}

// residentOf is the resident size of the mappings Release would unmap in
// process pid.
func residentOf(t *testing.T, pid int) int64 {
	t.Helper()
	maps, err := releasable(strconv.Itoa(pid))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, m := range maps {
		sum += m.resident
	}
	return sum
}

// On a running process whose executable is all resident: its pages go,
// and it runs on (what it reads next is mapped again).
func TestReleaseGivesBackThePages(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "EXEPAGES_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	answers := bufio.NewScanner(stdout)
	ask := func(what, want string) {
		t.Helper()
		fmt.Fprintln(stdin, what)
		if !answers.Scan() || answers.Text() != want {
			t.Fatalf("asked to %s, the process answered %q (%v), want %q", what, answers.Text(), answers.Err(), want)
		}
	}
	ask("populate", "populated <nil>")
	before := residentOf(t, cmd.Process.Pid)
	ask("release", "released <nil>")
	after := residentOf(t, cmd.Process.Pid)
	t.Logf("resident: %d KiB with every page mapped, %d KiB after the release", before>>10, after>>10)
	if before < 1<<20 || after > before/2 {
		t.Errorf("resident %d bytes with every page mapped, %d after the release: want most of them gone", before, after)
	}
	ask("release", "released <nil>")
}
