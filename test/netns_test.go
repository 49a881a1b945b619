package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/test/harness"
)

// Two hosts, each a network namespace with its own address on a veth pair,
// and neither agent told its address: each detects the one listed address
// assigned to its host (through netlink) and the two form a cluster.
func TestNodeAddressDetectedInNetworkNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates network namespaces and needs root: run `sudo make test`")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("this test needs iproute2's `ip`: apt-get install -y iproute2")
	}
	ns := func(n int) string { return fmt.Sprintf("etcdlet-e2e-%d-%d", os.Getpid(), n) }
	addr := func(n int) string { return fmt.Sprintf("192.0.2.%d", 10+n) }
	for _, n := range []int{1, 2} {
		run(t, "ip", "netns", "add", ns(n))
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns(n)).Run() })
	}
	run(t, "ip", "link", "add", "veth-etcdlet-1", "netns", ns(1), "type", "veth", "peer", "name", "veth-etcdlet-2", "netns", ns(2))
	for _, n := range []int{1, 2} {
		run(t, "ip", "-n", ns(n), "link", "set", "lo", "up")
		run(t, "ip", "-n", ns(n), "addr", "add", addr(n)+"/24", "dev", fmt.Sprintf("veth-etcdlet-%d", n))
		run(t, "ip", "-n", ns(n), "link", "set", fmt.Sprintf("veth-etcdlet-%d", n), "up")
	}

	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{
		Addr:          addr,
		DetectAddress: true,
		Ports:         &harness.Ports{Client: 2379, Peer: 2380, Metrics: 2381, Agent: 9479},
		Wrap: func(n int, argv []string) []string {
			return append([]string{"ip", "netns", "exec", ns(n)}, argv...)
		},
	})
	c.WriteMembers(1, 2)
	c.Start(1)
	c.Start(2)

	harness.Eventually(t, convergeTimeout, "the two agents form a cluster on their detected addresses", func() error {
		out, err := exec.Command("ip", "netns", "exec", ns(1), binary, "status", "--config", c.ConfigPath(1), "-o", "json").Output()
		if err != nil {
			return fmt.Errorf("status: %v", err)
		}
		var report struct {
			Converged bool
			Members   []struct{ Name, IP, Role, Health, InList string }
		}
		if err := json.Unmarshal(out, &report); err != nil {
			return err
		}
		if !report.Converged || len(report.Members) != 2 {
			return fmt.Errorf("not converged: %s", out)
		}
		return nil
	})
	for _, n := range []int{1, 2} {
		if c.Agent(n).CountLog("detected node address", map[string]string{"address": addr(n)}) != 1 {
			t.Errorf("agent %d did not log detecting %s", n, addr(n))
		}
	}
}

func run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}
