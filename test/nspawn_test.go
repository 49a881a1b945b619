package test

// A pristine Debian host booted with systemd-nspawn (systemd as its PID 1)
// in its own network namespace and its own cgroups, for the tests that need
// a real systemd (../shared/reference/test-infrastructure.md (h)).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/test/harness"
)

// The install test's host: the file system of a pristine Debian (a copy of
// hack/debian-root.sh's tar file), used with chroot and then booted with
// systemd-nspawn in its own network namespace.
type nspawnHost struct {
	t       *testing.T
	root    string
	console string
	nspawn  *exec.Cmd
	exited  chan struct{}
	pid1    int
	cgroups []string
}

const envDebianRoot = "ETCDLET_DEBIAN_ROOT"

// hostPath is the only PATH of commands in the host.
const hostPath = "PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"

// debianRoot is hack/debian-root.sh's tar file, from ETCDLET_DEBIAN_ROOT.
func debianRoot(t *testing.T) string {
	t.Helper()
	tarball := os.Getenv(envDebianRoot)
	if tarball == "" {
		t.Fatalf("%s is not set: the test boots a pristine Debian root; run `export %s=$(hack/debian-root.sh)` (debootstraps it once into the cache) or `make test`", envDebianRoot, envDebianRoot)
	}
	if _, err := os.Stat(tarball); err != nil {
		t.Fatalf("%s=%s: %v; run `export %s=$(hack/debian-root.sh)`", envDebianRoot, tarball, err, envDebianRoot)
	}
	return tarball
}

// newNspawnHost unpacks a fresh copy of the Debian root.
func newNspawnHost(t *testing.T, tarball string) *nspawnHost {
	t.Helper()
	dir := t.TempDir()
	h := &nspawnHost{t: t, root: filepath.Join(dir, "root"), console: filepath.Join(dir, "console.log"), exited: make(chan struct{})}
	if err := os.Mkdir(h.root, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "tar", "--numeric-owner", "-xf", tarball, "-C", h.root)
	return h
}

// file is a path inside the host, seen from here.
func (h *nspawnHost) file(path string) string { return filepath.Join(h.root, path) }

func (h *nspawnHost) write(path, content string, mode fs.FileMode) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(h.file(path)), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(h.file(path), []byte(content), mode); err != nil {
		h.t.Fatal(err)
	}
}

func (h *nspawnHost) read(path string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.file(path))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func (h *nspawnHost) exists(path string) bool {
	_, err := os.Lstat(h.file(path))
	return err == nil
}

// chroot runs a command in the host's file system without booting it: no
// systemd runs, as in an image build.
func (h *nspawnHost) chroot(argv ...string) (string, error) {
	return runTimeout(2*time.Minute, append([]string{"chroot", h.root, "env", "-i", hostPath, "DEBIAN_FRONTEND=noninteractive"}, argv...)...)
}

// hostSeq numbers the hosts of a test run: their machine and cgroup names
// must differ, also between tests running in parallel.
var hostSeq atomic.Int64

// boot starts systemd-nspawn on the host in the network namespace ns and
// waits until systemd says the system is running (start, then
// waitBooted). The container is powered off when the test ends.
func (h *nspawnHost) boot(ns string, extra ...string) {
	h.t.Helper()
	h.start(ns, extra...)
	h.waitBooted()
}

