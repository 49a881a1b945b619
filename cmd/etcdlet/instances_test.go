package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/instancelock"
)

// instanceConfig is a loopback configuration of cluster name in dir, its
// directories under dir/name, on the given ports (client, then peer,
// metrics and agent peer above it).
func instanceConfig(dir, name string, port int) string {
	return fmt.Sprintf(`cluster: {name: %[2]s}
members: {source: static, addresses: [127.0.0.1]}
etcd: {dataDir: %[1]s/%[2]s/etcd, clientPort: %[3]d, peerPort: %[4]d, listenMetricsURL: "http://127.0.0.1:%[5]d"}
agent: {stateDir: %[1]s/%[2]s/agent, listen: "127.0.0.1:0", peerPort: %[6]d}
`, dir, name, port, port+1, port+2, port+3)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func runValidate(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"validate"}, args...))
	err := cmd.Execute()
	if err != nil && !strings.Contains(out.String(), err.Error()) {
		out.WriteString(err.Error())
	}
	return out.String(), exitCode(err)
}

// TestValidateComparesTheOtherInstances: validate compares a file with
// every other valid configuration beside it, and ignores files that are
// none.
func TestValidateComparesTheOtherInstances(t *testing.T) {
	dir := t.TempDir()
	main, events := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "events.yaml")
	writeFile(t, main, instanceConfig(dir, "etcd-main", 2379))
	writeFile(t, filepath.Join(dir, "broken.yaml"), "cluster: {name: etcd-broken}\nunknown: field\n")
	writeFile(t, filepath.Join(dir, "members"), "127.0.0.1\n")
	if out, code := runValidate(t, "--config", main); code != 0 {
		t.Fatalf("alone (beside a broken file): exit %d\n%s", code, out)
	}

	writeFile(t, events, instanceConfig(dir, "etcd-events", 2381))
	out, code := runValidate(t, "--config", events)
	if code != 1 || !strings.Contains(out, "etcd.clientPort: 2381: the etcd metrics listener (etcd.listenMetricsURL) of "+main+" uses port 2381 too") {
		t.Errorf("its client port on the other's metrics port: exit %d\n%s", code, out)
	}
	if out, code := runValidate(t, "--config", main); code != 1 || !strings.Contains(out, "of "+events) {
		t.Errorf("the other way: exit %d\n%s", code, out)
	}

	writeFile(t, events, instanceConfig(dir, "etcd-events", 2479))
	for _, path := range []string{main, events} {
		if out, code := runValidate(t, "--config", path); code != 0 {
			t.Errorf("%s, with ports of its own: exit %d\n%s", path, code, out)
		}
	}
}

// TestRunRefusesBesideARunningInstance: an agent refuses to start beside
// a running agent it shares something with, and only then: a file that
// does not run stops nobody.
func TestRunRefusesBesideARunningInstance(t *testing.T) {
	dir := t.TempDir()
	main, events := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "events.yaml")
	writeFile(t, main, instanceConfig(dir, "etcd-main", 2379))
	writeFile(t, events, strings.Replace(instanceConfig(dir, "etcd-events", 2479), dir+"/etcd-events/etcd", dir+"/etcd-main/etcd", 1))
	cfg, err := loadValidConfig(events)
	if err != nil {
		t.Fatal(err)
	}
	if err := refuseBesideRunningInstances(events, cfg); err != nil {
		t.Errorf("while the main agent does not run: %v", err)
	}
	lock, err := instancelock.Acquire(filepath.Join(dir, "etcd-main", "agent"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	err = refuseBesideRunningInstances(events, cfg)
	if err == nil || !strings.Contains(err.Error(), "shares with an etcdlet instance that runs on this host") ||
		!strings.Contains(err.Error(), "etcd.dataDir") {
		t.Errorf("while the main agent runs on the same data dir: %v", err)
	}
}

func TestInstanceFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--instance", "Events"}, `"Events": an instance name is lower-case letters, digits and '-'`},
		{[]string{"--instance", "../x"}, `"../x": an instance name`},
		{[]string{"--instance", "no-such-instance"}, "read config /etc/etcdlet/no-such-instance.yaml: "},
		{[]string{"--instance", "events", "--config", "/tmp/x.yaml"}, "none of the others can be"},
	} {
		if out, code := runValidate(t, tt.args...); code == 0 || !strings.Contains(out, tt.want) {
			t.Errorf("validate %v: exit %d\n%s\nwant %q", tt.args, code, out, tt.want)
		}
	}
}
