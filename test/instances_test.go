package test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventsInstance is etcdlet@events.service, reading
// /etc/etcdlet/events.yaml: a second cluster on the same hosts.
var eventsInstance = unitInstance{"etcdlet@events.service", []string{"--instance", "events"}, "etcd-events"}

// eventsTestConfig is the events cluster's configuration on the host at
// ip, laid out as docs/operations.md ("Several clusters on one host")
// says: the main cluster's member list and certificates, and ports,
// directories and a name of its own. dataDir and clientPort may be set
// to another instance's, for the refusals.
func eventsTestConfig(ip, name, dataDir string, clientPort int) string {
	return strings.NewReplacer(
		"name: etcd-main\n", "name: "+name+"\n",
		"  dataDir: "+dataDir+"\n", "  dataDir: "+dataDir+"\n  clientPort: "+strconv.Itoa(clientPort)+"\n  peerPort: 2384\n  listenMetricsURL: http://127.0.0.1:2386\n",
		"agent:\n", "agent:\n  stateDir: /var/lib/etcdlet/"+strings.TrimPrefix(name, "etcd-")+"/agent\n  listen: 127.0.0.1:9480\n  peerPort: 2385\n",
	).Replace(unitTestConfig(ip, dataDir))
}

// Two etcd clusters on the same three Debian hosts under systemd, as
// Gardener runs etcd-main and etcd-events: etcdlet.service for the main
// cluster and etcdlet@events.service for the events cluster, both from
// the package. Each cluster forms through its own bootstrap; a file that
// shares a port and the data dir of the running events cluster is
// refused by validate (both ways) and cannot start its agent, while the
// events agent restarts beside it; the events cluster losing its quorum
// leaves the main one healthy; the kubelet starts only after both agents
// said READY=1; the journal names each line's cluster; removing the
// package stops and disables both.
func TestInstancesOnSystemdHosts(t *testing.T) {
	t.Parallel()
	addr := func(n int) string { return unitHostAddr(n + 20) }
	hosts, begin := bootUnitHosts(t, "inst", 3, addr, func(h *sdHost) {
		if h.n == 1 {
			h.write("/etc/systemd/system/kubelet.service", "[Unit]\nDescription=kubelet stand-in\n[Service]\nExecStart=/bin/sleep infinity\n", 0o644)
		}
	}, func(h *sdHost) {
		h.write(packagedConfig, unitTestConfig(h.ip, ""), 0o600)
		h.write("/etc/etcdlet/events.yaml", eventsTestConfig(h.ip, "etcd-events", "/var/lib/etcdlet/events/etcd", 2383), 0o600)
	})
	h1, h2, h3 := hosts[0], hosts[1], hosts[2]
	t.Cleanup(func() { // before bootUnitHosts' cleanup stops the main agents
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Go(func() { _, _ = h.exec("systemctl", "stop", eventsInstance.unit) })
		}
		wg.Wait()
	})
	setUnitHostsList(t, hosts, 21, 22, 23)
	forUnitHosts(t, len(hosts), func(n int) {
		h := hosts[n-1]
		for _, argv := range [][]string{{"etcdlet", "validate"}, {"etcdlet", "validate", "--instance", "events"},
			{"systemctl", "enable", "--now", "etcdlet.service", "etcdlet@events.service"}} {
			if out, err := h.exec(argv...); err != nil {
				t.Errorf("host %d: %s: %v\n%s\n%s", h.n, strings.Join(argv, " "), err, out, h.journal())
			}
		}
	})
	for _, approve := range [][]string{{"etcdlet", "bootstrap", "--approve"}, {"etcdlet", "bootstrap", "--approve", "--instance", "events"}} {
		if out := h1.must(approve...); !strings.Contains(out, "approved: this node founds a new one-member cluster") {
			t.Fatalf("%s on host 1 says:\n%s", strings.Join(approve, " "), out)
		}
	}
	for _, instance := range []unitInstance{mainInstance, eventsInstance} {
		h1.waitInstanceVoters(t, instance, instance.cluster+" forms on the three hosts", hosts, h1.ip, h2.ip, h3.ip)
	}
	t.Logf("both clusters formed after %s", time.Since(begin).Round(time.Second))
	if j := h2.unitJournal(eventsInstance.unit); !strings.Contains(j, "cluster=etcd-events") || strings.Contains(j, "cluster=etcd-main") {
		t.Errorf("host 2: the events agent's journal does not name its cluster on its lines:\n%s", lastLines(j, 20))
	}

	checkInstanceRefusals(t, h1, hosts)

	// The events cluster loses its quorum: the main cluster does not notice.
	for _, h := range []*sdHost{h2, h3} {
		h.must("systemctl", "stop", eventsInstance.unit)
	}
	waitOnUnitHosts(t, time.Minute, "host 1's events agent sees its cluster without quorum", hosts, func() error {
		if out, _ := h1.exec("etcdlet", "status", "--instance", "events"); !strings.Contains(out, "cluster: no quorum") {
			return errorf("etcdlet status --instance events on host 1:\n%s", out)
		}
		return nil
	})
	h1.waitVoters(t, "the main cluster stays whole while the events cluster has no quorum", hosts, h1.ip, h2.ip, h3.ip)
	for _, h := range hosts {
		if s := h.show(mainInstance.unit, "ActiveState", "NRestarts"); s["ActiveState"] != "active" || s["NRestarts"] != "0" {
			t.Errorf("host %d: with the events cluster down etcdlet.service is %v, want active, never restarted", h.n, s)
		}
	}
	for _, h := range []*sdHost{h2, h3} {
		h.must("systemctl", "start", eventsInstance.unit)
	}
	h1.waitInstanceVoters(t, eventsInstance, "the events cluster is back", hosts, h1.ip, h2.ip, h3.ip)

	// The kubelet starts every enabled agent (etcdlet.target), stopped by
	// hand here, and waits for each one's READY=1.
	before := map[string]string{}
	for _, unit := range []string{mainInstance.unit, eventsInstance.unit} {
		before[unit] = h1.show(unit, "MainPID")["MainPID"]
	}
	h1.must("systemctl", "stop", "kubelet.service", mainInstance.unit, eventsInstance.unit)
	h1.startKubelet(t, time.Minute)
	kubelet := h1.lastMessage(t, "kubelet.service", unitMsgStarted)
	for _, unit := range []string{mainInstance.unit, eventsInstance.unit} {
		s := h1.show(unit, "ActiveState", "MainPID")
		if s["ActiveState"] != "active" || s["MainPID"] == before[unit] {
			t.Errorf("host 1: after the kubelet's start %s is %v (MainPID %s before the stop): the kubelet did not start it", unit, s, before[unit])
		}
		if started := h1.lastMessage(t, unit, unitMsgStarted); kubelet.seq < started.seq {
			t.Errorf("host 1: the kubelet started (%+v) before %s said READY=1 (%+v)", kubelet, unit, started)
		}
	}
	for _, instance := range []unitInstance{mainInstance, eventsInstance} {
		h1.waitInstanceVoters(t, instance, "host 1's "+instance.cluster+" member is back after the kubelet's start", hosts, h1.ip, h2.ip, h3.ip)
	}

	// Removing the package stops both agents and disables both units.
	h3.must("dpkg", "-r", "etcdlet")
	for _, unit := range []string{mainInstance.unit, eventsInstance.unit} {
		if s := h3.show(unit, "ActiveState"); s["ActiveState"] != "inactive" {
			t.Errorf("host 3: after dpkg -r %s is %v, want inactive", unit, s)
		}
	}
	if links, _ := h3.exec("find", "/etc/systemd/system", "-name", "etcdlet*"); strings.TrimSpace(links) != "" {
		t.Errorf("host 3: after dpkg -r links to etcdlet's units remain:\n%s", links)
	}
	t.Logf("the test took %s after the package build", time.Since(begin).Round(time.Second))
}

