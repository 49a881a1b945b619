package test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config/trust/trusttest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// Each case of these tests runs on its own host address 127.0.<netTrust>.<host>
// (a refused `run` must not bind anything, but one that starts must not
// meet another test's agent).
const (
	hostPrograms = 1 + iota
	hostPlantedStateDir
	hostPlantedStore
	hostGroupWritableStateDir
	hostSecrets
	hostExecPlanted
	hostExecTrusted
)

// trustHost is a node whose configuration file and directories live under
// dir.
type trustHost struct {
	t    *testing.T
	dir  string
	host int
	// stateDir and dataDir default to directories under dir.
	stateDir, dataDir string
	// etcd is added to the etcd mapping (", key: value" pairs); extra is
	// appended to the configuration (top-level sections).
	etcd, extra string
}

func (h trustHost) ip() string { return fmt.Sprintf("127.0.%d.%d", netTrust, h.host) }

// write writes the configuration (0600) and returns its path.
func (h trustHost) write() string {
	h.t.Helper()
	if h.stateDir == "" {
		h.stateDir = filepath.Join(h.dir, "state")
	}
	if h.dataDir == "" {
		h.dataDir = filepath.Join(h.dir, "data")
	}
	body := fmt.Sprintf("cluster: {name: etcd-main}\nmembers: {source: static, addresses: [%[1]s]}\nnode: {address: %[1]s}\n"+
		"etcd: {dataDir: %[2]s, listenMetricsURL: \"http://%[1]s:2381\"%[4]s}\nagent: {stateDir: %[3]s, listen: \"%[1]s:9479\"}\n%[5]s",
		h.ip(), h.dataDir, h.stateDir, h.etcd, h.extra)
	path := filepath.Join(trusttest.Dir(h.t, h.dir, 0o700), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// markingProgram writes a program at path that creates marker when it runs
// (whoever runs it: etcdlet as root, or client-go for a credential plugin,
// to which it answers with a token), and returns path.
func markingProgram(t *testing.T, path, marker string) string {
	t.Helper()
	trusttest.File(t, path, 0o755)
	script := "#!/bin/sh\ntouch " + marker + "\n" +
		`echo '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "t"}}'` + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// refuses runs etcdlet with args and fails unless it ends, failing, with
// an output that contains every part of want.
func refuses(t *testing.T, want []string, args ...string) {
	t.Helper()
	out, ended, err := runBounded(30*time.Second, args...)
	if !ended {
		t.Fatalf("etcdlet %s did not end: it went ahead with what it must refuse\n%s", strings.Join(args, " "), out)
	}
	for _, w := range want {
		if err == nil || !strings.Contains(string(out), w) {
			t.Fatalf("etcdlet %s: err %v, output:\n%s\nwant a failure saying: %s", strings.Join(args, " "), err, out, w)
		}
	}
}

// Every command that acts or runs a program refuses a pacemaker program
// that another user could change, before any program runs: etcdlet runs
// them as root. `pacemaker status` runs them even with polling off, and
// refuses them then too.
func TestCommandsRefuseUntrustedPrograms(t *testing.T) {
	t.Parallel()
	trusttest.RequireRoot(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "a-program-ran")
	crmMon := markingProgram(t, filepath.Join(dir, "bin", "crm_mon"), marker)
	trusttest.Chown(t, crmMon, trusttest.Nobody, trusttest.Nobody)
	// The other two are root's: they would run, and mark, if crm_mon's
	// refusal came only when it is its turn.
	cibadmin := markingProgram(t, filepath.Join(dir, "bin", "cibadmin"), marker)
	cmapctl := markingProgram(t, filepath.Join(dir, "bin", "corosync-cmapctl"), marker)
	pacemaker := func(enabled bool) string {
		return fmt.Sprintf("pacemaker: {enabled: %t, crmMon: %s, cibadmin: %s, corosyncCmapctl: %s}\n"+
			"backup: {store: {provider: local, directory: %s}}\n", enabled, crmMon, cibadmin, cmapctl, filepath.Join(dir, "snapshots"))
	}
	refusal := fmt.Sprintf(`pacemaker.crmMon: %q: must be a file only root can change: %s: %s is owned by uid 65534, must be owned by root: another user could change what etcdlet acts on (chown root %s)`,
		crmMon, crmMon, crmMon, crmMon)

	enabled := trustHost{t: t, dir: filepath.Join(dir, "enabled"), host: hostPrograms, extra: pacemaker(true)}.write()
	for _, args := range [][]string{
		{"validate"}, {"run"}, {"status"}, {"restore", "--yes"}, {"restore", "--rejoin", "--yes"}, {"task", "list"},
		{"certs", "check"}, {"certs", "renew", "--restart-only"}, {"pacemaker", "status"}, {"pacemaker", "status", "--cib-file", "/dev/null"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			refuses(t, []string{refusal}, append(args, "--config", enabled)...)
		})
	}
	t.Run("pacemaker status with polling off", func(t *testing.T) {
		disabled := trustHost{t: t, dir: filepath.Join(dir, "disabled"), host: hostPrograms, extra: pacemaker(false)}.write()
		if out, err := harnessRun("validate", "--config", disabled); err != nil {
			t.Fatalf("validate with polling off: %v\n%s", err, out)
		}
		refuses(t, []string{"refused to run the pacemaker programs:\n" + refusal}, "pacemaker", "status", "--config", disabled)
	})
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a pacemaker program ran although crm_mon was refused")
	}
}

// The state dir and the snapshot store are held to the rule of the files:
// in a directory another user owns or can write, validate refuses them,
// the agent does not start, and restore does not read them.
func TestPlantedDirectoriesAreRefused(t *testing.T) {
	t.Parallel()
	trusttest.RequireRoot(t)
	tests := []struct {
		name string
		host int
		// layout plants under dir and returns the host and what the
		// refusal says, ROOT for dir.
		layout func(t *testing.T, dir string) (trustHost, []string)
	}{
		{"state dir with an approval planted by another user", hostPlantedStateDir, func(t *testing.T, dir string) (trustHost, []string) {
			home := trusttest.Dir(t, filepath.Join(dir, "home"), 0o755)
			state := trusttest.Dir(t, filepath.Join(home, "state"), 0o700)
			op := trusttest.File(t, filepath.Join(state, "operator.json"), 0o600)
			if err := os.WriteFile(op, []byte(fmt.Sprintf(`{"bootstrapApproval": {"list": ["127.0.%d.%d", "127.0.%d.99"], "at": "2026-11-21T00:00:00Z"}}`,
				netTrust, hostPlantedStateDir, netTrust)), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{home, state, op} {
				trusttest.Chown(t, p, trusttest.Nobody, trusttest.Nobody)
			}
			return trustHost{stateDir: state}, []string{`agent.stateDir: "ROOT/home/state": must be a directory only root can change: ROOT/home/state: ROOT/home is owned by uid 65534, must be owned by root: another user could change what etcdlet acts on (chown root ROOT/home)`}
		}},
		{"state dir and data dir to be created in another user's directory", hostPlantedStateDir, func(t *testing.T, dir string) (trustHost, []string) {
			home := trusttest.Dir(t, filepath.Join(dir, "home"), 0o755)
			trusttest.Chown(t, home, trusttest.Nobody, trusttest.Nobody)
			return trustHost{stateDir: filepath.Join(home, "state"), dataDir: filepath.Join(home, "etcd", "data")}, []string{
				`agent.stateDir: "ROOT/home/state": must be a directory only root can change: ROOT/home/state does not exist yet; ROOT/home, where it would be created: ROOT/home is owned by uid 65534`,
				`etcd.dataDir: "ROOT/home/etcd/data": must be in a directory only root can change (the data dir is created and moved aside there): ROOT/home/etcd does not exist yet; ROOT/home, where it would be created: ROOT/home is owned by uid 65534`,
			}
		}},
		{"group-writable state dir", hostGroupWritableStateDir, func(t *testing.T, dir string) (trustHost, []string) {
			state := trusttest.Dir(t, filepath.Join(dir, "state"), 0o770)
			return trustHost{stateDir: state}, []string{`agent.stateDir: "ROOT/state": must be a directory only root can change: ROOT/state: ROOT/state is writable by group (mode 0770), must be writable by its owner only: another user could change what etcdlet acts on (chmod go-w ROOT/state)`}
		}},
		{"snapshot store with an object planted by another user", hostPlantedStore, func(t *testing.T, dir string) (trustHost, []string) {
			store := trusttest.Dir(t, filepath.Join(dir, "snapshots"), 0o777|fs.ModeSticky)
			planted := trusttest.File(t, filepath.Join(store, "etcd-main", "v2", "Full-00000000-00000099-1764000000"), 0o600)
			trusttest.Chown(t, filepath.Dir(planted), trusttest.Nobody, trusttest.Nobody)
			trusttest.Chown(t, filepath.Dir(filepath.Dir(planted)), trusttest.Nobody, trusttest.Nobody)
			trusttest.Chown(t, planted, trusttest.Nobody, trusttest.Nobody)
			return trustHost{extra: "backup: {store: {provider: local, directory: " + store + "}}\n"},
				[]string{`backup.store.directory: "ROOT/snapshots": must be a directory only root can change: ROOT/snapshots: ROOT/snapshots is writable by others (mode 0777)`}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			h, want := tt.layout(t, dir)
			h.t, h.dir, h.host = t, dir, tt.host
			config := h.write()
			for i := range want {
				want[i] = strings.ReplaceAll(want[i], "ROOT", dir)
			}
			for _, args := range [][]string{{"validate"}, {"run"}, {"restore", "--yes"}, {"bootstrap", "--approve"}} {
				refuses(t, want, append(args, "--config", config)...)
			}
		})
	}
}

// Keys and credentials readable by a group other than root's are refused;
// root's group may read them.
func TestGroupReadableSecretsAreRefused(t *testing.T) {
	t.Parallel()
	trusttest.RequireRoot(t)
	dir := t.TempDir()
	pki := trusttest.Dir(t, filepath.Join(dir, "pki"), 0o755)
	key := trusttest.File(t, filepath.Join(pki, "server.key"), 0o640)
	cert := trusttest.File(t, filepath.Join(pki, "server.crt"), 0o644)
	ca := trusttest.File(t, filepath.Join(pki, "ca.crt"), 0o644)
	creds := trusttest.Dir(t, filepath.Join(dir, "s3"), 0o700)
	trusttest.File(t, filepath.Join(creds, "accessKeyID"), 0o600)
	secret := trusttest.File(t, filepath.Join(creds, "secretAccessKey"), 0o640)
	config := trustHost{t: t, dir: dir, host: hostSecrets,
		etcd:  fmt.Sprintf(", tls: {client: {certFile: %s, keyFile: %s, caFile: %s}}", cert, key, ca),
		extra: fmt.Sprintf("backup: {store: {provider: s3, s3: {bucket: b, endpoint: \"http://127.0.0.1:9\", forcePathStyle: true, credentialsDir: %s}}}\n", creds),
	}.write()

	for _, f := range []string{key, secret} {
		trusttest.Chown(t, f, 0, trusttest.Nobody)
	}
	want := []string{
		fmt.Sprintf(`etcd.tls.client.keyFile: %q: is readable by group 65534 (mode 0640): a private key or credential must be readable by root only, as kubeadm writes them (chmod g-r %s, or chgrp root %s)`, key, key, key),
		fmt.Sprintf(`backup.store.s3.credentialsDir: %q: is readable by group 65534 (mode 0640)`, secret),
	}
	for _, args := range [][]string{{"validate"}, {"run"}, {"certs", "check"}} {
		refuses(t, want, append(args, "--config", config)...)
	}

	for _, f := range []string{key, secret} {
		trusttest.Chown(t, f, 0, 0)
	}
	if out, err := harnessRun("validate", "--config", config); err != nil {
		t.Fatalf("validate with root's group reading the key: %v\n%s", err, out)
	}
}

// client-go runs a kubeconfig's exec credential plugin as root: one that
// another user could change is refused by validate and at start, and never
// runs; one of root's is accepted, and the agent runs it.
func TestKubeconfigExecPlugin(t *testing.T) {
	t.Parallel()
	trusttest.RequireRoot(t)
	for _, tt := range []struct {
		name    string
		host    int
		planted bool
	}{{"another user's plugin", hostExecPlanted, true}, {"root's plugin", hostExecTrusted, false}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "plugin-ran")
			plugin := markingProgram(t, filepath.Join(dir, "bin", "plugin"), marker)
			if tt.planted {
				trusttest.Chown(t, plugin, trusttest.Nobody, trusttest.Nobody)
			}
			kubeconfig := filepath.Join(dir, "kubeconfig")
			// Nothing listens on the server: client-go asks the plugin
			// for a token before it connects.
			if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.%d.%d:6443"}}]
users: [{name: etcdlet, user: {exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: %s}}}]
contexts: [{name: c, context: {cluster: c, user: etcdlet}}]
current-context: c
`, netTrust, tt.host, plugin)), 0o600); err != nil {
				t.Fatal(err)
			}
			config := trustHost{t: t, dir: dir, host: tt.host,
				extra: "kubernetes: {kubeconfig: " + kubeconfig + ", etcd: {namespace: default, name: etcd-main}}\n"}.write()

			if tt.planted {
				refusal := fmt.Sprintf(`kubernetes.kubeconfig users[etcdlet].exec.command: %q: must be a file only root can change: %s: %s is owned by uid 65534`, plugin, plugin, plugin)
				for _, args := range [][]string{{"validate"}, {"run"}} {
					refuses(t, []string{refusal}, append(args, "--config", config)...)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the refused plugin ran")
				}
				return
			}
			if out, err := harnessRun("validate", "--config", config); err != nil {
				t.Fatalf("validate with root's plugin: %v\n%s", err, out)
			}
			log := filepath.Join(dir, "agent.log")
			exited := startAgent(t, config, log)
			harness.Eventually(t, 30*time.Second, "the agent asks the plugin for a token", func() error {
				select {
				case <-exited:
					return fmt.Errorf("the agent exited:\n%s", harness.Tail(log, 20))
				default:
				}
				_, err := os.Stat(marker)
				return err
			})
		})
	}
}

// startAgent starts `etcdlet run` on config, its output in log, and
// returns a channel closed when it exited; the test's end stops it.
func startAgent(t *testing.T, config, log string) <-chan struct{} {
	t.Helper()
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", config)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return done
}

// harnessRun runs etcdlet with args to completion.
func harnessRun(args ...string) ([]byte, error) {
	out, ended, err := runBounded(30*time.Second, args...)
	if !ended {
		return out, fmt.Errorf("etcdlet %s did not end", strings.Join(args, " "))
	}
	return out, err
}
