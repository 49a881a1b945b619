package test

// Three Debian hosts under a real systemd (nspawn_test.go), each in its own
// network namespace with its own address, etcdlet installed from the .deb
// and run as the shipped etcdlet.service: the cluster forms under the
// unit's sandbox, READY=1 and the watchdog mean what the unit says, the
// kubelet is ordered after etcdlet, and a removed member's data is moved
// aside where the sandbox lets etcdlet write.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/test/harness"
)

// unitMaxExposure is the highest `systemd-analyze security` score the unit
// may have: the 2.3 measured with the Debian root's systemd 252
// (docs/packaging.md). Any protection dropped raises it; a better one may
// lower it. Another systemd release may weigh settings differently: then
// measure again.
const unitMaxExposure = 2.3

// unitTestWatchdog is host 2's WatchdogSec= (a drop-in): with the shipped
// 30s a hang takes 30s to be noticed. Not shorter: the agent then pings
// every 5s, only while its loop waits or made progress within those 5s,
// and a slow pass on busy shared cores must not trip it. The
// other hosts keep, and the test checks, the shipped value.
const (
	unitTestWatchdog    = "10s"
	unitShippedWatchdog = "30s"
)

// systemd's message ID (sd-messages.h) for "Started <unit>": the start
// job is done, for Type=notify on READY=1, for Type=simple at the fork.
const unitMsgStarted = "39f53479d3a045ac8e11786248231fbf"

// unitPollEvery paces the waits: every check starts processes in the hosts,
// on a machine whose cores other tests share.
const unitPollEvery = 500 * time.Millisecond

// unitHostAddr is host n's address (TEST-NET-2), only ever inside the
// test's network namespaces.
func unitHostAddr(n int) string { return fmt.Sprintf("198.51.100.%d", 10+n) }

// sdHost is one of the test's hosts: number n, address ip.
type sdHost struct {
	*nspawnHost
	n  int
	ip string
}

