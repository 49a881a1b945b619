package sim

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// trace is a schedule's record: what happened, step by step, and (for a
// replay) what the agents logged.
type trace struct {
	mu    sync.Mutex
	lines []string
	logs  bool
}

func newTrace(logs bool) *trace { return &trace{logs: logs} }

func (t *trace) add(now time.Time, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, now.Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (t *trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// writer is an io.Writer for one agent's log lines.
func (t *trace) writer(who string) io.Writer { return logWriter{t: t, who: who} }

type logWriter struct {
	t   *trace
	who string
}

func (l logWriter) Write(p []byte) (int, error) {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.t.lines = append(l.t.lines, "    "+l.who+" log: "+line)
	}
	return len(p), nil
}
