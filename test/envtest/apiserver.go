package envtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// apiServerReadyTimeout bounds StartAPIServer's wait, after envtest's own
// /healthz wait (startTimeout), for /readyz through the test's credentials
// and for every CRD to be served again.
const apiServerReadyTimeout = 30 * time.Second

// restartTimeout bounds a restarted kube-apiserver's own start, in place of
// envtest's start timeout (startTimeout): a restart comes amid a running
// test, and on 2 cores beside the other suites (and the fault campaign's
// own load) it took 43 to 56 s, once more than a minute. It guards against
// a hang, not a slow machine.
const restartTimeout = 3 * time.Minute

// apiServerStopGrace is how long StopAPIServer lets kube-apiserver shut down
// after SIGTERM before it kills it. Without watchers it exits within about
// a second; with one it would take a minute (see stopAPIServer).
const apiServerStopGrace = 2 * time.Second

// StopAPIServer stops kube-apiserver only: envtest's etcd keeps running, so
// every object survives. Requests fail (connection refused) until
// StartAPIServer. kube-apiserver gets SIGTERM and, if it has not exited
// within apiServerStopGrace (it will not while a client holds a watch),
// SIGKILL: its clients see their connections, watches included, drop. Stopping
// a stopped kube-apiserver fails the test.
//
// How a restart keeps clients working: envtest generates kube-apiserver's
// serving certificate and service-account keys into a temporary directory
// that APIServer.Stop deletes, and a later APIServer.Start would generate a
// new serving CA that no existing client trusts. So before the first stop,
// StopAPIServer copies that directory and points the APIServer at the copy;
// Start then finds the certificates and reuses them. The address and port
// are kept by envtest itself (they are only chosen when unset), and so is
// the client CA (CertAuthn holds it in memory and writes it at each start).
func (e *Env) StopAPIServer(t testing.TB) {
	t.Helper()
	begin := time.Now()
	if err := e.stopAPIServer(); err != nil {
		t.Fatalf("envtest: stop kube-apiserver: %v", err)
	}
	t.Logf("envtest: kube-apiserver stopped in %s", time.Since(begin).Round(time.Millisecond))
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address and port and with the same certificates, and waits (within
// envtest's start timeout and then apiServerReadyTimeout) until it is
// ready and serves every installed CRD again. Clients, rest.Configs and
// kubeconfigs made before the stop work again.
func (e *Env) StartAPIServer(t testing.TB) {
	t.Helper()
	begin := time.Now()
	if err := e.startAPIServer(t.Context()); err != nil {
		t.Fatalf("envtest: restart kube-apiserver: %v", err)
	}
	t.Logf("envtest: kube-apiserver at %s serving again in %s", e.Config.Host, time.Since(begin).Round(time.Millisecond))
}

// keptCertDir takes the place of envtest's authenticator once StopAPIServer
// has run. It delegates everything to envtest's CertAuthn, which holds the
// client CA, and owns the copied certificate directory: envtest calls the
// authenticator's Stop right after stopping kube-apiserver, so the final
// stop (Env's cleanup) removes the directory, and a restart's stop does not.
type keptCertDir struct {
	crenvtest.Authn

	dir string

	mu sync.Mutex
	// stopped: kube-apiserver was stopped by StopAPIServer and not started
	// again. restarting: StopAPIServer is stopping it, so Stop keeps dir.
	stopped, restarting bool
}

func (k *keptCertDir) Stop() error {
	err := k.Authn.Stop()
	if !k.restarting {
		if rmErr := os.RemoveAll(k.dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove the kept certificate directory: %w", rmErr))
		}
	}
	return err
}

func (e *Env) stopAPIServer() error {
	api := e.Environment.ControlPlane.APIServer
	if api == nil {
		return errors.New("the control plane has no kube-apiserver")
	}
	k, err := keepCertDir(api)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return errors.New("kube-apiserver is already stopped")
	}
	pid, err := apiServerPID(api)
	if err != nil {
		return err
	}
	// A pidfd on Linux: the SIGKILL below cannot reach another process
	// that reused the pid after envtest reaped this one.
	proc, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("find kube-apiserver (pid %d): %w", pid, err)
	}
	// Release frees the pidfd; it fails only on Windows (a second call).
	defer func() { _ = proc.Release() }()

	k.restarting = true
	defer func() { k.restarting = false }()
	// envtest's Stop sends SIGTERM and waits for the exit; kube-apiserver
	// then drains its HTTP server, which waits for every open watch (druid's,
	// an agent's) up to its request timeout, 60 s. Past a short grace, kill
	// it: to its clients that is an outage like any other.
	stopped := make(chan error, 1)
	go func() { stopped <- api.Stop() }()
	select {
	case err = <-stopped:
	case <-time.After(apiServerStopGrace):
		kerr := proc.Kill()
		if errors.Is(kerr, os.ErrProcessDone) {
			kerr = nil
		}
		if kerr != nil {
			kerr = fmt.Errorf("kill kube-apiserver (pid %d) after %s: %w", pid, apiServerStopGrace, kerr)
		}
		// Even if the kill failed, envtest's Stop ends the process (SIGKILL
		// after its stop timeout). Wait for it: the state below must hold,
		// and keptCertDir.Stop must see restarting still set.
		err = errors.Join(kerr, <-stopped)
	}
	// Stop forgets a directory envtest created, so that the next Start
	// creates a fresh one; the kept copy is the one to start from.
	api.CertDir = k.dir
	k.stopped = true
	// An error here (a failed kill, envtest's stop timeout) comes after
	// envtest's Stop returned, so the process is gone and the state above is
	// right all the same.
	return err
}

