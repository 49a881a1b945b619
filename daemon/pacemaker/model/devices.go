package model

import (
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/cib"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
)

// Where a device's targets came from.
const (
	TargetsFromHostList = "pcmk_host_list"
	TargetsFromHostMap  = "pcmk_host_map"
	TargetsFromTopology = "fencing topology"
	TargetsFromID       = "<node>_<method> id convention"
)

// Fencing methods the API can represent.
const (
	MethodRedfish = "Redfish"
	MethodIPMI    = "IPMI"
)

// ipmiAgents are fence-agents that speak IPMI: fence_ipmilan and the
// aliases fence-agents installs for it.
var ipmiAgents = []string{
	"fence_ipmilan", "fence_ipmilanplus", "fence_ipmitool", "fence_idrac",
	"fence_ilo3", "fence_ilo4", "fence_ilo5", "fence_imm",
}

// attachDevices derives every fencing device's state and hangs it under
// each node it can fence. Where a device runs says nothing about its
// target: a device is listed under its target, never under its host.
func (ix *index) attachDevices(c *Cluster) {
	var order []string
	byID := map[string][]*crmmon.Primitive{}
	for i := range ix.in.Doc.Resources {
		p := &ix.in.Doc.Resources[i]
		if !p.Agent.IsStonith() {
			continue
		}
		id := baseID(p.ID)
		if _, seen := byID[id]; !seen {
			order = append(order, id)
		}
		byID[id] = append(byID[id], p)
	}
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = n.Name
	}
	for _, id := range order {
		d := ix.device(id, byID[id])
		d.Targets, d.TargetsFrom = ix.targets(id, names)
		if len(d.Targets) == 0 {
			c.UntargetedDevices = append(c.UntargetedDevices, d)
			if c.CIBProblem != "" {
				c.note("fencing device %s: no target node found (the CIB could not be read, and its id is not <node>_<method>)", id)
			} else {
				c.note("fencing device %s: no target node found (no pcmk_host_list, pcmk_host_map or fencing level names a cluster node, and its id is not <node>_<method>)", id)
			}
			continue
		}
		for i := range c.Nodes {
			if slices.Contains(d.Targets, c.Nodes[i].Name) {
				c.Nodes[i].Devices = append(c.Nodes[i].Devices, d)
			}
		}
	}
	if ix.in.CIB == nil {
		return
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		for _, l := range ix.in.CIB.FencingLevels {
			if levelTargets(l, n.Name) {
				n.FencingLevels = append(n.FencingLevels, FencingLevel{Index: l.Index, Devices: l.Devices})
			}
		}
		slices.SortStableFunc(n.FencingLevels, func(a, b FencingLevel) int { return a.Index - b.Index })
	}
}

// levelTargets reports whether a fencing level applies to a node. Levels
// that select by node attribute are not resolved (see cib.FencingLevel).
func levelTargets(l cib.FencingLevel, node string) bool {
	if l.Target != "" {
		return strings.EqualFold(l.Target, node)
	}
	return l.Pattern != nil && l.Pattern.MatchString(node)
}

func (ix *index) device(id string, instances []*crmmon.Primitive) Device {
	p := worst(instances)
	d := Device{ID: id, Type: p.Agent.Type}
	d.Method = method(p.Agent.Type, id)
	d.Resource = ix.facts(p, "")
	d.IDs = []string{id}
	d.Placement = Stopped
	var running []string
	for _, inst := range instances {
		for _, h := range ix.hosts(inst) {
			if !slices.Contains(running, h) {
				running = append(running, h)
			}
		}
	}
	if len(running) > 0 {
		d.Placement = Here
		d.RunsOn = running
	}
	// A device is one cluster-wide resource: a failed start or monitor on
	// any node counts, unless it now runs healthy on another node.
	nodes := make([]string, 0, len(ix.failures))
	for node := range ix.failures {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes) // deterministic choice between equally recent records
	for _, node := range nodes {
		cur, rec, count := ix.lastFailure(d.IDs, node)
		if count != "" && d.FailCount == "" {
			d.FailCount = count
		}
		if cur != nil && len(running) > 0 && !slices.Contains(running, node) && !d.Failed.IsTrue() {
			cur, rec = nil, cur
		}
		if cur != nil && (d.Failure == nil || cur.LastRCChange.After(d.Failure.LastRCChange)) {
			d.Failure = cur
		}
		if rec != nil && (d.Recovered == nil || rec.LastRCChange.After(d.Recovered.LastRCChange)) {
			d.Recovered = rec
		}
	}
	return d
}

