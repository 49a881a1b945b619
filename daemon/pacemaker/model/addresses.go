package model

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/corosync"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
)

// Address sources, in the order they are tried.
const (
	SourceCorosync  = "corosync nodelist"
	SourceNodeIPMap = "node_ip_map of the etcd resource"
	SourceNodeIP    = "node attribute node_ip"
)

// MaxAddresses is the API's limit of addresses per node.
const MaxAddresses = 8

// resolveAddresses finds a node's addresses: corosync's node list first
// (what the cluster itself talks on), then the etcd resource's node_ip_map
// (the podman-etcd convention), then the node_ip node attribute. The first
// source that yields a usable address wins; the problems of the sources
// tried before it are kept so that a missing address is explained, never
// papered over with a placeholder.
func resolveAddresses(in Input, node *crmmon.Node, etcd []*crmmon.Primitive, etcdMatcher Matcher) ([]netip.Addr, string, []string) {
	sources := []struct {
		name string
		read func() ([]string, string)
	}{
		{SourceCorosync, func() ([]string, string) { return corosyncAddrs(in, node) }},
		{SourceNodeIPMap, func() ([]string, string) { return nodeIPMapAddrs(in, node.Name, etcd, etcdMatcher) }},
		{SourceNodeIP, func() ([]string, string) { return nodeIPAttr(in, node.Name) }},
	}
	var problems []string
	for _, src := range sources {
		raw, problem := src.read()
		if problem != "" {
			problems = append(problems, src.name+": "+problem)
			continue
		}
		addrs, rejected := usable(raw)
		for _, r := range rejected {
			problems = append(problems, src.name+": "+r)
		}
		if len(raw) == 0 {
			problems = append(problems, src.name+": no address")
		}
		if len(addrs) > 0 {
			return addrs, src.name, problems
		}
	}
	return nil, "", problems
}

func corosyncAddrs(in Input, node *crmmon.Node) ([]string, string) {
	if in.CorosyncProblem != "" {
		return nil, in.CorosyncProblem
	}
	if in.Corosync == nil {
		return nil, "not read"
	}
	var byID *corosync.Node
	for i := range in.Corosync {
		n := &in.Corosync[i]
		if n.Name != "" && strings.EqualFold(n.Name, node.Name) {
			return n.Addrs, ""
		}
		// Pacemaker's id of a cluster member is its corosync nodeid.
		if n.ID != "" && n.ID == node.ID && byID == nil {
			byID = n
		}
	}
	if byID != nil {
		return byID.Addrs, ""
	}
	return nil, "no entry for this node"
}

// nodeIPMapAddrs reads node_ip_map ("n1:ip1;n2:ip2") from the CIB
// configuration of the etcd primitive.
func nodeIPMapAddrs(in Input, node string, etcd []*crmmon.Primitive, etcdMatcher Matcher) ([]string, string) {
	if in.CIB == nil {
		return nil, "CIB not available"
	}
	var value string
	for _, id := range uniqueIDs(etcd) {
		if v := in.CIB.Primitives[id].Params["node_ip_map"]; v != "" {
			value = v
			break
		}
	}
	if value == "" {
		// The etcd resource may be configured but absent from crm_mon's
		// view (e.g. an agent crm_mon could not resolve); look it up by
		// agent in the CIB as well.
		ids := slices.Sorted(maps.Keys(in.CIB.Primitives)) // deterministic choice
		for _, id := range ids {
			p := in.CIB.Primitives[id]
			agent := crmmon.Agent{Class: p.Class, Provider: p.Provider, Type: p.Type}.String()
			if len(etcdMatcher.IDs) == 0 && etcdMatcher.matchAgent(agent) && p.Params["node_ip_map"] != "" {
				value = p.Params["node_ip_map"]
				break
			}
		}
	}
	if value == "" {
		return nil, "not set"
	}
	for _, entry := range strings.Split(value, ";") {
		// Split at the first colon only: IPv6 addresses contain colons.
		name, ip, ok := strings.Cut(strings.TrimSpace(entry), ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), node) {
			return []string{ip}, ""
		}
	}
	return nil, "no entry for this node"
}

func nodeIPAttr(in Input, node string) ([]string, string) {
	if v, ok := in.Doc.NodeAttributes[node]["node_ip"]; ok {
		return []string{v}, ""
	}
	if in.CIB != nil {
		if v, ok := in.CIB.NodeAttributes[node]["node_ip"]; ok {
			return []string{v}, ""
		}
	}
	return nil, "not set"
}

// usable keeps the valid global-unicast IPs, canonicalised, without
// duplicates and at most MaxAddresses of them; everything else is returned
// as an explanation. IPv4-mapped IPv6 addresses are reported as IPv4.
func usable(raw []string) (addrs []netip.Addr, rejected []string) {
	for _, s := range raw {
		s = strings.TrimSpace(s)
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
		switch {
		case err != nil:
			rejected = append(rejected, fmt.Sprintf("%q is not an IP address", s))
			continue
		case a.Zone() != "":
			rejected = append(rejected, fmt.Sprintf("%q has a zone", s))
			continue
		}
		a = a.Unmap()
		switch {
		case !a.IsGlobalUnicast():
			rejected = append(rejected, fmt.Sprintf("%q is not a global unicast address", s))
		case len(addrs) == MaxAddresses:
			rejected = append(rejected, fmt.Sprintf("%q exceeds the limit of %d addresses", s, MaxAddresses))
		case !slices.Contains(addrs, a):
			addrs = append(addrs, a)
		}
	}
	return addrs, rejected
}
