package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `etcdlet render` renders what the static-pod runtime writes; with the
// embedded runtime there is no manifest, and it says so instead of
// printing one.
func TestRenderRefusesTheEmbeddedRuntime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	body := "cluster: {name: etcd-main}\nmembers: {source: static, addresses: [127.0.9.1]}\nnode: {address: 127.0.9.1}\n" +
		"etcd: {runtime: embedded, dataDir: " + filepath.Join(dir, "data") + "}\nagent: {stateDir: " + filepath.Join(dir, "state") + "}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "render", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "render applies to etcd.runtime static-pod only") || strings.Contains(string(out), "kind: Pod") {
		t.Errorf("render with the embedded runtime: err %v, output:\n%s", err, out)
	}
}

// `etcdlet validate` on a members file that is a FIFO answers at once
// with the reason instead of hanging in open(2).
func TestValidateDoesNotHangOnAFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "members")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	body := "cluster: {name: etcd-main}\nmembers: {source: file, file: " + fifo + "}\nnode: {address: 127.0.9.1}\n" +
		"etcd: {dataDir: " + filepath.Join(dir, "data") + "}\nagent: {stateDir: " + filepath.Join(dir, "state") + "}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "validate", "--config", cfg)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("etcdlet validate hangs on a FIFO members file")
	}
	if err == nil || !strings.Contains(string(out), "is a named pipe, want a regular file") {
		t.Errorf("validate: err %v, output:\n%s", err, out)
	}
}
