package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config/trust/trusttest"
	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/internal/proctest"
)

// The test binary doubles as the child process: with helperEnv set it
// behaves as the mode names and never runs the tests. This gives the
// runner real processes, pipes and process groups without a shell.
const helperEnv = "ETCDLET_RUNNER_HELPER"

// pidFileEnv names a file where the "hang" helper writes its grandchild's
// PID once it runs: the test learns that the process tree stands before
// it cancels, whatever the machine's speed.
const pidFileEnv = "ETCDLET_RUNNER_PIDFILE"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		// Under go test -cover the helper is a coverage build too, and
		// without a GOCOVERDIR it warns on its stderr at exit, which the
		// tests read: give it a directory of its own.
		dir, err := os.MkdirTemp("", "runner-helper-cover")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		helperCoverDir = dir
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	case "echo":
		fmt.Printf("args=%s extra=%s", strings.Join(os.Args[1:], ","), os.Getenv("EXTRA"))
		fmt.Fprint(os.Stderr, "some diagnostics")
		os.Exit(3)
	case "hang":
		// Fork a grandchild in the same process group, report its PID,
		// then hang: cancellation must take both down.
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), helperEnv+"=sleep")
		if err := child.Start(); err != nil {
			os.Exit(99)
		}
		fmt.Println(child.Process.Pid)
		if f := os.Getenv(pidFileEnv); f != "" {
			_ = os.WriteFile(f, []byte(strconv.Itoa(child.Process.Pid)), 0o600)
		}
		time.Sleep(time.Hour)
	case "sleep":
		time.Sleep(time.Hour)
	case "flood":
		line := bytes.Repeat([]byte("x"), 4096)
		for {
			if _, err := os.Stdout.Write(line); err != nil {
				os.Exit(98)
			}
		}
	case "crash":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // as the OOM killer would
		time.Sleep(time.Hour)
	case "noisy-stderr":
		os.Stderr.Write(bytes.Repeat([]byte("e"), 4*maxStderr))
		fmt.Print("done")
	}
}

// helperCoverDir is the helpers' GOCOVERDIR.
var helperCoverDir string

func helper(mode string, args ...string) Command {
	return Command{Path: os.Args[0], Args: args, Env: []string{helperEnv + "=" + mode, "GOCOVERDIR=" + helperCoverDir}}
}

func TestExecPassesArgsEnvAndExitCode(t *testing.T) {
	cmd := helper("echo", "--one-shot", "a b")
	cmd.Env = append(cmd.Env, "EXTRA=CIB_file-like")
	res, err := Exec{Timeout: 10 * time.Second, MaxOutput: 1 << 20}.Run(context.Background(), cmd)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code = %d, want 3 (a non-zero exit is a result, not an error)", res.ExitCode)
	}
	// "a b" arrives as one argument: nothing was split by a shell.
	if got, want := string(res.Stdout), "args=--one-shot,a b extra=CIB_file-like"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if string(res.Stderr) != "some diagnostics" {
		t.Errorf("stderr = %q", res.Stderr)
	}
}

// envOf runs the real /usr/bin/env as cmd and returns what it printed,
// one "KEY=value" per line: the environment the command saw.
func envOf(t *testing.T, cmd Command) []string {
	t.Helper()
	res, err := Exec{Timeout: 10 * time.Second, MaxOutput: 1 << 20}.Run(context.Background(), cmd)
	if err != nil {
		t.Fatalf("Run %s: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s exited %d: %s", cmd, res.ExitCode, res.Stderr)
	}
	return strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
}

