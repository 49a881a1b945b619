package main

import (
	"bufio"
	"fmt"
	"os"
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
	before := make([]float64, len(pids))
	for i, pid := range pids {
		before[i] = cpuSeconds(t, pid)
	}
	time.Sleep(window)
	u := usage{cpu: make([]float64, len(pids)), rss: make([]int64, len(pids))}
	for i, pid := range pids {
		u.cpu[i] = 100 * (cpuSeconds(t, pid) - before[i]) / window.Seconds()
		u.rss[i] = rssBytes(t, pid)
	}
	return u
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on Linux.
const clockTicks = 100

func cpuSeconds(t *tb, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read the CPU time of process %d (it exited?): %v", pid, err)
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks
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