// start starts systemd-nspawn on the host in the network namespace ns, in
// cgroups of its own in every hierarchy (two containers started from the
// same cgroup would share nspawn's "payload" cgroup, and a kubelet inside
// would create its pods' cgroups at this process's), without waiting for
// the boot: hosts started one after the other boot side by side. extra are
// more systemd-nspawn options (capabilities, system call filters, bind
// mounts). The container is powered off when the test ends.
func (h *nspawnHost) start(ns string, extra ...string) {
	t := h.t
	t.Helper()
	name := fmt.Sprintf("etcdlet-%d-%d", os.Getpid(), hostSeq.Add(1))
	t.Cleanup(h.shutdown)
	var procs []string
	for _, parent := range cgroupParents(t) {
		dir := filepath.Join(parent, name)
		if err := makeCgroup(parent, dir); err != nil {
			t.Fatalf("create the container's cgroup: %v", err)
		}
		h.cgroups = append(h.cgroups, dir)
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	console, err := os.Create(h.console)
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()
	// The shell moves itself into the cgroups, then becomes systemd-nspawn
	// (same PID). --register=no --keep-unit: nspawn neither registers the
	// machine nor asks for a scope unit, which needs no system bus (this
	// machine may have no systemd).
	args := append([]string{"sh", "-c", `for f in $CGROUP_PROCS; do echo $$ > "$f" || exit 1; done; exec "$@"`, "sh",
		"systemd-nspawn", "-D", h.root, "--machine=" + name, "--register=no", "--keep-unit", "--boot",
		"--console=pipe", "-q", "--network-namespace-path=/run/netns/" + ns}, extra...)
	h.nspawn = exec.Command(args[0], args[1:]...)
	h.nspawn.Env = []string{"PATH=" + os.Getenv("PATH"), "CGROUP_PROCS=" + strings.Join(procs, " ")}
	h.nspawn.Stdout, h.nspawn.Stderr = console, console
	if err := h.nspawn.Start(); err != nil {
		t.Fatalf("systemd-nspawn: %v", err)
	}
	go func() { _ = h.nspawn.Wait(); close(h.exited) }()
}

// waitBooted waits until the host that start started runs systemd and
// systemd says the system is running.
func (h *nspawnHost) waitBooted() {
	t := h.t
	t.Helper()
	// PID 1 of the container is systemd-nspawn's child running systemd.
	harness.Eventually(t, 30*time.Second, "the container's systemd started", func() error {
		select {
		case <-h.exited:
			t.Fatalf("systemd-nspawn exited: %v\n%s", h.nspawn.ProcessState, harness.Tail(h.console, 30))
		default:
		}
		for _, pid := range childrenOf(h.nspawn.Process.Pid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				h.pid1 = pid
				return nil
			}
		}
		return errorf("no child of systemd-nspawn (PID %d) runs systemd yet", h.nspawn.Process.Pid)
	})
	harness.Eventually(t, 90*time.Second, "the host's systemd is up", func() error {
		out, _ := h.exec("systemctl", "is-system-running")
		switch state := strings.TrimSpace(out); state {
		case "running":
			return nil
		case "degraded":
			failed, _ := h.exec("systemctl", "--failed", "--no-legend")
			t.Logf("the host booted degraded; failed units:\n%s", failed)
			return nil
		default:
			return errorf("systemctl is-system-running: %s", state)
		}
	})
}

// shutdown powers the container off (killing it if it does not stop) and
// removes its cgroups.
func (h *nspawnHost) shutdown() {
	t := h.t
	if h.nspawn != nil && h.nspawn.Process != nil {
		h.powerOff()
		if t.Failed() {
			t.Logf("the container's console (last lines):\n%s", harness.Tail(h.console, 40))
		}
	}
	for _, cg := range h.cgroups {
		if err := removeCgroup(cg); err != nil {
			t.Errorf("remove the container's cgroup: %v", err)
		}
	}
}

// powerOff stops the container: systemctl poweroff inside, and after a
// minute SIGKILL. Without a PID 1 found there is nothing to power off. It
// may run beside the test's goroutine and be called again.
func (h *nspawnHost) powerOff() {
	select {
	case <-h.exited:
		return
	default:
	}
	if h.pid1 == 0 {
		_ = h.nspawn.Process.Kill()
		<-h.exited
		return
	}
	_, _ = h.exec("systemctl", "poweroff")
	select {
	case <-h.exited:
		return
	case <-time.After(60 * time.Second):
	}
	h.t.Errorf("the container did not power off within 60s; killing it\n%s", harness.Tail(h.console, 30))
	_ = syscall.Kill(h.pid1, syscall.SIGKILL) // ends every process of its PID namespace
	select {
	case <-h.exited:
	case <-time.After(15 * time.Second):
		_ = h.nspawn.Process.Kill()
		<-h.exited
	}
}

// powerOffAll powers the hosts off side by side.
func powerOffAll(hosts ...*nspawnHost) {
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() { defer wg.Done(); h.powerOff() }()
	}
	wg.Wait()
}

// exec runs a command inside the booted host (all its namespaces) and
// returns its standard output; the error carries standard error.
func (h *nspawnHost) exec(argv ...string) (string, error) {
	return runTimeout(3*time.Minute, append([]string{"nsenter", "-t", strconv.Itoa(h.pid1), "-a",
		"env", "-i", hostPath, "DEBIAN_FRONTEND=noninteractive"}, argv...)...)
}

// combined runs a command inside the booted host and returns its standard
// output and error interleaved, as a terminal shows them.
func (h *nspawnHost) combined(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"-t", strconv.Itoa(h.pid1), "-a", "env", "-i", hostPath}, argv...)
	out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
	return string(out), err
}

