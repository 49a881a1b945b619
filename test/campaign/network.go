package campaign

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
)

// network cuts and heals traffic between the hosts with nftables rules
// inside their namespaces: each host has a table of its own (inet
// campaign) whose input and output chains drop what a fault says. The
// kernel here has no netem; loss is nftables' random drop. Rules are
// gathered per host and applied in one nft run per host (apply), and a
// heal flushes only the hosts that have rules.
type network struct {
	ns      func(host int) string
	addr    func(host int) string
	pending map[int][]string // host -> rules not applied yet
	dirty   map[int]bool     // hosts with rules in force
}

const table = "campaign"

func newNetwork(ns, addr func(int) string) *network {
	return &network{ns: ns, addr: addr, pending: map[int][]string{}, dirty: map[int]bool{}}
}

// nft runs an nft script in host's namespace, without a shell.
func (n *network) nft(host int, script string) error {
	cmd := exec.Command("ip", "netns", "exec", n.ns(host), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s\nscript:\n%s", n.ns(host), err, out, script)
	}
	return nil
}

// setUp gives host its table with empty input and output chains.
func (n *network) setUp(host int) error {
	return n.nft(host, fmt.Sprintf(`table inet %[1]s {
	chain input { type filter hook input priority 0; }
	chain output { type filter hook output priority 0; }
}
`, table))
}

func (n *network) rule(host int, hook, rule string) {
	n.pending[host] = append(n.pending[host], fmt.Sprintf("add rule inet %s %s %s", table, hook, rule))
}

// dropFrom makes host drop every packet from peer, dropTo every packet
// to it.
func (n *network) dropFrom(host, peer int) { n.rule(host, "input", "ip saddr "+n.addr(peer)+" drop") }
func (n *network) dropTo(host, peer int)   { n.rule(host, "output", "ip daddr "+n.addr(peer)+" drop") }

// cut drops all traffic between a and b, both ways, on both sides.
func (n *network) cut(a, b int) {
	n.dropTo(a, b)
	n.dropFrom(a, b)
	n.dropTo(b, a)
	n.dropFrom(b, a)
}

// lose drops percent of host's packets, in and out (loopback spared).
func (n *network) lose(host, percent int) {
	n.rule(host, "input", fmt.Sprintf(`iifname != "lo" numgen random mod 100 < %d drop`, percent))
	n.rule(host, "output", fmt.Sprintf(`oifname != "lo" numgen random mod 100 < %d drop`, percent))
}

// apply puts the gathered rules in force.
func (n *network) apply() error {
	for _, host := range slices.Sorted(maps.Keys(n.pending)) {
		if err := n.nft(host, strings.Join(n.pending[host], "\n")+"\n"); err != nil {
			return err
		}
		n.dirty[host] = true
	}
	clear(n.pending)
	return nil
}

// heal flushes every host's rules.
func (n *network) heal() error {
	clear(n.pending)
	for _, host := range slices.Sorted(maps.Keys(n.dirty)) {
		if err := n.nft(host, fmt.Sprintf("flush table inet %s\n", table)); err != nil {
			return err
		}
	}
	clear(n.dirty)
	return nil
}

// rules are host's rules in force (the delay proxy's redirect among
// them), for the kept logs of a violation.
func (n *network) rules(host int) string {
	out, err := exec.Command("ip", "netns", "exec", n.ns(host), "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(nft list: %v) %s", err, out)
	}
	return string(out)
}
