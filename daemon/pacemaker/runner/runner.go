// Package runner executes the pacemaker and corosync command-line tools
// directly (never through a shell) with a deadline, a cap on the bytes read
// from their output, and cancellation that kills the whole process group.
//
// A hung crm_mon must never stall the agent, and a runaway one must never
// exhaust its memory: those two properties are what this package is for.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Command is one program invocation. Path is run as is (looked up in PATH
// when it has no slash); Args never pass through a shell.
type Command struct {
	Path string
	Args []string
	// Env holds extra "KEY=value" entries appended to the agent's own
	// environment, e.g. CIB_file for offline crm_mon.
	Env []string
}

// String renders the command for logs and error messages.
func (c Command) String() string {
	var b bytes.Buffer
	for _, e := range c.Env {
		b.WriteString(e)
		b.WriteByte(' ')
	}
	b.WriteString(c.Path)
	for _, a := range c.Args {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	return b.String()
}

// Result is what a command that ran to completion produced. A non-zero
// ExitCode is not an error: crm_mon reports "not connected" (102) with XML
// on stdout, and callers need both.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// Runner runs one command. Unit tests of pure logic substitute a Func that
// returns canned bytes; everything else uses Exec.
type Runner interface {
	Run(ctx context.Context, cmd Command) (Result, error)
}

// Func adapts a function to the Runner interface.
type Func func(ctx context.Context, cmd Command) (Result, error)

// Run calls f.
func (f Func) Run(ctx context.Context, cmd Command) (Result, error) { return f(ctx, cmd) }

// Errors a command can end with besides its own exit status.
var (
	ErrTimeout        = errors.New("timed out")
	ErrOutputTooLarge = errors.New("output exceeds the size limit")
)

// maxStderr bounds what is kept of a command's stderr; the rest is
// discarded without blocking the child.
const maxStderr = 64 << 10

// waitDelay bounds how long Wait waits for output pipes after the process
// exited or was killed: a grandchild that escaped the process group must
// not keep the poll hanging.
const waitDelay = 2 * time.Second

// Exec runs commands as child processes.
type Exec struct {
	// Timeout bounds each command; zero means no bound beyond ctx.
	Timeout time.Duration
	// MaxOutput bounds the bytes read from stdout; the process group is
	// killed as soon as it writes more. Zero means no bound.
	MaxOutput int64
}

// Run starts cmd in its own process group and waits for it. On timeout,
// cancellation of ctx or output overflow the whole group is killed with
// SIGKILL and an error wrapping ErrTimeout, ctx.Err() or ErrOutputTooLarge
// is returned.
func (e Exec) Run(ctx context.Context, c Command) (Result, error) {
	parent := ctx
	var cancelTimeout context.CancelFunc = func() {}
	if e.Timeout > 0 {
		ctx, cancelTimeout = context.WithTimeout(ctx, e.Timeout)
	}
	defer cancelTimeout()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	// A process group of its own lets cancellation reach everything the
	// tool forked, not just the direct child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay

	stdout := &cappedBuffer{max: e.MaxOutput, onOverflow: cancel}
	stderr := &cappedBuffer{max: maxStderr}
	cmd.Stdout = stdout
	cmd.Stderr = stderr

	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", c.Path, err)
	}
	waitErr := cmd.Wait()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: cmd.ProcessState.ExitCode()}

	if stdout.Overflowed() {
		return res, fmt.Errorf("%s: %w (%d bytes)", c.Path, ErrOutputTooLarge, e.MaxOutput)
	}
	// A process that exited on its own keeps its result even if ctx ended
	// in the meantime; one that we killed reports why.
	if ctx.Err() != nil && !cmd.ProcessState.Exited() {
		if parent.Err() != nil {
			return res, fmt.Errorf("%s: %w", c.Path, parent.Err())
		}
		return res, fmt.Errorf("%s: %w after %s", c.Path, ErrTimeout, e.Timeout)
	}
	// Killed by a signal it did not get from us (a crash, the OOM killer):
	// no exit code to interpret, so say which signal.
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return res, fmt.Errorf("%s: killed by signal %d (%v)", c.Path, int(ws.Signal()), ws.Signal())
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, fmt.Errorf("wait for %s: %w", c.Path, waitErr)
	}
	return res, nil
}

// cappedBuffer keeps at most max bytes (max 0 = unbounded). With an
// onOverflow callback an overflow is fatal to the command; without one the
// excess is silently dropped so that a chatty stderr never blocks the child.
type cappedBuffer struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	max        int64
	overflowed bool
	onOverflow func()
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.overflowed {
		return 0, ErrOutputTooLarge
	}
	if b.max > 0 && int64(b.buf.Len()+len(p)) > b.max {
		if b.onOverflow == nil {
			b.buf.Write(p[:b.max-int64(b.buf.Len())])
			return len(p), nil
		}
		b.overflowed = true
		b.onOverflow()
		return 0, ErrOutputTooLarge
	}
	return b.buf.Write(p)
}

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

func (b *cappedBuffer) Overflowed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.overflowed
}
