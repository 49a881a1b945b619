// Package nodeaddr finds this host's member IP: the one listed address
// that is assigned to a local interface, read through netlink.
package nodeaddr

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// LocalAddresses lists the IPv4 and IPv6 addresses assigned to the
// interfaces that the netlink handle sees (nil: the current network
// namespace). An exact address match is what counts: 127.0.0.2 is routed
// locally through 127.0.0.0/8 but is not an address of this host.
func LocalAddresses(h *netlink.Handle) ([]netip.Addr, error) {
	if h == nil {
		var err error
		if h, err = netlink.NewHandle(); err != nil {
			return nil, fmt.Errorf("open netlink: %w", err)
		}
		defer h.Close()
	}
	list, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list local addresses: %w", err)
	}
	addrs := make([]netip.Addr, 0, len(list))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			addrs = append(addrs, ip.Unmap())
		}
	}
	return addrs, nil
}

// Pick returns the single candidate that is local. None or several is an
// error that names both sides, because guessing the wrong member IP would
// make this node act as another member.
func Pick(candidates, local []netip.Addr) (netip.Addr, error) {
	var found []netip.Addr
	for _, c := range candidates {
		if slices.Contains(local, c) && !slices.Contains(found, c) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return netip.Addr{}, fmt.Errorf("node.address is empty and none of the listed addresses %v is assigned to a local interface (local addresses: %v); set node.address", candidates, local)
	default:
		return netip.Addr{}, fmt.Errorf("node.address is empty and several listed addresses are assigned locally: %v; set node.address to the one this member uses", found)
	}
}

// Detect picks this host's member IP among candidates using the current
// network namespace.
func Detect(candidates []netip.Addr) (netip.Addr, error) {
	local, err := LocalAddresses(nil)
	if err != nil {
		return netip.Addr{}, err
	}
	return Pick(candidates, local)
}