// apiServerPID returns the pid of api's running kube-apiserver: the child of
// this process that runs api.Path with api.CertDir. envtest keeps the
// process to itself, and several control planes of parallel tests may run.
func apiServerPID(api *crenvtest.APIServer) (int, error) {
	me := strconv.Itoa(os.Getpid())
	certDirArg := "--cert-dir=" + api.CertDir
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("find kube-apiserver's pid: %w", err)
	}
	var found []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		// Processes come and go during the walk; a vanished one is not ours.
		stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces; the fields
		// after it are: state, ppid, ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != me {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if args[0] == api.Path && slices.Contains(args[1:], certDirArg) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("find kube-apiserver's pid: %d children of this process run %s %s, want 1", len(found), api.Path, certDirArg)
	}
	return found[0], nil
}

// keepCertDir installs keptCertDir on api the first time, copying the
// certificate directory of the running kube-apiserver, and returns it.
func keepCertDir(api *crenvtest.APIServer) (*keptCertDir, error) {
	if k, ok := api.Authn.(*keptCertDir); ok {
		return k, nil
	}
	if api.Authn == nil || api.CertDir == "" {
		return nil, errors.New("kube-apiserver was never started")
	}
	dir, err := os.MkdirTemp("", "etcdlet-envtest-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("create a directory for kube-apiserver's certificates: %w", err)
	}
	if err := copyFlatDir(api.CertDir, dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("keep kube-apiserver's certificates: %w", err)
	}
	k := &keptCertDir{Authn: api.Authn, dir: dir}
	api.Authn = k
	return k, nil
}

// copyFlatDir copies the regular files of src into dst, keeping their
// modes. envtest's certificate directory has no subdirectories; one would
// mean envtest changed, so it is an error rather than silently skipped.
func copyFlatDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	for _, ent := range entries {
		if !ent.Type().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file", src, ent.Name())
		}
		if err := copyFile(filepath.Join(src, ent.Name()), filepath.Join(dst, ent.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", dst, err)
	}
	return nil
}

func (e *Env) startAPIServer(ctx context.Context) error {
	api := e.Environment.ControlPlane.APIServer
	k, ok := api.Authn.(*keptCertDir)
	if !ok {
		return errors.New("kube-apiserver was not stopped by StopAPIServer")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		return errors.New("kube-apiserver is running; StopAPIServer first")
	}
	api.StartTimeout = restartTimeout
	if err := api.Start(); err != nil {
		// The usual cause: another process bound the port while it was
		// free. The same port is the point of a restart, so there is no
		// fallback.
		return fmt.Errorf("start kube-apiserver on %s (same port as before; taken by another process meanwhile?): %w",
			api.HostPort(), err)
	}
	k.stopped = false

	ctx, cancel := context.WithTimeout(ctx, apiServerReadyTimeout)
	defer cancel()
	return e.waitServing(ctx)
}

// waitServing polls until /readyz answers and discovery lists every CRD
// Start installed, through the test's own rest.Config: its success also
// proves that the kept serving certificate and client CA match what the
// clients hold. Discovery of CRDs lags /readyz a little after a start, and a
// test's first request to a custom resource must not race it. (envtest's
// WaitForCRDs would do the latter, but it logs through controller-runtime's
// logger, which prints a stack trace to stderr when a test that never set
// it runs for more than 30 s.)
func (e *Env) waitServing(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("client for /readyz and discovery: %w", err)
	}
	type check struct {
		what string
		do   func(context.Context) error
	}
	checks := []check{{"/readyz", func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}}}
	for _, crd := range e.Environment.CRDs {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv, plural := crd.Spec.Group+"/"+v.Name, crd.Spec.Names.Plural
			checks = append(checks, check{"discovery of " + plural + "." + gv, func(context.Context) error {
				list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					return err
				}
				for _, r := range list.APIResources {
					if r.Name == plural {
						return nil
					}
				}
				return fmt.Errorf("%s lists no %s", gv, plural)
			}})
		}
	}
	for _, ch := range checks {
		var last error
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			last = ch.do(ctx)
			return last == nil, nil
		})
		if err != nil {
			return fmt.Errorf("kube-apiserver restarted but %s: %w (last error: %v)", ch.what, err, last)
		}
	}
	return nil
}
