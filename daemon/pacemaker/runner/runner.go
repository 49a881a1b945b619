// Package runner executes the pacemaker and corosync command-line tools
// directly (never through a shell) with a deadline, a cap on the bytes read
// from their output, and cancellation that kills the whole process group.
//
// A hung crm_mon must never stall the agent, and a runaway one must never
// exhaust its memory: those two properties are what this package is for.
// A third is that the agent's own environment never reaches the tools
// (see Environment): they run as root, and nothing the agent was started
// with may change what they do.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdlet/etcdlet/config/trust"
)

// Command is one program invocation. Path should be absolute; a bare name
// is looked up in the fixed SearchPath, never in the agent's PATH. Args
// never pass through a shell.
type Command struct {
	Path string
	Args []string
	// Env holds the command's own "KEY=value" entries, e.g. CIB_file for
	// offline crm_mon, added to the fixed Environment (an entry for a key
	// already there replaces it).
	Env []string
}

// SearchPath is the PATH every command gets, and where a Path without a
// slash is looked up.
const SearchPath = "/usr/sbin:/usr/bin:/sbin:/bin"

// Environment is the whole environment of every command before its own
// Env: a fixed PATH and the C locale (stable, untranslated messages and
// number formats), nothing inherited from the agent. The agent may have
// been started with anything (LD_PRELOAD, PCMK_* or CIB_* variables that
// redirect the tools, proxies, credentials), and the tools run as root.
func Environment() []string {
	return []string{"PATH=" + SearchPath, "LC_ALL=C"}
}

// resolve returns the program to execute for path: path itself when it
// contains a slash, else the first executable regular file of that name
// in SearchPath.
func resolve(path string) (string, error) {
	if strings.Contains(path, "/") {
		return path, nil
	}
	if path == "" {
		return "", &exec.Error{Name: path, Err: exec.ErrNotFound}
	}
	for _, dir := range filepath.SplitList(SearchPath) {
		candidate := filepath.Join(dir, path)
		fi, err := os.Stat(candidate)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", &exec.Error{Name: path, Err: notInSearchPath{}}
}

// checkProgram refuses to run, as root, a program that someone other than
// root could change (package trust), at every run: the commands check
// their programs before any runs (config.Pacemaker.CheckPrograms), and
// this holds for every command, also one added later, and for a program
// replaced after the check. A program that does not exist is left to the
// start, which fails with the usual "no such file or directory".
func checkProgram(program string) error {
	if err := trust.Check(program); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("refused: the program must be a file only root can change: %w", err)
	}
	return nil
}

// notInSearchPath is exec.ErrNotFound, saying where the program was looked
// for.
type notInSearchPath struct{}

func (notInSearchPath) Error() string { return "executable file not found in " + SearchPath }
func (notInSearchPath) Unwrap() error { return exec.ErrNotFound }

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

	program, err := resolve(c.Path)
	if err != nil {
		return Result{}, fmt.Errorf("start %s: %w", c.Path, err)
	}
	if err := checkProgram(program); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", c.Path, err)
	}
	cmd := exec.CommandContext(ctx, program, c.Args...)
	// Never os.Environ(): see Environment. exec drops duplicate keys,
	// keeping the last, so the command's own entries win.
	cmd.Env = append(Environment(), c.Env...)
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
