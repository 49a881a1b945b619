package test

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// docs/operations.md's "Install with the list kept in the cluster", as
// written, on three Debian hosts under systemd with the package installed
// and etcdlet run as its unit (TLS from `etcdlet certs issue`): the first
// host founds the cluster with `etcdlet bootstrap --approve`, the others
// carry only members.seeds, and `etcdlet members add` on a host that is
// not a member yet adds them one at a time ("Add a node"); then `etcdlet
// members remove` takes one out ("Remove a node") and its data goes aside.
// Every host keeps the same list, in a copy only root can read.
func TestClusterListOnSystemdHosts(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test boots Debian hosts with systemd-nspawn and needs root: run `sudo make test`")
	}
	requireTools(t, map[string]string{"systemd-nspawn": "systemd-container", "nsenter": "util-linux", "tar": "tar", "ip": "iproute2"})
	tarball := debianRoot(t)
	deb := sharedPackages(t).deb(runtime.GOARCH)
	begin := time.Now()
	ca, err := harness.GenerateTLS(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(n int) string { return unitHostAddr(n + 10) }
	ns := harness.BridgedHosts(t, "clist", 3, func(n int) string { return addr(n) + "/24" })
	hosts := make([]*sdHost, 3)
	forUnitHosts(t, len(hosts), func(n int) {
		h := &sdHost{nspawnHost: newNspawnHost(t, tarball), n: n, ip: addr(n)}
		copyFile(t, deb, h.file("/root/etcdlet.deb"))
		h.write("/etc/kubernetes/pki/etcd/ca.crt", readLocal(t, ca.CA), 0o644)
		h.write("/etc/kubernetes/pki/etcd/ca.key", readLocal(t, ca.CAKey), 0o600)
		h.boot(ns(n))
		h.must("dpkg", "-i", "/root/etcdlet.deb")
		h.must("etcdlet", "certs", "issue", "--address", h.ip)
		members := "members:\n  source: cluster\n"
		if n > 1 {
			members += "  seeds: [" + addr(1) + "]\n"
		}
		h.write(packagedConfig, unitTestConfigWith(h.ip, "", members), 0o600)
		h.must("etcdlet", "validate")
		h.must("systemctl", "enable", "--now", "etcdlet.service")
		hosts[n-1] = h
	})
	h1, h2, h3 := hosts[0], hosts[1], hosts[2]
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Go(func() { _, _ = h.exec("systemctl", "stop", "etcdlet.service") })
		}
		wg.Wait()
	})
	t.Logf("3 hosts booted, etcdlet installed and started in %s", time.Since(begin).Round(time.Second))

	if out := h1.must("etcdlet", "bootstrap", "--approve"); !strings.Contains(out, "approved: this node founds a new one-member cluster") {
		t.Fatalf("etcdlet bootstrap --approve on host 1 says:\n%s", out)
	}
	h1.waitVoters(t, "host 1 founds the cluster", hosts, h1.ip)
	// As the docs add them: on any host (here host 3, not a member yet),
	// each once the previous one votes.
	waitOnUnitHosts(t, time.Minute, "host 3 reads the founder's list through its seed", hosts, func() error {
		if out, err := h3.exec("etcdlet", "members", "show"); err != nil || !strings.Contains(out, "\n  "+h1.ip+"\n") {
			return errorf("etcdlet members show: %v\n%s", err, out)
		}
		return nil
	})
	h3.must("etcdlet", "members", "add", h2.ip)
	h3.must("etcdlet", "status", "--wait", "5m")
	h3.must("etcdlet", "members", "add", h3.ip)
	h1.waitVoters(t, "hosts 2 and 3 join", hosts, h1.ip, h2.ip, h3.ip)
	t.Logf("cluster of three after %s", time.Since(begin).Round(time.Second))

	h2.must("etcdlet", "members", "remove", h3.ip)
	h1.waitVoters(t, "host 3's member is removed", hosts, h1.ip, h2.ip)
	h3.waitMovedAside(t, "/var/lib/etcdlet/etcd.etcdlet-moved-*")
	waitOnUnitHosts(t, time.Minute, "every host keeps the stored list", hosts, func() error {
		for _, h := range hosts {
			got, err := h.exec("stat", "-c", "%a %U", "/var/lib/etcdlet/agent/cluster-members")
			if err != nil || strings.TrimSpace(got) != "600 root" {
				return errorf("host %d: the copy: %v %s", h.n, err, got)
			}
			if out, _ := h.exec("etcdlet", "status"); !strings.Contains(out, "this node's copy holds it") {
				return errorf("host %d: etcdlet status:\n%s", h.n, out)
			}
			if list, _ := h.exec("grep", "-v", "^#", "/var/lib/etcdlet/agent/cluster-members"); list != h1.ip+"\n"+h2.ip+"\n" {
				return errorf("host %d keeps %q", h.n, list)
			}
		}
		return nil
	})
	t.Logf("the test took %s after the package build", time.Since(begin).Round(time.Second))
}
