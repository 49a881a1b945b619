package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DruidOptions tune the etcd-druid operator that StartDruid runs. Zero values
// mean test-friendly defaults, far shorter than druid's own (15 s, 1 min,
// 5 min), so that a member's status changes within seconds.
type DruidOptions struct {
	// StatusSyncPeriod is how often druid recomputes Etcd.status from the
	// member Leases (--etcd-status-sync-period; default 5 s). druid does not
	// watch Leases: a renewal shows only at the next sync.
	StatusSyncPeriod time.Duration
	// UnknownThreshold is the age of a Lease's renewTime after which its
	// member is no longer Ready (--etcd-member-unknown-threshold; default 20 s).
	UnknownThreshold time.Duration
	// NotReadyThreshold is how long after UnknownThreshold the member turns
	// NotReady/UnknownGracePeriodExceeded (--etcd-member-notready-threshold;
	// default 30 s).
	NotReadyThreshold time.Duration
	// ExtraArgs are appended to druid's command line. druid silently accepts
	// flags it does not know, so a misspelt flag has no effect: check
	// `druid --help`.
	ExtraArgs []string
}

const (
	defaultDruidStatusSyncPeriod  = 5 * time.Second
	defaultDruidUnknownThreshold  = 20 * time.Second
	defaultDruidNotReadyThreshold = 30 * time.Second

	// druidReadyTimeout bounds StartDruid's wait: druid sleeps 10 s before it
	// registers its controllers, then syncs its caches, on 2 busy cores.
	druidReadyTimeout = 90 * time.Second
	// druidStopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	// controller-runtime drains its controllers within seconds when the
	// kube-apiserver answers; the deadline covers a kube-apiserver that is
	// down, when druid's shutdown can hang on requests.
	druidStopTimeout = 15 * time.Second
	// druidPollInterval paces the readiness checks.
	druidPollInterval = 100 * time.Millisecond
)

// Druid is a running etcd-druid operator, started by StartDruid.
type Druid struct {
	// Log is the path of druid's log file (its stdout and stderr).
	Log string
	// MetricsURL is druid's Prometheus endpoint on a loopback port.
	MetricsURL string

	t   testing.TB
	cmd *exec.Cmd
	// exited is closed once the process has exited; waitErr is its exit
	// status, valid after that.
	exited  chan struct{}
	waitErr error
	// stopped records that Stop asked druid to exit, so an exit before that
	// is reported as a crash.
	stopMu   sync.Mutex
	stopped  bool
	stopOnce sync.Once
}

// StartDruid runs the real etcd-druid operator ($ETCDLET_DRUID, built by
// hack/druid.sh) against env as a system:masters user, with its log in a file
// under t.TempDir(), and waits until its controllers run. It stops druid in
// t.Cleanup; the cleanup fails the test if druid exited on its own, and
// prints the end of its log if the test failed.
//
// env must have been started with Options.DruidEtcd, which installs the CRDs
// druid watches. Run at most one druid per env: two would reconcile the same
// objects against each other.
//
// Readiness takes about 11 s, 10 of them a fixed sleep in druid before it
// registers its controllers. Objects created before StartDruid are found by
// its first list, so creating them first costs no time.
func StartDruid(t testing.TB, env *Env, opts DruidOptions) *Druid {
	t.Helper()
	begin := time.Now()
	bin, err := druidBinary()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	args, err := druidArgs(opts)
	if err != nil {
		t.Fatalf("envtest: start druid: %v", err)
	}
	if err := checkDruidCRDs(env); err != nil {
		t.Fatalf("envtest: start druid: %v", err)
	}

	dir := t.TempDir()
	// druid has no --kubeconfig flag: controller-runtime reads $KUBECONFIG.
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(dir, "kubeconfig"), "etcd-druid", "system:masters")
	metricsPort, err := freeLoopbackPort()
	if err != nil {
		t.Fatalf("envtest: start druid: %v", err)
	}
	// The webhook server starts only when a webhook is enabled, and none is;
	// a port of its own all the same, so that if a druid version ever starts
	// it anyway, two druids of parallel tests do not collide on 9443.
	webhookPort, err := freeLoopbackPort()
	if err != nil {
		t.Fatalf("envtest: start druid: %v", err)
	}
	args = append([]string{
		"--metrics-bind-address=127.0.0.1",
		"--metrics-port=" + strconv.Itoa(metricsPort),
		"--webhook-server-bind-address=127.0.0.1",
		"--webhook-server-port=" + strconv.Itoa(webhookPort),
		"--webhook-server-tls-server-cert-dir=" + filepath.Join(dir, "webhook-certs"),
	}, args...)

	logPath := filepath.Join(dir, "druid.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("envtest: start druid: create its log file: %v", err)
	}
	// The child holds its own descriptor; ours is not needed once it runs.
	defer logFile.Close()

	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// If the test binary dies without running its cleanups (a -timeout
	// panic), druid must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d := &Druid{
		Log:        logPath,
		MetricsURL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort)) + "/metrics",
		t:          t,
		cmd:        cmd,
		exited:     make(chan struct{}),
	}
	if err := d.start(); err != nil {
		t.Fatalf("envtest: start druid %s: %v", bin, err)
	}
	t.Cleanup(d.cleanup)

	ctx, cancel := context.WithTimeout(t.Context(), druidReadyTimeout)
	defer cancel()
	if err := d.waitReady(ctx); err != nil {
		// Stopped here so that the cleanup does not report the exit again.
		d.Stop()
		t.Fatalf("envtest: druid (log %s) not ready: %v\n%s", logPath, err, d.LogTail(40))
	}
	t.Logf("envtest: etcd-druid (pid %d, metrics %s, log %s) ready in %s",
		cmd.Process.Pid, d.MetricsURL, logPath, time.Since(begin).Round(time.Millisecond))
	return d
}

