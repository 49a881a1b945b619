package test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/test/harness"
)

// Two hosts, each a network namespace with its own address on a bridge,
// and neither agent told its address: each detects the one listed address
// assigned to its host (through netlink) and the two form a cluster. A
// third host, prepared but not listed and not told its address either,
// cannot tell its member: its etcdlet status says so, and shows the
// cluster as it is rather than blaming it.
func TestNodeAddressDetectedInNetworkNamespaces(t *testing.T) {
	t.Parallel()
	addr := func(n int) string { return fmt.Sprintf("192.0.2.%d", 10+n) }
	ns := harness.BridgedHosts(t, "v4", 3, func(n int) string { return addr(n) + "/24" })

	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{
		Addr:          addr,
		DetectAddress: true,
		Ports:         &harness.Ports{Client: 2379, Peer: 2380, Metrics: 2381, Agent: 9479, AgentPeer: 2382},
		Wrap: func(n int, argv []string) []string {
			return append([]string{"ip", "netns", "exec", ns(n)}, argv...)
		},
	})
	c.WriteMembers(1, 2)
	c.Start(1)
	c.Start(2)

	waitStatusInNetns(t, ns(1), c, 1, "the two agents form a cluster on their detected addresses", addr(1), addr(2))
	for _, n := range []int{1, 2} {
		if c.Agent(n).CountLog("detected node address", map[string]string{"address": addr(n)}) != 1 {
			t.Errorf("agent %d did not log detecting %s", n, addr(n))
		}
	}

	c.WriteConfig(3)
	status := exec.Command("ip", "netns", "exec", ns(3), binary, "status", "--config", c.ConfigPath(3))
	out, err := status.CombinedOutput()
	if err != nil || strings.Contains(string(out), "unreachable") ||
		!strings.Contains(string(out), "this node (address unknown): unknown-node: cannot tell which member is this node") ||
		!strings.Contains(string(out), "set node.address") {
		t.Errorf("etcdlet status on the unlisted host without node.address: %v, want exit 0 naming this node's problem, not the cluster's:\n%s", err, out)
	}
	// validate warns on that host, and only there.
	for n, warns := range map[int]bool{1: false, 3: true} {
		out, err := exec.Command("ip", "netns", "exec", ns(n), binary, "validate", "--config", c.ConfigPath(n)).CombinedOutput()
		if err != nil || strings.Contains(string(out), "WARNING: node.address is empty and none of the listed addresses") != warns {
			t.Errorf("etcdlet validate on host %d: %v, want exit 0 and a node.address warning %v:\n%s", n, err, warns, out)
		}
	}
}

// An IPv6 cluster, end to end: four hosts, each a network namespace with
// its own IPv6 address on a shared bridge (the host's addresses stay
// untouched), bootstrap three members, add a fourth, remove one. Every URL
// etcdlet builds and every listener it opens must bracket the addresses.
func TestIPv6Membership(t *testing.T) {
	t.Parallel()
	addr := func(n int) string { return fmt.Sprintf("fd00:e7cd:1::%x", 0xa0+n) }
	ns := harness.BridgedHosts(t, "v6", 4, func(n int) string { return addr(n) + "/64" })
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{
		Addr:  addr,
		Ports: &harness.Ports{Client: 2379, Peer: 2380, Metrics: 2381, Agent: 9479, AgentPeer: 2382},
		Wrap: func(n int, argv []string) []string {
			return append([]string{"ip", "netns", "exec", ns(n)}, argv...)
		},
	})
	c.WriteMembers(1, 2, 3)
	for n := 1; n <= 3; n++ {
		c.Start(n)
	}
	waitStatusInNetns(t, ns(1), c, 1, "three IPv6 members bootstrap", addr(1), addr(2), addr(3))

	c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	waitStatusInNetns(t, ns(1), c, 1, "the fourth IPv6 member joins and votes", addr(1), addr(2), addr(3), addr(4))

	c.WriteMembers(1, 3, 4)
	waitStatusInNetns(t, ns(3), c, 3, "the removed IPv6 member leaves", addr(1), addr(3), addr(4))
	harness.Eventually(t, 30*time.Second, "the removed member's data moved aside", func() error {
		if len(movedAside(t, c, 2)) == 0 {
			return errorf("not moved aside yet")
		}
		return nil
	})
	requireKeptData(t, movedAside(t, c, 2))
}

// waitStatusInNetns waits until `etcdlet status` of agent n, run inside
// the namespace (the host cannot reach its addresses), reports a converged
// cluster of exactly the given IPs, all healthy voters or leader.
func waitStatusInNetns(t *testing.T, ns string, c *harness.Cluster, n int, what string, ips ...string) {
	t.Helper()
	harness.Eventually(t, convergeTimeout, what, func() error {
		out, err := exec.Command("ip", "netns", "exec", ns, binary, "status", "--config", c.ConfigPath(n), "-o", "json").Output()
		if err != nil {
			return fmt.Errorf("status: %v", err)
		}
		var report statusreport.Report
		if err := json.Unmarshal(out, &report); err != nil {
			return err
		}
		if !report.Converged || len(report.Members) != len(ips) {
			return fmt.Errorf("not converged: %s", out)
		}
		for _, m := range report.Members {
			if !slices.Contains(ips, m.IP) || m.InList != "yes" || m.Health != "healthy" ||
				(m.Role != "voter" && m.Role != "leader") || m.Name != "etcd-main-"+m.IP {
				return fmt.Errorf("member %+v is not a healthy listed voter of %v", m, ips)
			}
		}
		return nil
	})
}

func run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}
