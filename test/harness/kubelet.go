package harness

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcdlet/etcdlet/internal/testbin"
)

// EtcdBinary is the etcd built from the module proxy by hack/envtest.sh
// (in $KUBEBUILDER_ASSETS, as make test sets it): what "the kubelet" runs.
func EtcdBinary(t TB) string {
	t.Helper()
	return testbin.Executable(t, "KUBEBUILDER_ASSETS", "etcd", testbin.HowEnvtest)
}

// Etcd35Binary is etcd 3.5, built by hack/etcd35.sh ($ETCDLET_ETCD35):
// what "the kubelet" runs for an etcd 3.5 image.
func Etcd35Binary(t TB) string {
	t.Helper()
	return testbin.Executable(t, "ETCDLET_ETCD35", "", testbin.HowEtcd35)
}

// Etcd36Binary is etcd 3.6, built by hack/etcd36.sh ($ETCDLET_ETCD36):
// what "the kubelet" runs for an etcd 3.6 image.
func Etcd36Binary(t TB) string {
	t.Helper()
	return testbin.Executable(t, "ETCDLET_ETCD36", "", testbin.HowEtcd36)
}

// Kubelet stands in for the kubelet's static-pod handling of one node: it
// watches the manifest dir and runs etcd.yaml's container command as a
// process (the executable replaced by the etcd binary that stands for the
// container's image, host paths as they are, since the pod uses
// hostNetwork and same-path hostPath mounts). A
// changed manifest restarts the process, an exited process is restarted,
// and a removed manifest stops it. Files starting with "." are ignored, as
// the kubelet ignores them.
type Kubelet struct {
	dir, logPath string
	// etcdFor is the etcd binary that runs an image.
	etcdFor func(image string) string
	stop    chan struct{}
	done    chan struct{}

	// syncMu makes Pause wait for a sync under way, so that nothing is
	// started after it.
	syncMu sync.Mutex
	paused bool

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	current  string // hash of the running manifest
	starts   int
	lastFail time.Time
}

// StartKubelet starts watching dir, running each manifest's etcd with the
// binary etcdFor names for its image; logs of etcd go to logPath.
func StartKubelet(t TB, dir string, etcdFor func(image string) string, logPath string) *Kubelet {
	k := &Kubelet{dir: dir, etcdFor: etcdFor, logPath: logPath, stop: make(chan struct{}), done: make(chan struct{})}
	go k.loop()
	t.Cleanup(k.Stop)
	return k
}

// Starts counts how often etcd was (re)started.
func (k *Kubelet) Starts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.starts
}

// PID is the running etcd's process ID, 0 when none runs.
func (k *Kubelet) PID() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil || isClosed(k.exited) {
		return 0
	}
	return k.cmd.Process.Pid
}

// Pause stops the running etcd and starts nothing until Resume, as an
// operator stopping the pod (or a runtime that fails to restart it) would:
// the manifest stays in place.
func (k *Kubelet) Pause() {
	k.syncMu.Lock()
	defer k.syncMu.Unlock()
	k.paused = true
	k.kill()
}

// Resume runs the manifest's etcd again from the next sync on.
func (k *Kubelet) Resume() {
	k.syncMu.Lock()
	defer k.syncMu.Unlock()
	k.paused = false
}

// Stop stops watching and stops etcd; idempotent.
func (k *Kubelet) Stop() {
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	<-k.done
}

func (k *Kubelet) loop() {
	defer close(k.done)
	defer k.kill()
	for {
		select {
		case <-k.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		k.sync()
	}
}

func (k *Kubelet) sync() {
	k.syncMu.Lock()
	defer k.syncMu.Unlock()
	if k.paused {
		return
	}
	data, err := os.ReadFile(filepath.Join(k.dir, "etcd.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		k.kill()
		return
	}
	if err != nil {
		return
	}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal(data, pod); err != nil || len(pod.Spec.Containers) == 0 || len(pod.Spec.Containers[0].Command) == 0 {
		k.kill() // an unusable manifest runs nothing, as with the kubelet
		return
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(data))
	k.mu.Lock()
	running := k.cmd != nil
	exited := running && isClosed(k.exited)
	same := sum == k.current
	backoff := time.Since(k.lastFail) < time.Second
	k.mu.Unlock()
	switch {
	case running && same && !exited:
		return
	case exited && same && backoff:
		return // crash-loop backoff
	}
	k.kill()
	k.start(k.etcdFor(pod.Spec.Containers[0].Image), pod.Spec.Containers[0].Command[1:], sum)
}

func (k *Kubelet) start(etcd string, args []string, sum string) {
	logFile, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(logFile, "--- kubelet: starting %s %s\n", etcd, strings.Join(args, " "))
	cmd := exec.Command(etcd, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logFile, "--- kubelet: start failed: %v\n", err)
		logFile.Close()
		return
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		k.mu.Lock()
		k.lastFail = time.Now()
		k.mu.Unlock()
		close(exited)
	}()
	k.mu.Lock()
	k.cmd, k.exited, k.current = cmd, exited, sum
	k.starts++
	k.mu.Unlock()
}

// kill stops the running etcd: SIGTERM, then SIGKILL after 10s, as the
// kubelet does with a pod's grace period.
func (k *Kubelet) kill() {
	k.mu.Lock()
	cmd, exited := k.cmd, k.exited
	k.cmd, k.current = nil, ""
	k.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
