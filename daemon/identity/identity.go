// Package identity owns etcdlet's naming contract, shared with
// etcd-druid's externally managed members: member name "<cluster>-<ip>",
// peer URL "<scheme>://<ip>:<peerPort>", client URL
// "<scheme>://<ip>:<clientPort>", with IPv6 literals bracketed. Every other
// package builds names and URLs through here, so the formats live in one
// place with golden tests.
package identity

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/etcdlet/etcdlet/config"
)

// Member is the identity of one member derived from its IP.
type Member struct {
	IP        netip.Addr
	Name      string
	PeerURL   string
	ClientURL string
}

// Scheme carries what identities depend on besides the IP.
type Scheme struct {
	Cluster      string
	PeerScheme   string
	ClientScheme string
	PeerPort     int
	ClientPort   int
}

// SchemeFrom extracts the naming inputs from a configuration.
func SchemeFrom(cfg *config.Config) Scheme {
	return Scheme{
		Cluster:      cfg.Cluster.Name,
		PeerScheme:   cfg.Etcd.PeerScheme(),
		ClientScheme: cfg.Etcd.ClientScheme(),
		PeerPort:     cfg.Etcd.PeerPort,
		ClientPort:   cfg.Etcd.ClientPort,
	}
}

// For returns the identity of the member with the given IP.
func (s Scheme) For(ip netip.Addr) Member {
	return Member{
		IP:        ip,
		Name:      MemberName(s.Cluster, ip),
		PeerURL:   URL(s.PeerScheme, ip, s.PeerPort),
		ClientURL: URL(s.ClientScheme, ip, s.ClientPort),
	}
}

// ForAll returns identities in list order.
func (s Scheme) ForAll(ips []netip.Addr) []Member {
	members := make([]Member, len(ips))
	for i, ip := range ips {
		members[i] = s.For(ip)
	}
	return members
}

// MemberName is "<cluster>-<ip>", e.g. etcd-main-192.0.2.1 or
// etcd-main-2001:db8::1 (etcd accepts any string as a member name).
func MemberName(cluster string, ip netip.Addr) string {
	return cluster + "-" + ip.String()
}

// URL builds "<scheme>://<ip>:<port>" with net.JoinHostPort, which brackets
// IPv6 literals: http://[2001:db8::1]:2380.
func URL(scheme string, ip netip.Addr, port int) string {
	return scheme + "://" + net.JoinHostPort(ip.String(), strconv.Itoa(port))
}

// IPFromURL extracts the IP host of a member URL; ok is false for URLs
// whose host is not an IP literal (members etcdlet did not create).
func IPFromURL(raw string) (netip.Addr, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return netip.Addr{}, false
	}
	return ip, true
}

// InitialCluster renders etcd's --initial-cluster value,
// "name1=peerURL1,name2=peerURL2", in the given order.
func InitialCluster(members []Member) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = m.Name + "=" + m.PeerURL
	}
	return strings.Join(parts, ",")
}

// AddrStrings returns the addresses' text forms, in the same order.
func AddrStrings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}

// ParseAddrs parses text forms back into addresses, leaving out any that
// do not parse (lists read from the state dir or another agent).
func ParseAddrs(list []string) []netip.Addr {
	var addrs []netip.Addr
	for _, s := range list {
		if ip, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, ip)
		}
	}
	return addrs
}

// IPs are the members' IPs, in order.
func IPs(members []Member) []string {
	ips := make([]string, len(members))
	for i, m := range members {
		ips[i] = m.IP.String()
	}
	return ips
}
