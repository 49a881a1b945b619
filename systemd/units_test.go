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
	template, err := os.ReadFile("etcdlet@.service")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "etcdlet@.service"), strings.ReplaceAll(string(template), "=/usr/bin/etcdlet ", "="+self+" "))
	target, err := os.ReadFile("etcdlet.target")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "etcdlet.target"), string(target))
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

	cmd := exec.Command(analyze, "verify", filepath.Join(dir, "etcdlet.service"), filepath.Join(dir, "etcdlet@events.service"),
		filepath.Join(dir, "etcdlet.target"), filepath.Join(dir, "kubelet.service"))
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
	for _, want := range []string{"After=etcdlet.target etcdlet.service", "Wants=etcdlet.target"} {
		if !strings.Contains(string(dropIn), "\n"+want+"\n") {
			t.Errorf("kubelet drop-in lacks %s", want)
		}
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "Restart=on-failure", "Before=kubelet.service",
		"StateDirectory=etcdlet\n", "StateDirectoryMode=0700", "ReadWritePaths=-/etc/kubernetes/manifests -/var/lib/etcd",
		"RequiredBy=etcdlet.target", "WantedBy=multi-user.target", "Before=kubelet.service etcdlet.target"} {
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

// TestInstanceUnitIsTheServiceUnit: etcdlet@.service is etcdlet.service
// for one more cluster. Its settings differ only where the instance is
// named: the configuration file, the state directory, the writable paths
// and the description; everything else (hardening, watchdog, restart,
// ordering) must stay the same in both.
func TestInstanceUnitIsTheServiceUnit(t *testing.T) {
	settings := func(path string) map[string]string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		section := ""
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "["):
				section = line
			default:
				key, value, ok := strings.Cut(line, "=")
				if !ok {
					t.Fatalf("%s: %q is no setting", path, line)
				}
				out[section+key] = value
			}
		}
		return out
	}
	plain, template := settings("etcdlet.service"), settings("etcdlet@.service")
	want := map[string]string{
		"[Unit]Description":       "etcdlet node agent for etcd membership, cluster instance %i",
		"[Service]ExecStart":      "/usr/bin/etcdlet run --config /etc/etcdlet/%i.yaml",
		"[Service]ExecReload":     "/usr/bin/etcdlet reload --config /etc/etcdlet/%i.yaml --pid $MAINPID",
		"[Service]StateDirectory": "etcdlet/%i",
		"[Service]ReadWritePaths": "-/etc/kubernetes/manifests",
	}
	for key, value := range plain {
		expected, differs := want[key]
		if !differs {
			expected = value
		}
		if template[key] != expected {
			t.Errorf("etcdlet@.service has %s=%q, want %q", key, template[key], expected)
		}
	}
	for key := range template {
		if _, ok := plain[key]; !ok {
			t.Errorf("etcdlet@.service has %s, which etcdlet.service lacks", key)
		}
	}
}
