package pacemakercluster

import (
	"net/netip"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
)

// LocalNode finds this host among pacemaker's nodes: the node whose
// Addresses contain nodeIP, else the node named like hostname, else the
// node named like hostname's short form (before the first dot); "" when
// none matches. Addresses come first because pacemaker node names need not
// be host names, while the agent knows its node IP for certain. Names
// compare case-insensitively, as host names do.
func LocalNode(c *model.Cluster, nodeIP netip.Addr, hostname string) string {
	if c == nil {
		return ""
	}
	if nodeIP.IsValid() {
		ip := nodeIP.Unmap()
		for _, n := range c.Nodes {
			for _, a := range n.Addresses {
				if a.Unmap() == ip {
					return n.Name
				}
			}
		}
	}
	short, _, _ := strings.Cut(hostname, ".")
	for _, name := range []string{hostname, short} {
		if name == "" {
			continue
		}
		for _, n := range c.Nodes {
			if strings.EqualFold(n.Name, name) {
				return n.Name
			}
		}
	}
	return ""
}

// IsDC reports whether node is pacemaker's DC in c. Without a known DC
// (none elected, or crm_mon did not say) no node is, and no agent writes
// by rule 1 of the package doc.
func IsDC(c *model.Cluster, node string) bool {
	return c != nil && node != "" && c.DCPresent.IsTrue() && c.DCName == node
}
