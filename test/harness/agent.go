package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Agent is one etcdlet process.
type Agent struct {
	c   *Cluster
	N   int
	Log string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (a *Agent) start() {
	a.c.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		select {
		case <-a.done: // exited by itself: it may start again
		default:
			a.c.t.Fatalf("agent %d already running", a.N)
		}
	}
	logFile, err := os.OpenFile(a.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		a.c.t.Fatalf("%v", err)
	}
	argv := []string{a.c.Binary, "run", "--config", a.c.ConfigPath(a.N)}
	if a.c.Opts.Wrap != nil {
		argv = a.c.Opts.Wrap(a.N, argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if a.c.Opts.Env != nil {
		cmd.Env = append(os.Environ(), a.c.Opts.Env(a.N)...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		a.c.t.Fatalf("start agent %d: %v", a.N, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	a.cmd, a.done = cmd, done
}

// Running reports whether the process runs.
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to be gone. A process
// takes a moment to go on a loaded machine (its memory is freed first);
// one still there after 30s fails the test rather than run on beside a
// restarted one.
func (a *Agent) Kill() {
	if !a.signal(syscall.SIGKILL, 30*time.Second) {
		a.c.t.Fatalf("agent %d still runs 30s after SIGKILL", a.N)
	}
}

// Stop sends SIGTERM and waits up to 30s (etcd may wait out a leader
// transfer); a process still running then is killed and the test fails.
func (a *Agent) Stop() {
	if !a.signal(syscall.SIGTERM, 30*time.Second) {
		a.c.t.Logf("agent %d did not stop within 30s of SIGTERM; killed", a.N)
		a.Kill()
		a.c.t.Fatalf("agent %d ignored SIGTERM", a.N)
	}
}

// Signal sends sig without waiting.
func (a *Agent) Signal(sig syscall.Signal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		_ = a.cmd.Process.Signal(sig)
	}
}

func (a *Agent) signal(sig syscall.Signal, wait time.Duration) bool {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		return false
	}
	a.mu.Lock()
	a.cmd = nil
	a.mu.Unlock()
	return true
}

// Restart starts a stopped agent again with the same configuration.
func (a *Agent) Restart() { a.start() }

// PID is the process ID, 0 when not running.
func (a *Agent) PID() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// LogEntries parses the agent's JSON log lines (non-JSON lines skipped).
func (a *Agent) LogEntries() []map[string]any {
	f, err := os.Open(a.Log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var entries []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			entries = append(entries, e)
		}
	}
	return entries
}

// CountLog counts log entries with the message msg whose attributes
// include every key/value in attrs.
func (a *Agent) CountLog(msg string, attrs map[string]string) int {
	n := 0
	for _, e := range a.LogEntries() {
		if e["msg"] != msg {
			continue
		}
		match := true
		for k, v := range attrs {
			if fmt.Sprint(e[k]) != v {
				match = false
				break
			}
		}
		if match {
			n++
		}
	}
	return n
}

// Get fetches a path from the agent's HTTP listener.
func (a *Agent) Get(path string) (int, []byte, error) {
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(a.c.LocalIP(a.N), strconv.Itoa(a.c.Ports.Agent)), path)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// Metric reads one sample from the agent's /metrics; name includes the
// labels as Prometheus prints them, e.g. `x{a="b"}`.
func (a *Agent) Metric(name string) (float64, error) {
	_, body, err := a.Get("/metrics")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		series, ok := withoutCluster(fields[0])
		if !ok {
			return 0, fmt.Errorf("series %s lacks the label cluster", fields[0])
		}
		if series == name {
			return strconv.ParseFloat(fields[1], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// withoutCluster is a series of /metrics without its label
// cluster="<cluster.name>", which every series carries, and whether it had
// it. The label's value is the agent's own cluster.name, which a test may
// set to another than ClusterName.
func withoutCluster(series string) (string, bool) {
	loc := clusterLabel.FindStringIndex(series)
	if loc == nil {
		return series, false
	}
	before, after := series[:loc[0]], series[loc[1]:]
	switch {
	case strings.HasSuffix(before, "{") && strings.HasPrefix(after, "}"): // the only label
		return strings.TrimSuffix(before, "{") + strings.TrimPrefix(after, "}"), true
	case strings.HasPrefix(after, ","): // the first of several
		return before + strings.TrimPrefix(after, ","), true
	default: // after another label
		return strings.TrimSuffix(before, ",") + after, true
	}
}

// clusterLabel is the label cluster="…" of a series.
var clusterLabel = regexp.MustCompile(`cluster="[^"]*"`)
