package test

import (
	"strings"
	"testing"
	"time"
)

// docs/operations.md's "Install with the list kept in the cluster", as
// written, on three Debian hosts under systemd with the package installed
// and etcdlet run as its unit (TLS from `etcdlet certs issue`): the first
// host founds the cluster with `etcdlet bootstrap --approve`, the others
// carry only members.seeds, and `etcdlet members add` on a host that is
// not a member yet adds them one at a time ("Add a node"); `etcdlet
// members set` puts a fourth host in the place of one ("Replace a node":
// the new member votes before the old one leaves, whose data goes aside),
// and `etcdlet members remove` takes one out ("Remove a node"). Every
// host keeps the same list, in a copy only root can read.
func TestClusterListOnSystemdHosts(t *testing.T) {
	t.Parallel()
	addr := func(n int) string { return unitHostAddr(n + 10) }
	hosts, begin := bootUnitHosts(t, "clist", 4, addr, func(*sdHost) {}, func(h *sdHost) {
		members := "members:\n  source: cluster\n"
		if h.n > 1 {
			members += "  seeds: [" + addr(1) + "]\n"
		}
		h.write(packagedConfig, unitTestConfigWith(h.ip, "", members), 0o600)
		h.must("etcdlet", "validate")
		h.must("systemctl", "enable", "--now", "etcdlet.service")
	})
	h1, h2, h3, h4 := hosts[0], hosts[1], hosts[2], hosts[3]

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

	h4.must("etcdlet", "members", "set", h1.ip, h2.ip, h4.ip)
	h1.waitVoters(t, "host 4 replaces host 3", hosts, h1.ip, h2.ip, h4.ip)
	h3.waitMovedAside(t, "/var/lib/etcdlet/etcd.etcdlet-moved-*")
	if j := h4.unitJournal("etcdlet.service"); !strings.Contains(j, "decision=join") {
		t.Errorf("host 4 did not join as a learner:\n%s", lastLines(j, 40))
	}
	h2.must("etcdlet", "members", "remove", h2.ip)
	h1.waitVoters(t, "host 2's member is removed", hosts, h1.ip, h4.ip)
	h2.waitMovedAside(t, "/var/lib/etcdlet/etcd.etcdlet-moved-*")
	waitOnUnitHosts(t, time.Minute, "every host keeps the stored list", hosts, func() error {
		for _, h := range hosts {
			got, err := h.exec("stat", "-c", "%a %U", "/var/lib/etcdlet/agent/cluster-members")
			if err != nil || strings.TrimSpace(got) != "600 root" {
				return errorf("host %d: the copy: %v %s", h.n, err, got)
			}
			if out, _ := h.exec("etcdlet", "status"); !strings.Contains(out, "this node's copy holds it") {
				return errorf("host %d: etcdlet status:\n%s", h.n, out)
			}
			if list, _ := h.exec("grep", "-v", "^#", "/var/lib/etcdlet/agent/cluster-members"); list != h1.ip+"\n"+h4.ip+"\n" {
				return errorf("host %d keeps %q", h.n, list)
			}
		}
		return nil
	})
	t.Logf("the test took %s after the package build", time.Since(begin).Round(time.Second))
}