func (h *nspawnHost) must(argv ...string) string {
	h.t.Helper()
	out, err := h.exec(argv...)
	if err != nil {
		h.t.Fatalf("in the host: %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return out
}

// show returns properties of a unit as systemctl show prints them.
func (h *nspawnHost) show(unit string, props ...string) map[string]string {
	h.t.Helper()
	out := h.must("systemctl", "show", "-p", strings.Join(props, ","), unit)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// journal is the journal of the host's etcdlet units (etcdlet.service and
// any etcdlet@<name>.service, whose lines carry cluster=<name>), for
// failure messages.
func (h *nspawnHost) journal() string {
	out, _ := h.exec("journalctl", "-u", "etcdlet*", "--no-pager", "-n", "40", "-o", "cat")
	return out
}

// waitActive waits until etcdlet.service is active (running) and returns
// its MainPID and start time.
func (h *nspawnHost) waitActive(what string) (pid, started string) {
	h.t.Helper()
	harness.Eventually(h.t, 60*time.Second, what, func() error {
		s := h.show("etcdlet.service", "ActiveState", "SubState", "MainPID", "ExecMainStartTimestampMonotonic")
		if s["ActiveState"] != "active" || s["SubState"] != "running" {
			return errorf("etcdlet.service is %s (%s)\n%s", s["ActiveState"], s["SubState"], h.journal())
		}
		pid, started = s["MainPID"], s["ExecMainStartTimestampMonotonic"]
		return nil
	})
	return pid, started
}

// waitHealthy waits until `etcdlet status` in the host shows the one
// member on 127.0.0.1 healthy, listed and voting.
func (h *nspawnHost) waitHealthy(what string) {
	h.t.Helper()
	harness.Eventually(h.t, 60*time.Second, what, func() error {
		out, err := h.exec("etcdlet", "status", "-o", "json")
		if err != nil {
			return fmt.Errorf("etcdlet status: %v: %s", err, out)
		}
		var r statusreport.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return fmt.Errorf("etcdlet status -o json: %v: %s", err, out)
		}
		if !r.Converged || len(r.Members) != 1 {
			return errorf("not converged: %s", out)
		}
		if m := r.Members[0]; m.IP != "127.0.0.1" || m.Name != "etcd-main-127.0.0.1" || m.Health != "healthy" ||
			m.InList != "yes" || (m.Role != "leader" && m.Role != "voter") {
			return errorf("member %+v is not the healthy listed voter on 127.0.0.1", m)
		}
		return nil
	})
}

// runTimeout runs a command with a deadline and returns its standard
// output; an error carries standard error.
func runTimeout(timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), fmt.Errorf("%w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var children []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …": comm may hold spaces, so split after ')'.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		if f := strings.Fields(string(rest)); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			children = append(children, p)
		}
	}
	return children
}

// cgroupParents returns this process's cgroup directory in every
// hierarchy: cgroup v2 and each v1 hierarchy (a controller, or v1's
// name=systemd on a hybrid setup).
func cgroupParents(t *testing.T) []string {
	t.Helper()
	mounts := map[string]string{} // "v2", "name=systemd" or a v1 controller list -> mount point
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			mounts["v2"] = pf[4]
		case "cgroup":
			// The super options name the hierarchy as /proc/self/cgroup does.
			var names []string
			for _, opt := range strings.Split(qf[2], ",") {
				if !slices.Contains([]string{"rw", "ro", "xattr", "clone_children", "noprefix", "nsdelay", "cpuset_v2_mode"}, opt) &&
					!strings.HasPrefix(opt, "release_agent=") {
					names = append(names, opt)
				}
			}
			mounts[strings.Join(names, ",")] = pf[4]
		}
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		key := f[1]
		if f[0] == "0" && f[1] == "" {
			key = "v2"
		}
		if mount, ok := mounts[key]; ok {
			dirs = append(dirs, filepath.Join(mount, f[2]))
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no cgroup hierarchy found in /proc/self/mountinfo and /proc/self/cgroup: systemd-nspawn needs one")
	}
	return dirs
}

// makeCgroup creates the cgroup dir below parent. A v1 cpuset cgroup
// starts with no CPUs and no memory nodes, and no process can join it
// until it gets its parent's.
func makeCgroup(parent, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		own, err := os.ReadFile(filepath.Join(dir, f))
		if errors.Is(err, fs.ErrNotExist) {
			return nil // not a cpuset hierarchy
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(own)) != "" {
			continue // cgroup v2: inherited
		}
		v, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// removeCgroup removes a cgroup and the ones below it, deepest first,
// waiting briefly for the kernel to release them.
func removeCgroup(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	start := time.Now()
	for _, d := range dirs {
		if _, err := eventually.Within(10*time.Second-time.Since(start), 50*time.Millisecond, func() error {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
