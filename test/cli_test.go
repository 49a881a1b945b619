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
	out, ended, err := runBounded(10*time.Second, "validate", "--config", cfg)
	if !ended {
		t.Fatal("etcdlet validate hangs on a FIFO members file")
	}
	if err == nil || !strings.Contains(string(out), "is a named pipe, want a regular file") {
		t.Errorf("validate: err %v, output:\n%s", err, out)
	}
}

// The binary refuses what validation refuses, as an operator meets it:
// `validate` names the field and the rule, `run` does not start, and an
// opt-out is accepted but announced.
func TestInsecureConfigurationsAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := "cluster: {name: etcd-main}\nmembers: {source: static, addresses: [192.0.2.10]}\nnode: {address: 192.0.2.10}\n" +
		"agent: {stateDir: " + filepath.Join(dir, "state") + "}\n"
	plain := write("plain.yaml", head+"etcd: {dataDir: "+filepath.Join(dir, "data")+"}\n", 0o600)
	optedOut := write("insecure.yaml", head+"etcd: {dataDir: "+filepath.Join(dir, "data")+", insecure: true}\n", 0o600)
	groupWritable := write("group.yaml", head+"etcd: {dataDir: "+filepath.Join(dir, "data")+", insecure: true}\n", 0o664)

	tests := []struct {
		name     string
		args     []string
		wantExit bool
		want     string
	}{
		{"validate plaintext off the host", []string{"validate", "--config", plain}, true,
			`node.address: "192.0.2.10": is not a loopback address, so etcd traffic on it needs TLS with client certificates: set etcd.tls.client and etcd.tls.peer`},
		{"run plaintext off the host", []string{"run", "--config", plain}, true, "etcd.insecure: true to accept traffic that anyone on the network can read and write"},
		{"validate the opt-out", []string{"validate", "--config", optedOut}, false, "INSECURE: etcd.insecure is set:"},
		{"validate a group-writable file", []string{"validate", "--config", groupWritable}, true,
			"config file " + groupWritable + ": " + groupWritable + " is writable by group (mode 0664)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ended, err := runBounded(20*time.Second, tt.args...)
			if !ended {
				t.Fatalf("etcdlet %s did not end: it started with a configuration it must refuse", tt.args[0])
			}
			if (err != nil) != tt.wantExit || !strings.Contains(string(out), tt.want) {
				t.Errorf("etcdlet %s: err %v (want failure: %v), output:\n%s\nwant it to contain: %s", strings.Join(tt.args, " "), err, tt.wantExit, out, tt.want)
			}
		})
	}
}

// runBounded runs etcdlet with args; a run that has not ended within
// timeout is killed and reported as not ended.
func runBounded(timeout time.Duration, args ...string) (out []byte, ended bool, err error) {
	cmd := exec.Command(binary, args...)
	done := make(chan struct{})
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
		return out, true, err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return out, false, err
	}
}
