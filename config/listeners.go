package config

import (
	"net"
	"net/netip"
	"strconv"
)

// listener is one TCP listener opened on this host: etcd's client, peer
// and metrics listeners (the same for both runtimes) and the agent's own.
type listener struct {
	field string // the config field that sets it
	value any    // that field's value, as reported
	name  string // "the etcd client listener"
	// addrs are the addresses it binds; the zero Addr stands for the
	// member IP when the file does not tell it (detected at start).
	addrs []netip.Addr
	port  int
}

// checkListeners reports a metrics or agent listener that would bind the
// same port as an earlier listener on an overlapping address: the second
// bind fails at start, so the agent or etcd would crash-loop. The client
// and peer listeners use the member IP and ports that must differ (a rule
// of their own), so they never overlap each other.
func (c *Config) checkListeners(errs *Errors) {
	ls := c.listeners()
	for i, l := range ls {
		if l.field == "etcd.clientPort" || l.field == "etcd.peerPort" {
			continue
		}
	next:
		for _, earlier := range ls[:i] {
			if earlier.port != l.port {
				continue
			}
			for _, a := range l.addrs {
				for _, b := range earlier.addrs {
					if overlaps(a, b) {
						errs.add(l.field, l.value, "must not overlap %s %s: no two listeners may use the same port on the same address or a wildcard one",
							earlier.name, endpoint(b, earlier.port))
						break next
					}
				}
			}
		}
	}
}

// listeners returns the listeners a valid port or URL describes, in the
// order client, peer, metrics, agent peer endpoint, agent. They model what the runtimes open:
// etcd listens for clients on the member IP and, unless it is a loopback
// address, on the loopback address of its family; for peers on the member
// IP; for metrics where etcd.listenMetricsURL says.
func (c *Config) listeners() []listener {
	var ls []listener
	members := c.memberAddrs()
	if validPort(c.Etcd.ClientPort) {
		var addrs []netip.Addr
		for _, m := range members {
			if !m.IsValid() { // not known: assume it is not a loopback address
				addrs = append(addrs, m, netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback())
				continue
			}
			addrs = append(addrs, ClientListenAddrs(m)...)
		}
		ls = append(ls, listener{"etcd.clientPort", c.Etcd.ClientPort, "the etcd client listener", addrs, c.Etcd.ClientPort})
	}
	if validPort(c.Etcd.PeerPort) {
		ls = append(ls, listener{"etcd.peerPort", c.Etcd.PeerPort, "the etcd peer listener", members, c.Etcd.PeerPort})
	}
	var reported Errors // validateEtcd reports them
	if u := checkListenURL(&reported, "etcd.listenMetricsURL", c.Etcd.ListenMetricsURL); u != nil {
		if addr, port, ok := hostPort(u.Hostname(), u.Port()); ok {
			ls = append(ls, listener{"etcd.listenMetricsURL", c.Etcd.ListenMetricsURL, "the etcd metrics listener", []netip.Addr{addr}, port})
		}
	}
	if validPort(c.Agent.PeerPort) {
		ls = append(ls, listener{"agent.peerPort", c.Agent.PeerPort, "the agent peer endpoint", members, c.Agent.PeerPort})
	}
	if host, portText, err := net.SplitHostPort(c.Agent.Listen); err == nil {
		// Port 0 asks for a free port, which never overlaps.
		if addr, port, ok := hostPort(host, portText); ok && port != 0 {
			ls = append(ls, listener{"agent.listen", c.Agent.Listen, "the agent listener", []netip.Addr{addr}, port})
		}
	}
	return ls
}

// memberAddrs are the addresses the member IP may be: node.address, else
// any address of the static list (one configuration file usually serves
// every listed node), else the zero Addr for "not known".
func (c *Config) memberAddrs() []netip.Addr {
	if addr, err := netip.ParseAddr(c.Node.Address); err == nil {
		return []netip.Addr{addr.Unmap()}
	}
	var addrs []netip.Addr
	if c.Members.Source == SourceStatic {
		for _, text := range c.Members.Addresses {
			if addr, err := netip.ParseAddr(text); err == nil {
				addrs = append(addrs, addr.Unmap())
			}
		}
	}
	if len(addrs) == 0 {
		return []netip.Addr{{}}
	}
	return addrs
}

func hostPort(host, port string) (netip.Addr, int, bool) {
	addr, ok := listenHost(host)
	p, err := strconv.Atoi(port)
	return addr, p, ok && err == nil && p >= 0 && p <= 65535
}

func validPort(port int) bool { return port >= 1 && port <= 65535 }

// overlaps reports whether listeners on a and b bind a common address
// (the zero Addr being the member IP, whose family is not known).
func overlaps(a, b netip.Addr) bool {
	return a == b || covers(a, b) || covers(b, a)
}

// covers reports whether w is a wildcard address that includes a: "::"
// includes every address (Go listens on both families), "0.0.0.0" every
// IPv4 address and the unknown member IP.
func covers(w, a netip.Addr) bool {
	switch {
	case !w.IsValid() || !w.IsUnspecified():
		return false
	case w.Is6():
		return true
	default:
		return !a.IsValid() || a.Is4()
	}
}

func endpoint(addr netip.Addr, port int) string {
	if !addr.IsValid() {
		return "<member IP>:" + strconv.Itoa(port)
	}
	return net.JoinHostPort(addr.String(), strconv.Itoa(port))
}

// ClientListenAddrs are the addresses etcd's client listener binds for a
// member IP: the IP and, unless it is itself a loopback address (the demo
// and the tests run several members on 127.0.0.x), the loopback address of
// its family, so local clients reach the member on localhost.
func ClientListenAddrs(member netip.Addr) []netip.Addr {
	switch {
	case member.IsLoopback():
		return []netip.Addr{member}
	case member.Is4():
		return []netip.Addr{member, netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	default:
		return []netip.Addr{member, netip.IPv6Loopback()}
	}
}
