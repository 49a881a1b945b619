package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
)

// Build derives the cluster's facts. in.Doc must have passed crmmon.Check.
func Build(in Input, m Mapping) *Cluster {
	doc := in.Doc
	c := &Cluster{APIVersion: doc.APIVersion, KubeletSelector: m.Kubelet.String(), EtcdSelector: m.Etcd.String()}
	if s := doc.Summary; s != nil {
		c.DCPresent, c.DCName, c.WithQuorum, c.NoQuorumPolicy = s.DCPresent, s.DCName, s.WithQuorum, s.NoQuorumPolicy
		c.MaintenanceMode, c.StonithEnabled, c.StopAllResources = s.MaintenanceMode, s.StonithEnabled, s.StopAllResources
	}
	for _, w := range doc.Warnings {
		c.Notes = append(c.Notes, "crm_mon output: "+w)
	}
	if in.CIBProblem != "" {
		c.CIBProblem = in.CIBProblem
		c.Notes = append(c.Notes, "CIB configuration unavailable ("+in.CIBProblem+"): fencing targets fall back to the <node>_<method> id convention")
	}

	ix := newIndex(in, c)
	var kubelet, etcd []*crmmon.Primitive
	for i := range doc.Resources {
		p := &doc.Resources[i]
		switch {
		case m.Kubelet.Match(p):
			kubelet = append(kubelet, p)
		case m.Etcd.Match(p):
			etcd = append(etcd, p)
		}
	}

	for _, sel := range []struct {
		name, selector string
		matched        []*crmmon.Primitive
	}{{"Kubelet", c.KubeletSelector, kubelet}, {"Etcd", c.EtcdSelector, etcd}} {
		if ids := uniqueIDs(sel.matched); len(ids) > 1 {
			c.note("%s: %s matches several resources (%s); each node reports the worst of them", sel.name, sel.selector, strings.Join(ids, ", "))
		}
	}

	for i := range doc.Nodes {
		dn := &doc.Nodes[i]
		if ix.isGuest(dn) {
			continue
		}
		n := Node{
			Name: dn.Name, ID: dn.ID, Type: dn.Type,
			Online: dn.Online, Standby: dn.Standby, StandbyOnFail: dn.StandbyOnFail,
			Maintenance: dn.Maintenance, Pending: dn.Pending, Unclean: dn.Unclean,
			ExpectedUp: dn.ExpectedUp, Shutdown: dn.Shutdown,
			ConfiguredStandby: ix.configuredStandby(dn.Name),
		}
		n.Kubelet = ix.place(kubelet, dn)
		n.Etcd = ix.place(etcd, dn)
		n.Addresses, n.AddressSource, n.AddressProblems = resolveAddresses(in, dn, etcd, m.Etcd)
		n.LastFence = lastFence(doc.FenceHistory, dn.Name)
		c.Nodes = append(c.Nodes, n)
	}
	slices.SortFunc(c.Nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	ix.attachDevices(c)
	return c
}

// index holds lookups shared by the per-node derivations.
type index struct {
	in      Input
	cluster *Cluster
	nodes   map[string]*crmmon.Node
	// guestHost maps a guest node (bundle replica or VM) to the host its
	// container runs on, so that resources inside count for that host.
	guestHost map[string]string
	history   map[string][]crmmon.ResourceHistory // by node
	failures  map[string][]crmmon.Failure         // by node
}

func newIndex(in Input, c *Cluster) *index {
	doc := in.Doc
	ix := &index{
		in: in, cluster: c,
		nodes:     make(map[string]*crmmon.Node, len(doc.Nodes)),
		guestHost: map[string]string{},
		history:   map[string][]crmmon.ResourceHistory{},
		failures:  map[string][]crmmon.Failure{},
	}
	for i := range doc.Nodes {
		ix.nodes[doc.Nodes[i].Name] = &doc.Nodes[i]
	}
	runsOn := map[string]string{} // resource id -> first node
	for i := range doc.Resources {
		p := &doc.Resources[i]
		if len(p.Nodes) > 0 {
			runsOn[p.ID] = p.Nodes[0].Name
		}
	}
	for i := range doc.Resources {
		p := &doc.Resources[i]
		// A bundle replica's remote connection is named after the guest
		// node and runs on the host of the replica's container.
		if _, inReplica := p.Parent(crmmon.KindReplica); inReplica && p.Agent.Class == "ocf" &&
			p.Agent.Provider == "pacemaker" && p.Agent.Type == "remote" {
			ix.guestHost[p.ID] = runsOn[p.ID]
		}
	}
	for _, n := range doc.Nodes {
		if n.Container != "" {
			ix.guestHost[n.Name] = runsOn[n.Container]
		}
	}
	for _, h := range doc.History {
		ix.history[h.Node] = append(ix.history[h.Node], h)
	}
	for _, f := range doc.Failures {
		ix.failures[f.Node] = append(ix.failures[f.Node], f)
	}
	return ix
}

func (ix *index) isGuest(n *crmmon.Node) bool {
	_, guest := ix.guestHost[n.Name]
	return guest || n.Container != ""
}

// hosts returns the hosts an instance is placed on, mapping guest nodes
// to the host of their container.
func (ix *index) hosts(p *crmmon.Primitive) []string {
	out := make([]string, 0, len(p.Nodes))
	for _, n := range p.Nodes {
		name := n.Name
		if host, ok := ix.guestHost[name]; ok && host != "" {
			name = host
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func (ix *index) configuredStandby(node string) Bool {
	if v, ok := ix.in.Doc.NodeAttributes[node]["standby"]; ok {
		return crmmon.ParseBool(v)
	}
	if ix.in.CIB != nil {
		if v, ok := ix.in.CIB.NodeAttributes[node]["standby"]; ok {
			return crmmon.ParseBool(v)
		}
	}
	return crmmon.Unknown
}

// place derives the state of a logical resource (all instances matched
// for Kubelet or Etcd) on one node.
func (ix *index) place(matched []*crmmon.Primitive, node *crmmon.Node) Resource {
	if len(matched) == 0 {
		return Resource{Placement: Missing, Maintenance: ix.maintenance(nil, node.Name)}
	}
	var here, stopped []*crmmon.Primitive
	var elsewhere []string
	for _, p := range matched {
		hosts := ix.hosts(p)
		switch {
		case slices.Contains(hosts, node.Name):
			here = append(here, p)
		case len(hosts) == 0:
			stopped = append(stopped, p)
		default:
			for _, h := range hosts {
				if !slices.Contains(elsewhere, h) {
					elsewhere = append(elsewhere, h)
				}
			}
		}
	}
	var r Resource
	switch {
	case len(here) > 0:
		r = ix.facts(worst(here), node.Name)
		r.Placement = Here
		r.OnUncleanNode = node.Unclean.IsTrue()
	case len(stopped) > 0:
		// Instances are interchangeable: the one missing from this node
		// is the one stopped on it.
		r = ix.facts(worst(stopped), node.Name)
		r.Placement = Stopped
	default:
		// Configuration flags come from an instance on another node; its
		// run-time state (failed, active) says nothing about this one.
		r = ix.facts(matched[0], node.Name)
		r.Placement = Elsewhere
		r.Role = crmmon.RoleStopped
		r.Active = crmmon.False
		r.Failed = crmmon.False
		r.RunsOn = elsewhere
	}
	r.IDs = uniqueIDs(matched)
	r.Failure, r.Recovered, r.FailCount = ix.lastFailure(r.IDs, node.Name)
	return r
}

// facts copies an instance's flags and adds what applies to it on node.
func (ix *index) facts(p *crmmon.Primitive, node string) Resource {
	return Resource{
		Agent:       p.Agent.String(),
		Role:        p.Role,
		RunsOn:      ix.hosts(p),
		Active:      p.Active,
		Managed:     p.Managed,
		Failed:      p.Failed,
		Blocked:     p.Blocked,
		Disabled:    ix.disabled(p),
		Maintenance: ix.maintenance(p, node),
		Banned:      ix.banned(p, node),
	}
}

// worst picks the instance to report when several match on one node: a
// failed one before a blocked, inactive or unmanaged one, so that a
// problem is never hidden behind a healthy twin.
func worst(ps []*crmmon.Primitive) *crmmon.Primitive {
	score := func(p *crmmon.Primitive) int {
		s := 0
		if p.Failed.IsTrue() {
			s += 8
		}
		if p.Blocked.IsTrue() {
			s += 4
		}
		if !p.Active.IsTrue() {
			s += 2
		}
		if !p.Managed.IsTrue() {
			s++
		}
		return s
	}
	best := ps[0]
	for _, p := range ps[1:] {
		if score(p) > score(best) {
			best = p
		}
	}
	return best
}

func uniqueIDs(ps []*crmmon.Primitive) []string {
	var ids []string
	for _, p := range ps {
		if id := baseID(p.ID); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func (ix *index) disabled(p *crmmon.Primitive) string {
	if ix.cluster.StopAllResources.IsTrue() {
		return "cluster option stop-all-resources is on"
	}
	if p.TargetRole == crmmon.RoleStopped {
		return "target-role=Stopped on " + p.ID
	}
	for _, parent := range p.Parents {
		if parent.TargetRole == crmmon.RoleStopped || parent.Disabled.IsTrue() {
			return "target-role=Stopped on " + baseID(parent.ID)
		}
	}
	return ""
}

// maintenance explains why p (nil: a resource that is not configured) is
// in maintenance on node, or returns "".
func (ix *index) maintenance(p *crmmon.Primitive, node string) string {
	if ix.cluster.MaintenanceMode.IsTrue() {
		return "cluster maintenance-mode is on"
	}
	if n := ix.nodes[node]; n != nil && n.Maintenance.IsTrue() {
		return "node " + node + " is in maintenance"
	}
	if p == nil {
		return ""
	}
	for _, h := range ix.hosts(p) {
		if n := ix.nodes[h]; n != nil && n.Maintenance.IsTrue() {
			return "node " + h + " where it runs is in maintenance"
		}
	}
	ids := []string{baseID(p.ID)}
	if p.Maintenance.IsTrue() {
		return "resource " + ids[0] + " is in maintenance"
	}
	for _, parent := range p.Parents {
		if parent.Maintenance.IsTrue() {
			return "resource " + baseID(parent.ID) + " is in maintenance"
		}
		ids = append(ids, baseID(parent.ID))
	}
	// crm_mon before 2.1.6 does not print the attribute; the CIB has it.
	if ix.in.CIB != nil {
		for _, id := range ids {
			if crmmon.ParseBool(ix.in.CIB.Meta[id]["maintenance"]).IsTrue() {
				return "resource " + id + " has meta attribute maintenance=true"
			}
		}
	}
	return ""
}

func (ix *index) banned(p *crmmon.Primitive, node string) string {
	ids := []string{baseID(p.ID)}
	for _, parent := range p.Parents {
		ids = append(ids, baseID(parent.ID))
	}
	for _, b := range ix.in.Doc.Bans {
		if b.Node == node && b.Weight <= -crmmon.Infinity && slices.Contains(ids, b.Resource) {
			return b.ID
		}
	}
	return ""
}

// lastFailure finds the failure record of the last start or monitor of
// any of ids on node. A record that a later successful start or monitor
// superseded (the resource recovered) is returned as recovered instead.
func (ix *index) lastFailure(ids []string, node string) (current, recovered *crmmon.Failure, failCount string) {
	lastCall := -1
	haveHistory := false
	for _, h := range ix.history[node] {
		if !slices.Contains(ids, baseID(h.Resource)) {
			continue
		}
		haveHistory = true
		if h.FailCount != "" && failCount == "" {
			failCount = h.FailCount
		}
		for _, op := range h.Operations {
			if isStartOrMonitor(op.Task) && op.Call > lastCall {
				lastCall = op.Call
			}
		}
	}
	for i := range ix.failures[node] {
		f := &ix.failures[node][i]
		if !slices.Contains(ids, baseID(f.Resource)) || !isStartOrMonitor(f.Task) {
			continue
		}
		// Without history (trimmed output) a failure record is taken at
		// its word; with history, it applies only if no later start or
		// monitor ran.
		if !haveHistory || f.Call >= lastCall {
			if current == nil || f.Call > current.Call {
				current = f
			}
		} else if recovered == nil || f.Call > recovered.Call {
			recovered = f
		}
	}
	return current, recovered, failCount
}

func isStartOrMonitor(task string) bool {
	switch strings.ToLower(task) {
	case "start", "monitor", "probe":
		return true
	}
	return false
}

func lastFence(events []crmmon.FenceEvent, target string) *crmmon.FenceEvent {
	var last *crmmon.FenceEvent
	for i := range events {
		e := &events[i]
		if e.Target != target {
			continue
		}
		switch {
		case last == nil:
			last = e
		case e.Status == "pending" && last.Status != "pending":
			last = e // an action in progress is the news
		case last.Status != "pending" && e.Completed.After(last.Completed):
			last = e
		}
	}
	return last
}

// note records an explanation once.
func (c *Cluster) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(c.Notes, msg) {
		c.Notes = append(c.Notes, msg)
	}
}