// checkInstanceRefusals: on host 1, a third configuration that takes the
// events cluster's client port and data dir (another cluster's name, its
// own state dir) is refused by etcdlet validate, which also refuses the
// events file beside it; its agent refuses to start beside the running
// events agent, which keeps its cluster; and the events agent, restarted
// beside the broken file, starts.
func checkInstanceRefusals(t *testing.T, h *sdHost, hosts []*sdHost) {
	t.Helper()
	const bad = "/etc/etcdlet/audit.yaml"
	h.write(bad, eventsTestConfig(h.ip, "etcd-audit", "/var/lib/etcdlet/events/etcd", 2383), 0o600)
	out, err := h.exec("etcdlet", "validate", "--config", bad)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 ||
		!strings.Contains(out, `etcd.clientPort: 2383: the etcd client listener (etcd.clientPort) of /etc/etcdlet/events.yaml uses port 2383 too`) ||
		!strings.Contains(out, `etcd.dataDir: "/var/lib/etcdlet/events/etcd": overlaps etcd.dataDir (/var/lib/etcdlet/events/etcd) of /etc/etcdlet/events.yaml`) {
		t.Errorf("host %d: etcdlet validate of a file sharing the events cluster's port and data dir: %v\n%s", h.n, err, out)
	}
	if out, err := h.exec("etcdlet", "validate", "--instance", "events"); !errors.As(err, &exit) || !strings.Contains(out, bad) {
		t.Errorf("host %d: etcdlet validate --instance events beside %s: %v\n%s", h.n, bad, err, out)
	}
	// Restart=on-failure: the unit keeps trying, and keeps refusing.
	h.must("systemctl", "start", "--no-block", "etcdlet@audit.service")
	waitOnUnitHosts(t, time.Minute, "the agent sharing the events cluster's data dir refuses to start", hosts, func() error {
		if j := h.unitJournal("etcdlet@audit.service"); !strings.Contains(j, "shares with an etcdlet instance that runs on this host") {
			return errorf("etcdlet@audit's journal:\n%s", lastLines(j, 20))
		}
		return nil
	})
	h.must("systemctl", "stop", "etcdlet@audit.service")
	if moved, _ := filepath.Glob(h.file("/var/lib/etcdlet/events/etcd.etcdlet-moved-*")); len(moved) > 0 || !h.exists("/var/lib/etcdlet/events/etcd/member/wal") {
		t.Errorf("host %d: the events cluster's data dir was touched", h.n)
	}
	// A broken file that does not run stops nobody.
	h.must("systemctl", "restart", eventsInstance.unit)
	h.waitInstanceVoters(t, eventsInstance, "the events agent restarts beside the broken file", hosts, hosts[0].ip, hosts[1].ip, hosts[2].ip)
	h.must("rm", bad)
}