// Three hosts with etcdlet as their unit. Host 1 has a stand-in kubelet,
// neither /etc/kubernetes/manifests nor /var/lib/etcd (the "-" of
// ReadWritePaths=) and at first no member list: the kubelet starts at once,
// etcdlet having said READY=1 with nothing to do. Hosts 2 and 3 start with
// the list and wait for the operator's act (cluster.bootstrap explicit, the
// packaged default); once host 1 reads the list too, `etcdlet bootstrap
// --approve` there founds the cluster, as docs/operations.md installs one,
// and hosts 2 and 3 join it. Then: the kubelet restarted with the cluster running
// still starts after etcdlet's READY=1; host 2's agent, hung with SIGSTOP,
// is killed by the watchdog and restarted; host 3 leaves the list and its
// data dir is moved aside inside StateDirectory=, then rejoins with the
// data dir at /var/lib/etcd and leaves again, its data moved into a
// directory inside that bind mount; systemd-analyze scores the unit.
func TestUnitOnSystemdHosts(t *testing.T) {
	t.Parallel()
	hosts, begin := bootUnitHosts(t, "unit", 3, unitHostAddr, func(h *sdHost) {
		switch h.n {
		case 1:
			h.write("/etc/systemd/system/kubelet.service", "[Unit]\nDescription=kubelet stand-in\n[Service]\nExecStart=/bin/sleep infinity\n", 0o644)
		case 2:
			h.write("/etc/systemd/system/etcdlet.service.d/50-test-watchdog.conf", "[Service]\nWatchdogSec="+unitTestWatchdog+"\n", 0o644)
		}
	}, func(h *sdHost) { h.write(packagedConfig, unitTestConfig(h.ip, ""), 0o600) })
	h1, h2, h3 := hosts[0], hosts[1], hosts[2]
	setUnitHostsList(t, hosts, 1, 2, 3)
	for _, h := range hosts {
		h.must("etcdlet", "validate")
	}

	// Host 1: no list yet, no manifest dir, no /var/lib/etcd.
	if err := os.Remove(h1.file("/etc/etcdlet/members")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(h1.file("/var/lib/etcd")); err != nil {
		t.Fatal(err)
	}
	if h1.exists("/etc/kubernetes/manifests") {
		t.Fatal("the Debian root has /etc/kubernetes/manifests; the test needs a host without it")
	}
	forUnitHosts(t, 2, func(i int) {
		h := hosts[i] // hosts 2 and 3
		if out, err := h.exec("systemctl", "enable", "--now", "etcdlet.service"); err != nil {
			t.Errorf("host %d: systemctl enable --now etcdlet: %v\n%s\n%s", h.n, err, out, h.journal())
		}
	})
	h1.must("systemctl", "enable", "etcdlet.service")
	// Promptly: etcdlet's first pass, not TimeoutStartSec=5min.
	took := h1.startKubelet(t, 20*time.Second)
	if s := h1.show("etcdlet.service", "ActiveState", "SubState", "StatusText"); s["ActiveState"] != "active" ||
		s["SubState"] != "running" || !strings.Contains(s["StatusText"], "no member list") {
		t.Errorf("without a member list etcdlet.service is %v, want active (running) saying there is no member list\n%s", s, h1.journal())
	}
	if j := h1.unitJournal("etcdlet.service"); strings.Contains(j, "mount namespacing") || strings.Contains(j, "step NAMESPACE") {
		t.Errorf("starting without /etc/kubernetes/manifests and /var/lib/etcd, systemd complained about the sandbox:\n%s", j)
	}
	t.Logf("without a member list the kubelet started %s after systemctl start kubelet", took.Round(10*time.Millisecond))

	// The list arrives on host 1, and the operator founds the cluster there.
	setUnitHostsList(t, hosts[:1], 1, 2, 3)
	if out := h1.must("etcdlet", "bootstrap", "--approve"); !strings.Contains(out, "approved: this node founds a new one-member cluster") {
		t.Fatalf("etcdlet bootstrap --approve on host 1 says:\n%s", out)
	}
	h1.waitVoters(t, "the three hosts form a cluster", hosts, h1.ip, h2.ip, h3.ip)
	for _, h := range hosts {
		if s := h.show("etcdlet.service", "ActiveState", "SubState", "NRestarts", "StatusText"); s["ActiveState"] != "active" ||
			s["SubState"] != "running" || s["NRestarts"] != "0" {
			t.Errorf("host %d: etcdlet.service is %v, want active (running), never restarted\n%s", h.n, s, h.journal())
		}
	}
	t.Logf("cluster formed after %s", time.Since(begin).Round(time.Second))
	checkUnitReload(t, h2)

	// The kubelet restarted with the cluster running: etcdlet's READY=1
	// (its member started on its data) comes first again.
	h1.must("systemctl", "stop", "kubelet.service", "etcdlet.service")
	h1.startKubelet(t, time.Minute)
	h1.waitVoters(t, "host 1's member is back after the kubelet's restart", hosts, h1.ip, h2.ip, h3.ip)

	checkUnitWatchdog(t, h2, hosts)
	if w := h1.show("etcdlet.service", "WatchdogUSec")["WatchdogUSec"]; w != unitShippedWatchdog {
		t.Errorf("the shipped unit has WatchdogSec=%s, want %s", w, unitShippedWatchdog)
	}

	// Host 3 leaves: its data dir goes aside beside itself, in StateDirectory=.
	setUnitHostsList(t, hosts, 1, 2)
	h1.waitVoters(t, "host 3's member is removed", hosts, h1.ip, h2.ip)
	h3.waitMovedAside(t, "/var/lib/etcdlet/etcd.etcdlet-moved-*")

	// Host 3 rejoins with kubeadm's data dir, /var/lib/etcd (ReadWritePaths=,
	// a bind mount in a read-only /var/lib), and leaves again: the data
	// moves into a directory inside it.
	h3.write(packagedConfig, unitTestConfig(h3.ip, "/var/lib/etcd"), 0o600)
	h3.must("systemctl", "restart", "etcdlet.service")
	setUnitHostsList(t, hosts, 1, 2, 3)
	h1.waitVoters(t, "host 3 rejoins with its data dir in /var/lib/etcd", hosts, h1.ip, h2.ip, h3.ip)
	if wals, _ := filepath.Glob(h3.file("/var/lib/etcd/member/wal/*.wal")); len(wals) == 0 {
		t.Fatalf("host 3 rejoined, but /var/lib/etcd holds no WAL\n%s", h3.journal())
	}
	setUnitHostsList(t, hosts, 1, 2)
	h1.waitVoters(t, "host 3's member is removed again", hosts, h1.ip, h2.ip)
	h3.waitMovedAside(t, "/var/lib/etcd/etcdlet-moved-*")

	score, level := h1.exposure(t)
	t.Logf("systemd-analyze security etcdlet.service: %.1f %s", score, level)
	if score > unitMaxExposure {
		t.Errorf("systemd-analyze security scores etcdlet.service %.1f %s, more than %.1f: the sandbox was weakened", score, level, unitMaxExposure)
	}
	t.Logf("the test took %s after the package build", time.Since(begin).Round(time.Second))
}

// bootUnitHosts boots count Debian hosts under systemd, each in a network
// namespace of its own on one bridge (tag names them) with address
// addr(n), the package installed and certificates issued from one etcd
// CA: prepare(h) runs before the boot, configure(h) after the install,
// for each host at once. The agents stop together before the hosts power
// off one by one: the last member standing, without quorum, takes about
// 15 s to stop. begin is when the set-up began after the package build,
// which the tests share.
func bootUnitHosts(t *testing.T, tag string, count int, addr func(n int) string, prepare, configure func(h *sdHost)) (hosts []*sdHost, begin time.Time) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test boots Debian hosts with systemd-nspawn and needs root: run `sudo make test`")
	}
	requireTools(t, map[string]string{"systemd-nspawn": "systemd-container", "nsenter": "util-linux", "tar": "tar", "ip": "iproute2"})
	tarball := debianRoot(t)
	deb := sharedPackages(t).deb(runtime.GOARCH)
	begin = time.Now()
	ca, err := harness.GenerateTLS(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := harness.BridgedHosts(t, tag, count, func(n int) string { return addr(n) + "/24" })
	hosts = make([]*sdHost, count)
	forUnitHosts(t, len(hosts), func(n int) {
		h := &sdHost{nspawnHost: newNspawnHost(t, tarball), n: n, ip: addr(n)}
		copyFile(t, deb, h.file("/root/etcdlet.deb"))
		h.write("/etc/kubernetes/pki/etcd/ca.crt", readLocal(t, ca.CA), 0o644)
		h.write("/etc/kubernetes/pki/etcd/ca.key", readLocal(t, ca.CAKey), 0o600)
		prepare(h)
		h.boot(ns(n))
		h.must("dpkg", "-i", "/root/etcdlet.deb")
		h.must("etcdlet", "certs", "issue", "--address", h.ip)
		configure(h)
		hosts[n-1] = h
	})
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Go(func() { _, _ = h.exec("systemctl", "stop", "etcdlet.service") })
		}
		wg.Wait()
	})
	t.Logf("%d hosts booted, etcdlet installed and configured in %s", count, time.Since(begin).Round(time.Second))
	return hosts, begin
}