// druidArgs returns the flags that follow from opts.
func druidArgs(opts DruidOptions) ([]string, error) {
	durations := []struct {
		flag string
		v    *time.Duration
		def  time.Duration
	}{
		{"etcd-status-sync-period", &opts.StatusSyncPeriod, defaultDruidStatusSyncPeriod},
		{"etcd-member-unknown-threshold", &opts.UnknownThreshold, defaultDruidUnknownThreshold},
		{"etcd-member-notready-threshold", &opts.NotReadyThreshold, defaultDruidNotReadyThreshold},
	}
	args := []string{
		// One druid per control plane: nothing to elect, and the election
		// would only delay the controllers.
		"--enable-leader-election=false",
		// The component-protection webhook needs serving certificates and a
		// webhook configuration. A test that wants it switches it on in
		// ExtraArgs, which come last (druid takes the last value of a flag
		// given twice), with its own certificates (test/rbac_policy_test.go).
		"--enable-etcd-components-webhook=false",
	}
	for _, d := range durations {
		if *d.v < 0 {
			return nil, fmt.Errorf("--%s: negative duration %s", d.flag, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
		args = append(args, "--"+d.flag+"="+d.v.String())
	}
	return append(args, opts.ExtraArgs...), nil
}

// start starts d.cmd and waits for it in a goroutine locked to its OS
// thread for the process's whole life. Linux sends Pdeathsig when the
// thread that forked the child exits, not the process; the Go runtime ends
// a thread when a goroutine locked to it returns without unlocking, which
// any goroutine scheduled on an unlocked thread could do. Holding the
// thread keeps the signal's meaning: druid dies when the test binary dies.
func (d *Druid) start() error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := d.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	return <-started
}

// checkDruidCRDs fails unless env serves the CRDs druid watches: without
// them druid never starts some of its controllers, which would show only as
// a readiness timeout.
func checkDruidCRDs(env *Env) error {
	installed := map[string]bool{}
	for _, crd := range env.Environment.CRDs {
		installed[crd.Name] = true
	}
	want, err := druidCRDs()
	if err != nil {
		return err
	}
	for _, crd := range want {
		if !installed[crd.Name] {
			return fmt.Errorf("the control plane does not serve the %s CRD; start it with Options{DruidEtcd: true}", crd.Name)
		}
	}
	return nil
}

// druidControllers are the controllers etcd-druid v0.38.1 always runs
// (internal/controller/register.go); with --enable-backup-compaction it also
// runs compaction-controller, which readiness then covers through the
// "Starting EventSource" lines.
var druidControllers = []string{
	"etcd-controller",
	"etcdopstask-controller",
	"etcdcopybackupstask-controller",
	"secret-controller",
}

// waitReady polls until druid is ready, the process exits, or ctx ends.
//
// Ready means: every controller has started its workers, and the metrics
// endpoint answers. controller-runtime logs "Starting workers" only once
// the controller's watches have synced, so from then on an Etcd that a test
// creates is reconciled at once. That log line is the only signal that
// covers the sync: druid serves no readiness endpoint (it sets no health
// probe address), and controller-runtime registers a controller's metrics
// before its caches sync.
func (d *Druid) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	log := &druidLogScanner{started: map[string]bool{}, working: map[string]bool{}}
	tick := time.NewTicker(druidPollInterval)
	defer tick.Stop()
	for {
		last := d.ready(ctx, client, log)
		if last == nil {
			return nil
		}
		select {
		case <-d.exited:
			return fmt.Errorf("druid exited (%v) before it was ready; last check: %w", d.waitErr, last)
		case <-ctx.Done():
			return fmt.Errorf("%w; last check: %w", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func (d *Druid) ready(ctx context.Context, client *http.Client, log *druidLogScanner) error {
	if err := log.scan(d.Log); err != nil {
		return err
	}
	if pending := log.pending(); len(pending) > 0 {
		return fmt.Errorf("controllers without workers yet: %s", strings.Join(pending, ", "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.MetricsURL, nil)
	if err != nil {
		return fmt.Errorf("build the metrics request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("metrics endpoint: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics endpoint %s: %s", d.MetricsURL, resp.Status)
	}
	return nil
}

// druidLogScanner follows druid's JSON log (one zap entry per line), reading
// only what was appended since the last scan.
type druidLogScanner struct {
	off     int64
	partial []byte // an unterminated last line, completed by the next scan
	// started holds the controllers that logged "Starting EventSource",
	// working those that logged "Starting workers".
	started, working map[string]bool
}

func (s *druidLogScanner) scan(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open druid's log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(s.off, io.SeekStart); err != nil {
		return fmt.Errorf("seek in druid's log: %w", err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read druid's log: %w", err)
	}
	s.off += int64(len(raw))
	raw = append(s.partial, raw...)
	end := bytes.LastIndexByte(raw, '\n')
	s.partial = slices.Clone(raw[end+1:])
	for line := range bytes.SplitSeq(raw[:end+1], []byte("\n")) {
		var entry struct {
			Msg        string `json:"msg"`
			Controller string `json:"controller"`
		}
		// Lines that are not JSON (a panic, Go runtime output) carry no
		// readiness information; the process exit reports those.
		if json.Unmarshal(line, &entry) != nil || entry.Controller == "" {
			continue
		}
		switch entry.Msg {
		case "Starting EventSource":
			s.started[entry.Controller] = true
		case "Starting workers":
			s.working[entry.Controller] = true
		}
	}
	return nil
}

// pending returns the controllers not yet working, sorted.
func (s *druidLogScanner) pending() []string {
	var out []string
	for _, c := range druidControllers {
		if !s.working[c] {
			out = append(out, c)
		}
	}
	for c := range s.started {
		if !s.working[c] && !slices.Contains(druidControllers, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// Stop stops druid: SIGTERM, then SIGKILL if it has not exited within
// druidStopTimeout. It returns once the process is gone. Calling it again,
// or after druid exited on its own, does nothing.
func (d *Druid) Stop() {
	d.stopOnce.Do(func() {
		d.stopMu.Lock()
		d.stopped = true
		d.stopMu.Unlock()
		select {
		case <-d.exited:
			return
		default:
		}
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			d.t.Logf("envtest: druid: send SIGTERM: %v", err)
		}
		select {
		case <-d.exited:
			return
		case <-time.After(druidStopTimeout):
		}
		d.t.Logf("envtest: druid did not exit within %s of SIGTERM; sending SIGKILL", druidStopTimeout)
		if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			d.t.Logf("envtest: druid: send SIGKILL: %v", err)
		}
		<-d.exited
	})
}

// cleanup reports a crash before stopping druid, and the log of a failed
// test.
func (d *Druid) cleanup() {
	d.stopMu.Lock()
	stopped := d.stopped
	d.stopMu.Unlock()
	select {
	case <-d.exited:
		if !stopped {
			d.t.Errorf("envtest: druid exited during the test (%v); log %s:\n%s", d.waitErr, d.Log, d.LogTail(40))
			return
		}
	default:
	}
	d.Stop()
	if d.t.Failed() {
		d.t.Logf("envtest: the end of druid's log (%s):\n%s", d.Log, d.LogTail(40))
	}
}

// LogTail returns the last n lines of druid's log, for failure messages.
func (d *Druid) LogTail(n int) string {
	raw, err := os.ReadFile(d.Log)
	if err != nil {
		return fmt.Sprintf("(cannot read druid's log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if n >= 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment
// ago. Another process may take it before druid binds it; druid then exits
// with "address already in use", which StartDruid reports.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
