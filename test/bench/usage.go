package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// usage is the idle cost of a set of processes over one window.
type usage struct {
	cpu []float64 // percent of one core, per process
	rss []int64   // bytes, per process, at the end of the window
}

// idleUsage samples CPU time and RSS of processes over a window. Every
// process must live through the window.
func idleUsage(t *tb, pids []int, window time.Duration) usage {
	before := make([]cpuTime, len(pids))
	for i, pid := range pids {
		before[i] = readCPUTime(t, pid)
	}
	time.Sleep(window)
	u := usage{cpu: make([]float64, len(pids)), rss: make([]int64, len(pids))}
	for i, pid := range pids {
		u.cpu[i] = 100 * readCPUTime(t, pid).since(before[i]) / window.Seconds()
		u.rss[i] = rssBytes(t, pid)
	}
	return u
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on Linux.
const clockTicks = 100

// cpuTime is the CPU time a process used so far, counted two ways.
// /proc/<pid>/stat counts it in ticks of 10ms, a sixth of the whole
// target (0.05 % of a core) over a minute's window; the nanoseconds each
// thread ran (/proc/<pid>/task/*/schedstat) are exact, but a thread that
// exits takes its own with it.
type cpuTime struct {
	ticks, ran   float64 // seconds
	user, system float64 // the ticks split, seconds
}

func readCPUTime(t *tb, pid int) cpuTime {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read the CPU time of process %d (it exited?): %v", pid, err)
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	c := cpuTime{ticks: (utime + stime) / clockTicks, user: utime / clockTicks, system: stime / clockTicks}
	threads, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, th := range threads {
		b, err := os.ReadFile(th)
		if err != nil {
			continue // exited between the listing and the read
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseFloat(f[0], 64)
			c.ran += ns / 1e9
		}
	}
	return c
}

// since is the CPU time used from before to c: the nanoseconds, unless a
// thread exited meanwhile (the ticks then grew by more than the
// nanoseconds, beyond the ticks' rounding).
func (c cpuTime) since(before cpuTime) float64 {
	ticks, ran := c.ticks-before.ticks, c.ran-before.ran
	if ticks > ran+2.0/clockTicks {
		return ticks
	}
	return ran
}

func rssBytes(t *tb, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the RSS of process %d (it exited?): %v", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb * 1024
		}
	}
	t.Fatalf("no VmRSS for process %d", pid)
	return 0
}