// A command sees the fixed minimal environment plus its own entries, and
// nothing of the agent's: the tools run as root, and whatever the agent
// was started with (a planted variable, a locale, a PATH) must not reach
// them.
func TestExecEnvironmentIsFixed(t *testing.T) {
	const env = "/usr/bin/env"
	if _, err := os.Stat(env); err != nil {
		t.Fatalf("%s: %v (coreutils)", env, err)
	}
	t.Setenv("ETCDLET_LEAK_CANARY", "agent-secret")
	t.Setenv("CIB_user", "hacluster")
	t.Setenv("LC_ALL", "de_DE.UTF-8")
	t.Setenv("LD_PRELOAD", "/tmp/evil.so") // must not reach env either; /tmp/evil.so does not exist
	t.Setenv("PATH", t.TempDir())

	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"no own entries", nil, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}},
		{"CIB_file", []string{"CIB_file=/var/lib/pacemaker/cib/cib.xml"},
			[]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "CIB_file=/var/lib/pacemaker/cib/cib.xml"}},
		// An own entry for a fixed key replaces it rather than doubling it.
		{"own LC_ALL", []string{"LC_ALL=C.UTF-8", "TZ=Europe/Berlin"},
			[]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "TZ=Europe/Berlin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := envOf(t, Command{Path: env, Env: tt.env})
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("the command saw\n  %s\nwant exactly\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if joined := strings.Join(got, "\n"); strings.Contains(joined, "agent-secret") || strings.Contains(joined, "hacluster") || strings.Contains(joined, "evil") {
				t.Errorf("the agent's environment leaked into the command:\n%s", joined)
			}
		})
	}
	if got := Environment(); len(got) != 2 || got[0] != "PATH="+SearchPath || got[1] != "LC_ALL=C" {
		t.Errorf("Environment() = %q", got)
	}
}

// A bare program name is looked up in SearchPath, never in the agent's
// PATH: a directory the agent's PATH names first cannot substitute a
// program, nor supply one SearchPath does not have.
func TestExecIgnoresTheAgentsPATH(t *testing.T) {
	planted := t.TempDir()
	for _, name := range []string{"env", "etcdlet-planted-tool"} {
		if err := os.WriteFile(filepath.Join(planted, name), []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", planted+":"+os.Getenv("PATH"))

	got := envOf(t, Command{Path: "env"})
	if len(got) != 2 || got[0] != "PATH="+SearchPath {
		t.Errorf("\"env\" ran %q; want the real env from %s", got, SearchPath)
	}
	_, err := Exec{Timeout: 10 * time.Second}.Run(context.Background(), Command{Path: "etcdlet-planted-tool"})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound: a program only the agent's PATH has must not run", err)
	}
	if err != nil && !strings.Contains(err.Error(), SearchPath) {
		t.Errorf("err = %v, want it to name where it looked", err)
	}
}

// A command killed by a signal on its own (a crash, the OOM killer) is an
// error naming the signal, not an exit code of -1.
func TestExecNamesTheSignal(t *testing.T) {
	_, err := Exec{Timeout: 10 * time.Second, MaxOutput: 1 << 20}.Run(context.Background(), helper("crash"))
	if err == nil || !strings.Contains(err.Error(), "killed by signal 9 (killed)") {
		t.Fatalf("err = %v, want it to name SIGKILL", err)
	}
}

func TestExecMissingBinary(t *testing.T) {
	_, err := Exec{Timeout: time.Second}.Run(context.Background(), Command{Path: "/nonexistent/crm_mon"})
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want a start error wrapping ErrNotExist", err)
	}
}

// A program that someone other than root could change never runs, as
// root, whoever asks: the check is at every start, before the exec.
func TestExecRefusesAnUntrustedProgram(t *testing.T) {
	trusttest.RequireRoot(t)
	tests := []struct {
		name string
		// plant makes the program under root and returns its path.
		plant   func(t *testing.T, root, script string) string
		wantErr string // "": runs
	}{
		{"root's program in a private directory", func(t *testing.T, root, script string) string {
			return writeScript(t, filepath.Join(root, "bin/crm_mon"), script)
		}, ""},
		{"another user's program", func(t *testing.T, root, script string) string {
			p := writeScript(t, filepath.Join(root, "bin/crm_mon"), script)
			trusttest.Chown(t, p, trusttest.Nobody, trusttest.Nobody)
			return p
		}, "crm_mon is owned by uid 65534, must be owned by root"},
		{"root's program in another user's directory", func(t *testing.T, root, script string) string {
			p := writeScript(t, filepath.Join(root, "home/bin/crm_mon"), script)
			trusttest.Chown(t, filepath.Dir(p), trusttest.Nobody, trusttest.Nobody)
			return p
		}, "home/bin is owned by uid 65534"},
		{"group-writable program", func(t *testing.T, root, script string) string {
			p := writeScript(t, filepath.Join(root, "bin/crm_mon"), script)
			trusttest.Chmod(t, p, 0o775)
			return p
		}, "crm_mon is writable by group (mode 0775)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			marker := filepath.Join(root, "ran")
			program := tt.plant(t, root, "#!/bin/sh\ntouch "+marker+"\n")
			_, err := Exec{Timeout: 10 * time.Second}.Run(context.Background(), Command{Path: program})
			_, statErr := os.Stat(marker)
			ran := statErr == nil
			switch {
			case tt.wantErr == "" && (err != nil || !ran):
				t.Fatalf("Run = %v (ran: %v), want it run", err, ran)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), "start "+program+": refused: the program must be a file only root can change: ") ||
				!strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Run = %v, want the refusal naming %q", err, tt.wantErr)
			case tt.wantErr != "" && ran:
				t.Fatal("the refused program ran")
			}
		})
	}
}