// unitTestConfig is a host's configuration: the member list in a file,
// TLS from `etcdlet certs issue`, the embedded runtime, and the data dir
// dataDir ("": the default).
func unitTestConfig(ip, dataDir string) string {
	return unitTestConfigWith(ip, dataDir, "members:\n  source: file\n  file: /etc/etcdlet/members\n")
}

// unitTestConfigWith is unitTestConfig with another members section.
func unitTestConfigWith(ip, dataDir, members string) string {
	pki := func(name string) string {
		return fmt.Sprintf("certFile: /etc/kubernetes/pki/etcd/%[1]s.crt, keyFile: /etc/kubernetes/pki/etcd/%[1]s.key, caFile: /etc/kubernetes/pki/etcd/ca.crt", name)
	}
	etcd := "etcd:\n  runtime: embedded\n"
	if dataDir != "" {
		etcd += "  dataDir: " + dataDir + "\n"
	}
	return "cluster:\n  name: etcd-main\n" + members + "node:\n  address: " + ip + "\n" + etcd +
		"  tls:\n    client: {" + pki("server") + "}\n    peer: {" + pki("peer") + "}\n" +
		"agent:\n  etcdClientTLS: {" + pki("healthcheck-client") + "}\n"
}

// checkUnitReload: systemctl reload runs on a minimal host (the Debian
// root has no /bin/kill) and says the agent's verdict: a configuration the
// agent refuses (a field that needs a restart) fails the reload and keeps
// the unit running on the old one, and an edit is reloaded (here: refused)
// without one, which etcdlet status reports; the file put back reloads.
func checkUnitReload(t *testing.T, h *sdHost) {
	t.Helper()
	if out, err := h.exec("systemctl", "reload", "etcdlet.service"); err != nil {
		t.Fatalf("host %d: systemctl reload etcdlet: %v\n%s\n%s", h.n, err, out, h.unitJournal("etcdlet.service"))
	}
	// The journal holds text (logfmt), which journalctl shows as it is.
	if j := h.unitJournal("etcdlet.service"); !strings.Contains(j, `level=INFO msg="configuration reloaded"`) {
		t.Errorf("host %d: after systemctl reload the unit's journal does not say, in logfmt, that the configuration was reloaded:\n%s", h.n, j)
	}
	orig := h.read(packagedConfig)
	h.write(packagedConfig, orig+"  logLevel: debug\n", 0o600) // agent.logLevel: a restart's
	// The agent reloads the edited file on its own, refuses it, and
	// etcdlet status says the file on disk is not in force.
	harness.Eventually(t, 20*time.Second, "the agent refuses the edited file on its own", func() error {
		if j := h.unitJournal("etcdlet.service"); !strings.Contains(j, "reload refused: agent.logLevel changed") {
			return fmt.Errorf("host %d's journal does not name the refused field yet", h.n)
		}
		return nil
	})
	out, _ := h.exec("etcdlet", "status")
	if !strings.Contains(out, "CONFIGURATION NOT IN FORCE") || !strings.Contains(out, "agent.logLevel") {
		t.Errorf("host %d: etcdlet status with a refused configuration on disk does not say so:\n%s", h.n, out)
	}
	// It also says when the certificates expire: the test's CA and
	// certificates last a day, so it names them as expiring, and what to do.
	if !strings.Contains(out, "certificates: /etc/kubernetes/pki/etcd/") || !strings.Contains(out, "expiring") || !strings.Contains(out, "etcdlet certs renew") {
		t.Errorf("host %d: etcdlet status does not say that the certificates expire within a day:\n%s", h.n, out)
	}
	out, err := h.exec("systemctl", "reload", "etcdlet.service")
	if err == nil {
		t.Errorf("host %d: systemctl reload of a configuration that needs a restart succeeded:\n%s", h.n, out)
	}
	if j := h.unitJournal("etcdlet.service"); !strings.Contains(j, "reload refused: agent.logLevel changed") {
		t.Errorf("host %d: the refused reload is not named in the unit's journal:\n%s", h.n, j)
	}
	if s := h.show("etcdlet.service", "ActiveState", "SubState"); s["ActiveState"] != "active" || s["SubState"] != "running" {
		t.Errorf("host %d: after a refused reload etcdlet.service is %v, want active (running)", h.n, s)
	}
	h.write(packagedConfig, orig, 0o600)
	h.must("systemctl", "reload", "etcdlet.service")
}