// method maps a fence agent to the API's methods, falling back to the
// suffix of a "<node>_<method>" id for agents that name neither (such as
// fence_dummy in tests, or a site-specific wrapper).
func method(agentType, id string) string {
	t := strings.ToLower(agentType)
	switch {
	case t == "fence_redfish":
		return MethodRedfish
	case slices.Contains(ipmiAgents, t):
		return MethodIPMI
	}
	if i := strings.LastIndexByte(id, '_'); i >= 0 {
		switch strings.ToLower(id[i+1:]) {
		case "redfish":
			return MethodRedfish
		case "ipmi", "ipmilan", "ipmitool":
			return MethodIPMI
		}
	}
	return ""
}

// targets resolves the nodes a device can fence: pcmk_host_list and
// pcmk_host_map (what the fencer itself uses), else the fencing topology,
// else the <node>_<method> naming convention. Only names of cluster nodes
// are kept.
func (ix *index) targets(id string, nodes []string) ([]string, string) {
	if cfg := ix.in.CIB; cfg != nil {
		params := cfg.Primitives[id].Params
		var out []string
		from := ""
		if list := params["pcmk_host_list"]; list != "" {
			out = appendKnown(out, splitList(list), nodes)
			from = TargetsFromHostList
		}
		if hostMap := params["pcmk_host_map"]; hostMap != "" {
			out = appendKnown(out, hostMapNames(hostMap), nodes)
			if from == "" {
				from = TargetsFromHostMap
			} else {
				from += " and " + TargetsFromHostMap
			}
		}
		if from != "" {
			return out, from
		}
		for _, l := range cfg.FencingLevels {
			if !slices.Contains(l.Devices, id) {
				continue
			}
			for _, n := range nodes {
				if levelTargets(l, n) {
					out = appendKnown(out, []string{n}, nodes)
				}
			}
		}
		if len(out) > 0 {
			return out, TargetsFromTopology
		}
	}
	if i := strings.LastIndexByte(id, '_'); i > 0 {
		for _, n := range nodes {
			if strings.EqualFold(n, id[:i]) {
				return []string{n}, TargetsFromID
			}
		}
	}
	return nil, ""
}

// splitList splits a pcmk_host_list, which allows spaces, commas and
// semicolons as separators.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == ',' || r == ';' || r == '\t' || r == '\n'
	})
}

// hostMapNames returns the node names a pcmk_host_map maps to ports, read
// as the fencer does: mappings separated by semicolons, spaces or tabs
// (not commas: a comma belongs to a port list), each "name:port" or
// "name=port" split at the first ':' or '='; a mapping without a name or a
// port is malformed and ignored by the fencer.
func hostMapNames(hostMap string) []string {
	var names []string
	for _, mapping := range strings.FieldsFunc(hostMap, func(r rune) bool { return r == ';' || r == ' ' || r == '\t' }) {
		i := strings.IndexAny(mapping, ":=")
		if i > 0 && i < len(mapping)-1 {
			names = append(names, mapping[:i])
		}
	}
	return names
}

// appendKnown appends the names that are cluster nodes (matching case
// insensitively, as host names are), once each.
func appendKnown(out, names, nodes []string) []string {
	for _, name := range names {
		for _, n := range nodes {
			if strings.EqualFold(n, strings.TrimSpace(name)) && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}