func writeScript(t *testing.T, path, script string) string {
	t.Helper()
	trusttest.File(t, path, 0o755)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A command that hangs is killed with its whole process group, its
// grandchild too, when the caller cancels and when the timeout passes.
func TestExecKillsProcessGroup(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		// Cancelled once the helper reported its grandchild: the tree
		// stands, however long the helper took to start.
		cmd, pidFile := hang(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			// At the deadline the cancel comes anyway, and the test
			// fails on the tree it then finds.
			_, _ = eventually.Within(time.Minute, 10*time.Millisecond, func() error {
				_, err := os.Stat(pidFile)
				return err
			})
			cancel()
		}()
		res, err := Exec{Timeout: 10 * time.Minute}.Run(ctx, cmd)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want %v", err, context.Canceled)
		}
		waitGone(t, grandchild(t, res))
	})
	t.Run("timeout", func(t *testing.T) {
		// The timeout must pass after the helper started its grandchild,
		// which takes the helper longer on a loaded machine: a timeout that
		// came first is doubled, until a minute has been tried.
		for timeout := 700 * time.Millisecond; ; timeout *= 2 {
			cmd, _ := hang(t)
			start := time.Now()
			res, err := Exec{Timeout: timeout}.Run(context.Background(), cmd)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want %v", err, ErrTimeout)
			}
			if d := time.Since(start); d > timeout+5*time.Second {
				t.Errorf("Run returned %s after a timeout of %s; a hung command must not stall the caller", d, timeout)
			}
			if len(res.Stdout) == 0 && timeout < time.Minute {
				continue // killed before it could report its grandchild
			}
			waitGone(t, grandchild(t, res))
			return
		}
	})
}

// hang is the helper that starts a grandchild and hangs, and the file
// where it reports the grandchild.
func hang(t *testing.T) (Command, string) {
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	cmd := helper("hang")
	cmd.Env = append(cmd.Env, pidFileEnv+"="+pidFile)
	return cmd, pidFile
}

func grandchild(t *testing.T, res Result) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("helper did not report its grandchild: %q", res.Stdout)
	}
	return pid
}

func TestExecOutputLimit(t *testing.T) {
	start := time.Now()
	res, err := Exec{Timeout: time.Minute, MaxOutput: 64 << 10}.Run(context.Background(), helper("flood"))
	if !errors.Is(err, ErrOutputTooLarge) {
		t.Fatalf("err = %v, want ErrOutputTooLarge", err)
	}
	if len(res.Stdout) > 64<<10 {
		t.Errorf("kept %d bytes of stdout, limit is %d", len(res.Stdout), 64<<10)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("overflow took %s to stop the command; it must be killed at once", d)
	}
}

func TestExecBoundsStderrWithoutFailing(t *testing.T) {
	res, err := Exec{Timeout: 10 * time.Second, MaxOutput: 1 << 20}.Run(context.Background(), helper("noisy-stderr"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(res.Stdout) != "done" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	if len(res.Stderr) != maxStderr {
		t.Errorf("kept %d bytes of stderr, want exactly the cap %d", len(res.Stderr), maxStderr)
	}
}

// waitGone waits until pid is no longer a live process (gone or a zombie
// awaiting its reaper).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if _, err := eventually.Within(5*time.Second, 20*time.Millisecond, func() error {
		if proctest.Alive(pid) {
			return errors.New("still alive")
		}
		return nil
	}); err != nil {
		t.Errorf("grandchild %d still runs: the process group was not killed", pid)
	}
}

func TestCommandString(t *testing.T) {
	c := Command{Path: "crm_mon", Args: []string{"--one-shot", "--output-as=xml"}, Env: []string{"CIB_file=/x.xml"}}
	if got, want := c.String(), "CIB_file=/x.xml crm_mon --one-shot --output-as=xml"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