// setUnitHostsList writes the member list file, the addresses of hosts
// ns, on each of hosts, atomically (a rename), as a tool keeping the list
// would.
func setUnitHostsList(t *testing.T, hosts []*sdHost, ns ...int) {
	t.Helper()
	var list strings.Builder
	for _, n := range ns {
		fmt.Fprintln(&list, unitHostAddr(n))
	}
	for _, h := range hosts {
		tmp := h.file("/etc/etcdlet/.members.tmp")
		if err := os.WriteFile(tmp, []byte(list.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, h.file("/etc/etcdlet/members")); err != nil {
			t.Fatal(err)
		}
	}
}

// checkUnitWatchdog hangs h's agent (SIGSTOP: it stops pinging) and waits
// until systemd's watchdog killed it and the restarted agent's member is a
// healthy voter again.
func checkUnitWatchdog(t *testing.T, h *sdHost, hosts []*sdHost) {
	t.Helper()
	before := h.show("etcdlet.service", "MainPID", "NRestarts", "WatchdogUSec")
	if before["WatchdogUSec"] != unitTestWatchdog {
		t.Fatalf("host %d: the drop-in did not set WatchdogSec=%s: %v", h.n, unitTestWatchdog, before)
	}
	restarts, err := strconv.Atoi(before["NRestarts"])
	if err != nil {
		t.Fatal(err)
	}
	hung := time.Now()
	h.must("sh", "-c", `kill -STOP "$1"`, "sh", before["MainPID"])
	waitOnUnitHosts(t, time.Minute, "systemd restarts the hung agent", []*sdHost{h}, func() error {
		s := h.show("etcdlet.service", "ActiveState", "SubState", "MainPID", "NRestarts")
		if s["MainPID"] == before["MainPID"] || s["NRestarts"] != strconv.Itoa(restarts+1) || s["SubState"] != "running" {
			return errorf("etcdlet.service is %v (was %v)", s, before)
		}
		return nil
	})
	t.Logf("the watchdog (WatchdogSec=%s) restarted the hung agent %s after SIGSTOP", unitTestWatchdog, time.Since(hung).Round(100*time.Millisecond))
	j := h.unitJournal("etcdlet.service")
	for _, want := range []string{"Watchdog timeout", "Failed with result 'watchdog'"} {
		if !strings.Contains(j, want) {
			t.Errorf("host %d: etcdlet's journal lacks %q: the restart was not the watchdog's\n%s", h.n, want, lastLines(j, 40))
		}
	}
	h.waitVoters(t, "the restarted agent's member is a healthy voter again", hosts, hosts[0].ip, hosts[1].ip, hosts[2].ip)
}

// startKubelet starts the stand-in kubelet, which the drop-in's Wants=
// makes start etcdlet too, waits until it is active (at most within), and
// returns how long that took. It checks in systemd's journal that
// etcdlet's start job finished (READY=1, for this run of etcdlet) before
// the kubelet's did: systemd writes both messages in order, and a
// Type=simple unit's start job ends when its process is forked (such a
// unit gets no "Starting" message).
func (h *sdHost) startKubelet(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	h.must("systemctl", "start", "--no-block", "kubelet.service")
	waitOnUnitHosts(t, within, fmt.Sprintf("host %d: the kubelet starts", h.n), []*sdHost{h}, func() error {
		k, e := h.show("kubelet.service", "ActiveState"), h.show("etcdlet.service", "ActiveState", "SubState", "StatusText")
		if k["ActiveState"] != "active" {
			return errorf("kubelet.service is %v; etcdlet.service is %v", k, e)
		}
		return nil
	})
	took := time.Since(begin)
	execStart, err := strconv.ParseUint(h.show("etcdlet.service", "ExecMainStartTimestampMonotonic")["ExecMainStartTimestampMonotonic"], 10, 64)
	if err != nil {
		t.Fatalf("host %d: etcdlet's start time: %v", h.n, err)
	}
	ready := h.lastMessage(t, "etcdlet.service", unitMsgStarted)
	kubelet := h.lastMessage(t, "kubelet.service", unitMsgStarted)
	if ready.mono < execStart || kubelet.seq < ready.seq {
		t.Errorf("host %d: etcdlet started at %d µs; journal: etcdlet started (READY=1) %+v, the kubelet started %+v: "+
			"want the kubelet after etcdlet's READY=1 of this run\n%s", h.n, execStart, ready, kubelet,
			h.must("journalctl", "--no-pager", "-o", "short-monotonic", "-n", "30", "-u", "etcdlet.service", "-u", "kubelet.service"))
	}
	return took
}

// journalPos is where an entry is in a host's journal: its sequence
// number (strictly in the order written, "i=" of its cursor) and
// monotonic time (µs).
type journalPos struct{ seq, mono uint64 }

// lastMessage is where systemd's last message with the ID msgID about unit
// is in the journal.
func (h *sdHost) lastMessage(t *testing.T, unit, msgID string) journalPos {
	t.Helper()
	out := h.must("journalctl", "--no-pager", "-o", "json", "-n", "1", "UNIT="+unit, "MESSAGE_ID="+msgID)
	var e struct {
		Cursor string `json:"__CURSOR"`
		Mono   string `json:"__MONOTONIC_TIMESTAMP"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("host %d: no journal message %s about %s: %v: %q", h.n, msgID, unit, err, out)
	}
	var pos journalPos
	var errs [2]error
	for _, f := range strings.Split(e.Cursor, ";") {
		if hex, ok := strings.CutPrefix(f, "i="); ok {
			pos.seq, errs[0] = strconv.ParseUint(hex, 16, 64)
		}
	}
	pos.mono, errs[1] = strconv.ParseUint(e.Mono, 10, 64)
	if pos.seq == 0 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("host %d: journal message %s about %s: no sequence number or time: %q", h.n, msgID, unit, out)
	}
	return pos
}

// waitMovedAside waits until h's etcdlet moved its data dir aside to a
// path matching pattern, keeping the WAL, and logged it, and checks that
// the unit stayed active (the node is idle, not failed) and that no write
// met the read-only file system.
func (h *sdHost) waitMovedAside(t *testing.T, pattern string) {
	t.Helper()
	waitOnUnitHosts(t, time.Minute, fmt.Sprintf("host %d moves its data dir aside to %s", h.n, pattern), []*sdHost{h}, func() error {
		if wals, _ := filepath.Glob(h.file(filepath.Join(pattern, "member/wal/*.wal"))); len(wals) == 0 {
			return errorf("no WAL in %s yet", pattern)
		}
		// The agent logs the move once the rename is done: the journal
		// may have it a moment after the directory is there.
		if !strings.Contains(h.unitJournal("etcdlet.service"), "moved data dir aside") {
			return errorf("the data dir is in %s, and etcdlet has not logged the move aside yet", pattern)
		}
		return nil
	})
	if s := h.show("etcdlet.service", "ActiveState", "SubState"); s["ActiveState"] != "active" || s["SubState"] != "running" {
		t.Errorf("host %d: after its member was removed etcdlet.service is %v, want active (running)\n%s", h.n, s, h.journal())
	}
	j := h.unitJournal("etcdlet.service")
	if strings.Contains(strings.ToLower(j), "read-only file system") {
		t.Errorf("host %d: etcdlet met the read-only file system:\n%s", h.n, lastLines(j, 40))
	}
}

// waitVoters waits until `etcdlet status` in h shows exactly ips, all
// listed, healthy and voting; at the deadline it shows every host's journal.
func (h *sdHost) waitVoters(t *testing.T, what string, hosts []*sdHost, ips ...string) {
	t.Helper()
	h.waitInstanceVoters(t, mainInstance, what, hosts, ips...)
}

// unitInstance is one etcdlet of a host: its unit, the arguments that
// select its configuration, and its cluster's name.
type unitInstance struct {
	unit    string
	args    []string
	cluster string
}

// mainInstance is etcdlet.service, reading /etc/etcdlet/config.yaml.
var mainInstance = unitInstance{"etcdlet.service", nil, "etcd-main"}

// waitInstanceVoters is waitVoters for the agent of instance.
func (h *sdHost) waitInstanceVoters(t *testing.T, instance unitInstance, what string, hosts []*sdHost, ips ...string) {
	t.Helper()
	waitOnUnitHosts(t, 2*time.Minute, what, hosts, func() error {
		out, err := h.exec(append([]string{"etcdlet", "status", "-o", "json"}, instance.args...)...)
		if err != nil {
			return fmt.Errorf("etcdlet status in host %d: %v: %s", h.n, err, out)
		}
		var r statusreport.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return fmt.Errorf("etcdlet status -o json: %v: %s", err, out)
		}
		if !r.Converged || len(r.Members) != len(ips) {
			return errorf("not converged on %v: %s", ips, out)
		}
		for _, m := range r.Members {
			if !slices.Contains(ips, m.IP) || m.InList != "yes" || m.Health != "healthy" ||
				(m.Role != "voter" && m.Role != "leader") || m.Name != instance.cluster+"-"+m.IP {
				return errorf("member %+v is not a healthy listed voter of %v", m, ips)
			}
		}
		return nil
	})
}

// exposure runs `systemd-analyze security` on the installed unit and
// returns its overall exposure score and level.
func (h *sdHost) exposure(t *testing.T) (float64, string) {
	t.Helper()
	out, _ := h.exec("systemd-analyze", "security", "--no-pager", "etcdlet.service")
	m := regexp.MustCompile(`Overall exposure level for etcdlet\.service: ([0-9.]+) (\w+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("host %d: no overall exposure level in systemd-analyze security's output:\n%s", h.n, out)
	}
	score, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return score, m[2]
}

// unitJournal is everything the host's journal holds about unit, systemd's
// messages included.
func (h *sdHost) unitJournal(unit string) string {
	out, _ := h.exec("journalctl", "--no-pager", "-o", "cat", "-u", unit)
	return out
}

func readLocal(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitOnUnitHosts polls cond every unitPollEvery until it holds; at the
// deadline it fails the test with cond's last error and the tail of each
// host's etcdlet journal (read only then: reading it on every poll would
// cost).
func waitOnUnitHosts(t *testing.T, timeout time.Duration, what string, hosts []*sdHost, cond func() error) {
	t.Helper()
	var last time.Time
	eventually.Nil(t, timeout, what, func() error {
		time.Sleep(time.Until(last.Add(unitPollEvery)))
		last = time.Now()
		if err := cond(); err != nil {
			return withJournals{err, hosts}
		}
		return nil
	})
}

// withJournals is a wait's last error, which reads the hosts' journals
// only when the failure is reported.
type withJournals struct {
	err   error
	hosts []*sdHost
}

func (w withJournals) Error() string {
	var journals strings.Builder
	for _, h := range w.hosts {
		fmt.Fprintf(&journals, "\n--- host %d (%s), journalctl -u etcdlet:\n%s", h.n, h.ip, h.journal())
	}
	return w.err.Error() + journals.String()
}

// forUnitHosts runs f(1), …, f(n) at once, for the slow host set-up (unpack,
// boot, install). A t.Fatal in f ends only its goroutine (runtime.Goexit,
// which still runs the deferred Done); the test stops here instead.
func forUnitHosts(t *testing.T, n int, f func(n int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}
