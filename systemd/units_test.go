package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitsVerify runs systemd-analyze verify on etcdlet.service and on a
// kubelet.service with etcdlet's drop-in, as installed side by side. It
// needs no running systemd. Warnings fail the test too: systemd exits 0 on
// an unknown key, which would silently drop a setting.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found: apt-get install -y systemd")
	}
	dir := t.TempDir()
	unit, err := os.ReadFile("etcdlet.service")
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart and ExecReload are executable: point
	// them at a binary that exists here, the test itself.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unitText := string(unit)
	for _, line := range []string{"ExecStart=", "ExecReload="} {
		replaced := strings.Replace(unitText, line+"/usr/bin/etcdlet ", line+self+" ", 1)
		if replaced == unitText {
			t.Fatalf("etcdlet.service has no %s/usr/bin/etcdlet line", line)
		}
		unitText = replaced
	}
	write(t, filepath.Join(dir, "etcdlet.service"), unitText)
	write(t, filepath.Join(dir, "kubelet.service"), "[Unit]\nDescription=kubelet stand-in\n[Service]\nExecStart="+self+"\n")
	dropIn, err := os.ReadFile(filepath.Join("kubelet.service.d", "10-etcdlet.conf"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "kubelet.service.d", "10-etcdlet.conf"), string(dropIn))
	// The standalone kubelet's drop-in (shipped as an example) must verify
	// too, layered as the operator installs it.
	standalone, err := os.ReadFile(filepath.Join("kubelet-standalone", "20-etcdlet-standalone.conf"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "kubelet.service.d", "20-etcdlet-standalone.conf"),
		strings.Replace(string(standalone), "ExecStart=/usr/bin/kubelet", "ExecStart="+self, 1))

	cmd := exec.Command(analyze, "verify", filepath.Join(dir, "etcdlet.service"), filepath.Join(dir, "kubelet.service"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify failed: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		// Lines about units of the host's own configuration are not ours.
		if strings.Contains(line, dir) || strings.Contains(line, "etcdlet") || strings.Contains(line, "kubelet") {
			t.Errorf("systemd-analyze: %s", line)
		}
	}

	// The drop-in is what orders the kubelet after etcdlet (showing the
	// merged unit needs a running systemd, so it is checked as text).
	for _, want := range []string{"After=etcdlet.service", "Wants=etcdlet.service"} {
		if !strings.Contains(string(dropIn), "\n"+want+"\n") {
			t.Errorf("kubelet drop-in lacks %s", want)
		}
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "Restart=on-failure", "Before=kubelet.service",
		"StateDirectory=etcdlet", "StateDirectoryMode=0700", "ReadWritePaths=-/etc/kubernetes/manifests -/var/lib/etcd"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("etcdlet.service lacks %s", want)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
