package test

// The packages installed, upgraded, removed and purged on a pristine Debian
// host under a real systemd (nspawn_test.go).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/test/harness"
)

// A pristine Debian host with systemd: the package installs into a chroot
// without systemd (nothing started, nothing reloaded), and into the booted
// host: the unit known to systemd but neither enabled nor started, the
// default configuration refused with what to fill in, the files with their
// modes; with a one-member configuration the unit reaches active after
// READY=1 and runs a healthy member. The newer package upgrades it in place
// (the edited configuration kept, the new default beside it, the running
// unit restarted on the new binary); the .rpm's scriptlets do what their
// arguments say under the same systemd; dpkg -r stops it and keeps the
// configuration and all data; dpkg -P removes the configuration only.
func TestPackageInstallUnderSystemd(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test boots a Debian host with systemd-nspawn and needs root: run `sudo make test`")
	}
	requireTools(t, map[string]string{"systemd-nspawn": "systemd-container", "nsenter": "util-linux", "chroot": "coreutils",
		"tar": "tar", "ip": "iproute2", "rpm": "rpm"})
	arch := runtime.GOARCH
	if _, ok := pkgArches[arch]; !ok {
		t.Fatalf("the packages are built for amd64 and arm64, not for this machine's %s", arch)
	}
	tarball := debianRoot(t)
	older := sharedPackages(t)

	// The newer version builds while the older one is tried. Its default
	// configuration differs, so that dpkg has a conffile to decide on.
	newerDefault := readRepoFile(t, "packaging/config.yaml") + "# (the newer package's default)\n"
	newerConfig := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(newerConfig, []byte(newerDefault), 0o644); err != nil {
		t.Fatal(err)
	}
	newerDir := t.TempDir()
	newerDone := make(chan error, 1)
	var newerSet packageSet // written before newerDone is sent
	go func() {
		set, err := buildPackages(pkgVersionNewer, newerDir, "ARCHES="+arch, "PACKAGE_CONFIG="+newerConfig)
		newerSet = set
		newerDone <- err
	}()
	var (
		newerErr    error
		newerWaited bool
	)
	waitNewer := func() packageSet {
		t.Helper()
		if !newerWaited {
			newerErr, newerWaited = <-newerDone, true
		}
		if newerErr != nil {
			t.Fatal(newerErr)
		}
		t.Logf("built the %s package in %s (beside the test)", pkgVersionNewer, newerSet.took)
		return newerSet
	}
	t.Cleanup(func() {
		// The test ended before it needed the newer package: its build is
		// waited for (its directory is removed after this), and a failure
		// is only told, as nothing depended on it.
		if !newerWaited {
			if err := <-newerDone; err != nil {
				t.Logf("the %s package, not needed in the end, did not build: %v", pkgVersionNewer, err)
			}
		}
	})

	h := newNspawnHost(t, tarball)
	copyFile(t, older.deb(arch), h.file("/root/older.deb"))

	// In a chroot (no systemd running): install, remove, purge, and the
	// .rpm's scriptlets with every argument; systemctl is recorded.
	h.write("/usr/local/sbin/systemctl", "#!/bin/sh\necho \"$*\" >>/root/systemctl.log\nexec /usr/bin/systemctl \"$@\"\n", 0o755)
	for _, argv := range [][]string{{"dpkg", "-i", "/root/older.deb"}, {"dpkg", "-r", "etcdlet"}, {"dpkg", "-P", "etcdlet"}} {
		if out, err := h.chroot(argv...); err != nil {
			t.Fatalf("in a chroot: %s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	rpmScripts := rpmScriptlets(t, older.rpm(arch))
	for _, s := range []struct{ tag, arg string }{{"POSTIN", "1"}, {"POSTIN", "2"}, {"PREUN", "1"}, {"POSTUN", "1"}, {"PREUN", "0"}, {"POSTUN", "0"}} {
		h.write("/root/scriptlet", rpmScripts[s.tag], 0o755)
		if out, err := h.chroot("sh", "/root/scriptlet", s.arg); err != nil {
			t.Errorf("in a chroot: the .rpm's %s scriptlet with %s: %v\n%s", s.tag, s.arg, err, out)
		}
	}
	// Only the removals (dpkg -r, rpm's %preun 0) disable the units, which
	// systemctl does on files alone, and the upgrade (rpm's %post 2) asks
	// whether etcdlet.service is enabled; nothing is reloaded, started or
	// stopped.
	disable := "--no-reload disable etcdlet.service etcdlet@.service"
	if calls := strings.Split(strings.TrimSpace(h.read("/root/systemctl.log")), "\n"); !slices.Equal(calls,
		[]string{disable, "--quiet is-enabled etcdlet.service", disable}) {
		t.Errorf("without systemd, the scripts ran systemctl %q; want only the two disables of the removals and the upgrade's question", calls)
	}
	for _, p := range []string{"/usr/local/sbin/systemctl", "/root/systemctl.log", "/root/scriptlet"} {
		if err := os.Remove(h.file(p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/usr/bin/etcdlet", "/etc/etcdlet", "/var/lib/etcdlet"} {
		if h.exists(p) {
			t.Errorf("in a chroot: %s is still there after dpkg -P", p)
		}
	}
	checkUpgradeJoinsTarget(t, h)

	// A running kubelet stand-in: systemd keeps it loaded, so its drop-ins
	// change only with a daemon-reload, which shows that the package ran one.
	h.write("/etc/systemd/system/kubelet.service", "[Unit]\nDescription=kubelet stand-in\n[Service]\nExecStart=/bin/sleep infinity\n", 0o644)
	ns := fmt.Sprintf("etcdlet-%d-pkg", os.Getpid())
	harness.AddNetns(t, ns)
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	h.boot(ns)
	h.must("systemctl", "start", "kubelet.service")

	// Install the older package.
	h.must("dpkg", "-i", "/root/older.deb")
	if v := h.must("etcdlet", "version"); !strings.HasPrefix(v, "etcdlet "+pkgVersion+" ") {
		t.Errorf("etcdlet version: %q, want etcdlet %s", v, pkgVersion)
	}
	out, err := h.exec("etcdlet", "validate")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("etcdlet validate of the default configuration: %v, want exit status 1\n%s", err, out)
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(got, defaultConfigRefusal) {
		t.Errorf("etcdlet validate of the default configuration says:\n%s\nwant:\n%s", out, strings.Join(defaultConfigRefusal, "\n"))
	}
	checkInstalledFiles(t, h)
	// The etcd CA made on the host (docs/certificates.md, "The CA"), reused
	// by a second run, and a member's certificates issued from it.
	if out := h.must("etcdlet", "certs", "init-ca"); !strings.Contains(out, "Made the etcd CA CN=etcd-ca") {
		t.Errorf("etcdlet certs init-ca says:\n%s", out)
	}
	if out := h.must("etcdlet", "certs", "init-ca"); !strings.Contains(out, "is reused") {
		t.Errorf("a second etcdlet certs init-ca says:\n%s", out)
	}
	if mode := h.must("stat", "-c", "%a %U:%G", "/etc/kubernetes/pki/etcd/ca.key"); mode != "600 root:root\n" {
		t.Errorf("ca.key is %s, want 600 root:root", mode)
	}
	h.must("etcdlet", "certs", "issue", "--address", "127.0.0.1")
	if s := h.show("etcdlet.service", "LoadState", "ActiveState", "UnitFileState"); s["LoadState"] != "loaded" ||
		s["ActiveState"] != "inactive" || s["UnitFileState"] != "disabled" {
		t.Errorf("after the install etcdlet.service is %v, want loaded, inactive and disabled", s)
	}
	dropIn := "/usr/lib/systemd/system/kubelet.service.d/10-etcdlet.conf"
	if s := h.show("kubelet.service", "DropInPaths", "NeedDaemonReload", "After", "Wants"); !strings.Contains(s["DropInPaths"], dropIn) ||
		s["NeedDaemonReload"] != "no" || !strings.Contains(s["After"], "etcdlet.service") || !strings.Contains(s["After"], "etcdlet.target") ||
		!strings.Contains(s["Wants"], "etcdlet.target") {
		t.Errorf("after the install systemd sees kubelet.service as %v: want the drop-in %s loaded (a daemon-reload), After= etcdlet.service and etcdlet.target, Wants= etcdlet.target", s, dropIn)
	}

	// A one-member cluster on the host's own loopback: the packaged
	// default with its FILL IN fields filled in, as the operator does.
	config := fillPackagedDefault(t, "[127.0.0.1]")
	h.write(packagedConfig, config, 0o600)
	if out := h.must("etcdlet", "validate"); !strings.Contains(out, "valid; cluster etcd-main, 1 listed members, runtime embedded") {
		t.Errorf("etcdlet validate of the one-member configuration: %s", out)
	}
	// Type=notify: systemctl start returns once etcdlet said READY=1 (it
	// waits for the operator's act: nothing to run yet).
	if out, err := h.exec("systemctl", "start", "etcdlet.service"); err != nil {
		t.Fatalf("systemctl start etcdlet: %v\n%s\n%s", err, out, h.journal())
	}
	pid, started := h.waitActive("etcdlet.service active after systemctl start")
	// docs/operations.md, Install: a new cluster is the operator's act.
	if out := h.must("etcdlet", "bootstrap", "--approve"); !strings.Contains(out, "approved: this node founds a new one-member cluster") {
		t.Fatalf("etcdlet bootstrap --approve says:\n%s", out)
	}
	h.waitHealthy("etcdlet status shows the member healthy")
	// Snapshots are on by default, into a directory on this host, and
	// etcdlet status says that a lost host takes them with it.
	if out := h.must("etcdlet", "status"); !strings.Contains(out, "snapshots: no full snapshot yet in /var/lib/etcdlet/snapshots on this host only; a full one every 12h0m0s; a host that is lost takes them with it") {
		t.Errorf("etcdlet status does not say where the default snapshots go:\n%s", out)
	}

	// Upgrade, as an unattended run does it: keep the edited configuration.
	newer := waitNewer()
	copyFile(t, newer.deb(arch), h.file("/root/newer.deb"))
	h.must("dpkg", "-i", "--force-confdef", "--force-confold", "/root/newer.deb")
	if got := h.read(packagedConfig); got != config {
		t.Errorf("the upgrade changed the edited configuration:\n%s", got)
	}
	if got := h.read(packagedConfig + ".dpkg-dist"); got != newerDefault {
		t.Errorf("the newer default configuration is not beside it as config.yaml.dpkg-dist:\n%s", got)
	}
	if mode := h.must("stat", "-c", "%a %U:%G", packagedConfig); mode != "600 root:root\n" {
		t.Errorf("after the upgrade %s is %s, want 600 root:root", packagedConfig, mode)
	}
	newPID, newStarted := h.waitActive("etcdlet.service active after the upgrade")
	if newPID == pid || newStarted == started {
		t.Errorf("the upgrade did not restart etcdlet.service: MainPID %s -> %s, started %s -> %s", pid, newPID, started, newStarted)
	}
	if v := h.must("etcdlet", "version"); !strings.HasPrefix(v, "etcdlet "+pkgVersionNewer+" ") {
		t.Errorf("after the upgrade etcdlet version says %q, want etcdlet %s", v, pkgVersionNewer)
	}
	if s := h.show("etcdlet.service", "UnitFileState"); s["UnitFileState"] != "disabled" {
		t.Errorf("the upgrade changed etcdlet.service's enablement: %v", s)
	}
	h.waitHealthy("etcdlet status shows the member healthy after the upgrade")

	// The .rpm's scriptlets, with rpm's arguments, under the same systemd.
	rpmScripts = rpmScriptlets(t, newer.rpm(arch))
	pid = newPID
	for _, step := range []struct {
		tag, arg string
		effect   string // "none", "restart" or "stop"
	}{
		{"PREUN", "1", "none"},     // the old package's, on an upgrade
		{"POSTUN", "1", "none"},    // the old package's, on an upgrade
		{"POSTIN", "2", "restart"}, // the new package's, on an upgrade
		{"POSTIN", "1", "none"},    // a first install
		{"PREUN", "0", "stop"},     // an erase
	} {
		h.write("/root/scriptlet", rpmScripts[step.tag], 0o755)
		what := fmt.Sprintf("the .rpm's %s scriptlet with %s", step.tag, step.arg)
		if out, err := h.exec("sh", "/root/scriptlet", step.arg); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		s := h.show("etcdlet.service", "ActiveState", "MainPID", "UnitFileState")
		switch {
		case s["UnitFileState"] != "disabled":
			t.Errorf("%s left etcdlet.service %s", what, s["UnitFileState"])
		case step.effect == "stop" && s["ActiveState"] != "inactive":
			t.Errorf("%s did not stop etcdlet.service: %v", what, s)
		case step.effect == "restart" && (s["ActiveState"] != "active" || s["MainPID"] == pid):
			t.Errorf("%s did not restart etcdlet.service: MainPID %s -> %v", what, pid, s)
		case step.effect == "none" && (s["ActiveState"] != "active" || s["MainPID"] != pid):
			t.Errorf("%s changed etcdlet.service: MainPID %s -> %v", what, pid, s)
		}
		pid = s["MainPID"]
	}
	h.must("systemctl", "start", "etcdlet.service")
	h.waitActive("etcdlet.service active again")

	// Remove: stopped, unknown to systemd, configuration and data kept.
	h.must("dpkg", "-r", "etcdlet")
	if s := h.show("etcdlet.service", "LoadState", "ActiveState"); s["LoadState"] != "not-found" || s["ActiveState"] != "inactive" {
		t.Errorf("after dpkg -r etcdlet.service is %v, want not-found and inactive", s)
	}
	if s := h.show("kubelet.service", "DropInPaths", "NeedDaemonReload"); s["DropInPaths"] != "" || s["NeedDaemonReload"] != "no" {
		t.Errorf("after dpkg -r systemd still sees the kubelet drop-in: %v", s)
	}
	if h.exists("/usr/bin/etcdlet") {
		t.Error("dpkg -r left /usr/bin/etcdlet")
	}
	if got := h.read(packagedConfig); got != config {
		t.Errorf("dpkg -r changed or removed the configuration: %q", got)
	}
	checkDataKept(t, h, "dpkg -r")
	if st := h.must("dpkg-query", "-W", "-f", "${Status}", "etcdlet"); st != "deinstall ok config-files" {
		t.Errorf("after dpkg -r the package is %q, want deinstall ok config-files", st)
	}

	// Purge: the configuration goes, the data stays.
	h.must("dpkg", "-P", "etcdlet")
	for _, p := range []string{packagedConfig, packagedConfig + ".dpkg-dist", "/etc/etcdlet"} {
		if h.exists(p) {
			t.Errorf("dpkg -P left %s", p)
		}
	}
	checkDataKept(t, h, "dpkg -P")
	if out, err := h.exec("dpkg-query", "-W", "etcdlet"); err == nil {
		t.Errorf("after dpkg -P dpkg still knows the package: %s", out)
	}
}

// checkInstalledFiles: every packaged file in the host, with its mode and
// owner; the man pages and documentation by example.
func checkInstalledFiles(t *testing.T, h *nspawnHost) {
	t.Helper()
	// Besides the packaged files: two man pages, and the documentation
	// the help points to.
	paths := []string{"/usr/share/man/man1/etcdlet.1.gz", "/usr/share/man/man1/etcdlet-validate.1.gz",
		docDir + "/operations.md", docDir + "/config.md", docDir + "/examples/static-tls.yaml"}
	want := map[string]string{}
	for _, p := range paths {
		want[p] = "-rw-r--r--"
	}
	for _, f := range packagedFiles {
		paths = append(paths, f.path)
		want[f.path] = f.perms
	}
	out := h.must(append([]string{"stat", "-c", "%A %U:%G %n"}, paths...)...)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || want[f[2]] != f[0] || f[1] != "root:root" {
			t.Errorf("installed: %s; want %s root:root", line, want[f[len(f)-1]])
		}
	}
}

// checkDataKept: etcd's data dir still holds the member's WAL, and the
// state dir its state, after what.
func checkDataKept(t *testing.T, h *nspawnHost, what string) {
	t.Helper()
	if wals, _ := filepath.Glob(h.file("/var/lib/etcdlet/etcd/member/wal/*.wal")); len(wals) == 0 {
		t.Errorf("after %s /var/lib/etcdlet/etcd holds no WAL: etcd's data is gone", what)
	}
	if entries, err := os.ReadDir(h.file("/var/lib/etcdlet/agent")); err != nil || len(entries) == 0 {
		t.Errorf("after %s /var/lib/etcdlet/agent is gone or empty (%v)", what, err)
	}
}

// rpmScriptlets reads the .rpm's scriptlets by tag (POSTIN, PREUN, POSTUN).
func rpmScriptlets(t *testing.T, rpm string) map[string]string {
	t.Helper()
	scripts := map[string]string{}
	for _, tag := range []string{"POSTIN", "PREUN", "POSTUN"} {
		scripts[tag] = output(t, "rpm", "-qp", "--qf", "%{"+tag+"}\n", rpm)
	}
	return scripts
}

// fillPackagedDefault is the packaged default configuration with the
// fields it marks FILL IN filled: cluster.name etcd-main, and addresses
// (a YAML list) as members.addresses.
func fillPackagedDefault(t *testing.T, addresses string) string {
	t.Helper()
	def := readRepoFile(t, "packaging/config.yaml")
	filled := strings.Replace(def, "\n  name: \"\"\n", "\n  name: etcd-main\n", 1)
	filled = strings.Replace(filled, "\n  addresses: []\n", "\n  addresses: "+addresses+"\n", 1)
	if filled == def || strings.Count(filled, "FILL IN") != strings.Count(def, "FILL IN") {
		t.Fatal("packaging/config.yaml no longer has the FILL IN fields this test fills in")
	}
	return "# edited by the operator\n" + filled
}

// checkUpgradeJoinsTarget: an etcdlet.service enabled by a package older
// than etcdlet.target is linked from multi-user.target only; the upgrade
// enables it again, into etcdlet.target, which the kubelet waits for, and
// the removal takes every link away. In a chroot: links only.
func checkUpgradeJoinsTarget(t *testing.T, h *nspawnHost) {
	t.Helper()
	const (
		oldLink    = "/etc/systemd/system/multi-user.target.wants/etcdlet.service"
		targetLink = "/etc/systemd/system/etcdlet.target.requires/etcdlet.service"
	)
	if out, err := h.chroot("dpkg", "-i", "/root/older.deb"); err != nil {
		t.Fatalf("in a chroot: dpkg -i: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Dir(h.file(oldLink)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/lib/systemd/system/etcdlet.service", h.file(oldLink)); err != nil {
		t.Fatal(err)
	}
	if out, err := h.chroot("dpkg", "-i", "/root/older.deb"); err != nil { // configure <version>: an upgrade
		t.Fatalf("in a chroot: dpkg -i again: %v\n%s", err, out)
	}
	if !h.exists(targetLink) || !h.exists(oldLink) {
		t.Errorf("in a chroot: after the upgrade of an etcdlet.service enabled before etcdlet.target, %s exists %v, %s exists %v; want both",
			oldLink, h.exists(oldLink), targetLink, h.exists(targetLink))
	}
	if out, err := h.chroot("dpkg", "-P", "etcdlet"); err != nil {
		t.Fatalf("in a chroot: dpkg -P: %v\n%s", err, out)
	}
	for _, link := range []string{oldLink, targetLink} {
		if _, err := os.Lstat(h.file(link)); err == nil {
			t.Errorf("in a chroot: %s is still there after dpkg -P", link)
		}
	}
}
