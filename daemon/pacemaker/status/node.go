package status

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// agentNamePattern is the API's rule for fencing agent names.
var agentNamePattern = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

const maxAgentName = 300

func buildNode(c *model.Cluster, devices judgedDevices, n *model.Node, name string) Node {
	out := Node{Name: name}
	for _, a := range n.Addresses {
		out.Addresses = append(out.Addresses, a.String())
	}
	kubelet := Resource{Name: string(etcdv1.PacemakerClusterResourceNameKubelet), Conditions: resourceConditions(c, &n.Kubelet, n, "kubelet", c.KubeletSelector)}
	etcd := Resource{Name: string(etcdv1.PacemakerClusterResourceNameEtcd), Conditions: resourceConditions(c, &n.Etcd, n, "etcd", c.EtcdSelector)}
	out.Resources = []Resource{kubelet, etcd}

	fencingAvailable, fencingHealthy, agents := fencing(c, devices, n)
	out.FencingAgents = agents

	parts := []metav1.Condition{
		condition(etcdv1.NodeOnlineConditionType, n.Online, etcdv1.NodeOnlineReasonOnline, etcdv1.NodeOnlineReasonOffline,
			onlineMessage(n), offlineMessage(n)),
		condition(etcdv1.NodeInServiceConditionType, n.Maintenance.Not(), etcdv1.NodeInServiceReasonInService, etcdv1.NodeInServiceReasonInMaintenance,
			"node is not in maintenance", "node is in maintenance: pacemaker neither starts, stops nor monitors resources on it"),
		activeCondition(n),
		condition(etcdv1.NodeReadyConditionType, n.Pending.Not(), etcdv1.NodeReadyReasonReady, etcdv1.NodeReadyReasonPending,
			"node has joined the cluster", "node is joining or leaving the cluster (pending)"),
		condition(etcdv1.NodeCleanConditionType, n.Unclean.Not(), etcdv1.NodeCleanReasonClean, etcdv1.NodeCleanReasonUnclean,
			joinMsg("pacemaker knows the node's state", fenceMessage(n.LastFence)),
			joinMsg("pacemaker cannot confirm the node's state; it must be fenced before its resources are recovered", fenceMessage(n.LastFence))),
		memberCondition(n),
		fencingAvailable,
		fencingHealthy,
	}
	msg := summarize(parts)
	for _, r := range out.Resources {
		if !isTrue(r.Conditions, etcdv1.ResourceHealthyConditionType) {
			msg = joinMsg(msg, r.Name+": "+r.Conditions[0].Message)
		}
	}
	ok := allTrue(parts) && isTrue(kubelet.Conditions, etcdv1.ResourceHealthyConditionType) && isTrue(etcd.Conditions, etcdv1.ResourceHealthyConditionType)
	if ok {
		msg = "node and its Kubelet and Etcd resources are healthy and it can be fenced"
	}
	out.Conditions = append([]metav1.Condition{
		aggregate(etcdv1.NodeHealthyConditionType, ok, etcdv1.NodeHealthyReasonHealthy, etcdv1.NodeHealthyReasonUnhealthy, msg),
	}, parts...)
	return out
}

func onlineMessage(n *model.Node) string {
	if n.Shutdown.IsTrue() {
		return "node is online and shutting down"
	}
	return "node is online"
}

func offlineMessage(n *model.Node) string {
	msg := "node is offline"
	switch {
	case n.Unclean.IsTrue():
		msg += " and pacemaker cannot confirm that it is down"
	case n.ExpectedUp.IsFalse():
		msg += " (left the cluster cleanly or was fenced)"
	}
	return joinMsg(msg, fenceMessage(n.LastFence))
}

// activeCondition reports standby. A pending (joining) node is flagged
// standby by pacemaker as a side effect; that is Ready=False, not standby,
// so while pending only the configured standby attribute counts.
func activeCondition(n *model.Node) metav1.Condition {
	standby := n.Standby
	falseMsg := "node is in standby: pacemaker moves its resources away"
	trueMsg := "node is not in standby"
	switch {
	case n.Pending.IsTrue():
		standby = crmmon.Of(n.ConfiguredStandby.IsTrue())
		trueMsg = "node is not in standby (it is pending, which pacemaker also flags as standby)"
	case n.StandbyOnFail.IsTrue():
		standby = crmmon.True
		falseMsg = "node is in standby because a resource failed with on-fail=standby"
	}
	return condition(etcdv1.NodeActiveConditionType, standby.Not(), etcdv1.NodeActiveReasonActive, etcdv1.NodeActiveReasonStandby, trueMsg, falseMsg)
}

func memberCondition(n *model.Node) metav1.Condition {
	member := crmmon.Unknown
	if n.Type != "" {
		member = crmmon.Of(n.Type == "member")
	}
	return condition(etcdv1.NodeMemberConditionType, member, etcdv1.NodeMemberReasonMember, etcdv1.NodeMemberReasonNotMember,
		"node is a cluster member", fmt.Sprintf("node is of type %q, not a cluster member", n.Type))
}

func fenceMessage(e *crmmon.FenceEvent) string {
	if e == nil {
		return ""
	}
	by := e.Delegate
	if by == "" {
		by = e.Origin
	}
	switch e.Status {
	case "pending":
		return fmt.Sprintf("fencing (%s) requested by %s is in progress", e.Action, e.Origin)
	case "success":
		return fmt.Sprintf("last fenced (%s) by %s at %s", e.Action, by, stamp(e.Completed))
	default:
		msg := fmt.Sprintf("last fencing attempt (%s) by %s failed", e.Action, by)
		if !e.Completed.IsZero() {
			msg += " at " + stamp(e.Completed)
		}
		if e.ExitReason != "" {
			msg += ": " + e.ExitReason
		}
		return msg
	}
}

// fencing computes FencingAvailable and FencingHealthy from the devices
// that target the node, and lists those the API can represent.
//
// A device counts as working if it is Healthy, or if the only conditions
// that fail are InService and Managed because of maintenance: maintenance
// stops pacemaker from managing a device, not the device from fencing, and
// reporting it as a fencing failure would raise a false alarm (the existing
// collector's "fencing at risk" during cluster maintenance).
func fencing(c *model.Cluster, devices judgedDevices, n *model.Node) (available, healthy metav1.Condition, listed []FencingAgent) {
	var working, broken, unlisted []string
	for i := range n.Devices {
		d := &n.Devices[i]
		v := devices[d.ID]
		if v.works {
			working = append(working, v.label)
		} else {
			broken = append(broken, v.label+": "+v.why)
		}
		switch {
		case d.Method == "":
			unlisted = append(unlisted, d.ID+" (agent "+d.Type+" is neither Redfish nor IPMI)")
		case len(d.ID) > maxAgentName || !agentNamePattern.MatchString(d.ID):
			unlisted = append(unlisted, d.ID+" (name not allowed by the API)")
		case len(listed) == maxFencingAgents:
			unlisted = append(unlisted, d.ID+fmt.Sprintf(" (the API lists at most %d agents)", maxFencingAgents))
		default:
			// A copy: lastTransitionTime is carried over per node.
			listed = append(listed, FencingAgent{Name: d.ID, Method: d.Method, Conditions: slices.Clone(v.conds)})
		}
	}
	if listed == nil {
		listed = []FencingAgent{}
	}

	available = metav1.Condition{Type: etcdv1.NodeFencingAvailableConditionType, Status: metav1.ConditionFalse, Reason: etcdv1.NodeFencingAvailableReasonUnavailable}
	healthy = metav1.Condition{Type: etcdv1.NodeFencingHealthyConditionType, Status: metav1.ConditionFalse, Reason: etcdv1.NodeFencingHealthyReasonUnhealthy}
	switch {
	case len(n.Devices) == 0:
		available.Message = "no fencing device targets this node (checked pcmk_host_list, pcmk_host_map, fencing topology and <node>_<method> device ids)"
		if c.CIBProblem != "" {
			available.Message = "no fencing device found for this node: the CIB could not be read (" + c.CIBProblem +
				"), so only <node>_<method> device ids were checked"
		}
		healthy.Message = available.Message
	default:
		if c.StonithEnabled.IsFalse() {
			available.Message = "cluster property stonith-enabled is false: pacemaker will not fence this node"
		} else if len(n.FencingLevels) > 0 {
			if by, why := throughLevels(devices, n); by != "" {
				available.Status, available.Reason = metav1.ConditionTrue, etcdv1.NodeFencingAvailableReasonAvailable
				available.Message = "can be fenced by " + by
			} else {
				available.Message = why
			}
		} else if len(working) > 0 {
			available.Status, available.Reason = metav1.ConditionTrue, etcdv1.NodeFencingAvailableReasonAvailable
			available.Message = "can be fenced by " + strings.Join(working, ", ")
		} else {
			available.Message = "no working fencing device: " + strings.Join(broken, "; ")
		}
		if len(broken) == 0 {
			healthy.Status, healthy.Reason = metav1.ConditionTrue, etcdv1.NodeFencingHealthyReasonHealthy
			healthy.Message = fmt.Sprintf("all %d fencing devices are healthy", len(n.Devices))
		} else {
			healthy.Message = "unhealthy fencing devices: " + strings.Join(broken, "; ")
		}
	}
	if len(unlisted) > 0 {
		healthy.Message = joinMsg(healthy.Message, "not listed in fencingAgents: "+strings.Join(unlisted, ", "))
	}
	if n.LastFence != nil && n.LastFence.Status == "failed" {
		healthy.Message = joinMsg(healthy.Message, fenceMessage(n.LastFence))
	}
	available.Message, healthy.Message = truncate(available.Message), truncate(healthy.Message)
	return available, healthy, listed
}

// deviceVerdict is a fencing device's conditions and whether it can fence.
type deviceVerdict struct {
	conds []metav1.Condition
	works bool
	label string // id (method)
	why   string // when it does not work
}

// judgedDevices are the verdicts on every fencing device of the cluster,
// by id. A device's conditions do not depend on the node it is listed
// under, so each is judged once per build.
type judgedDevices map[string]deviceVerdict

func judgeDevices(c *model.Cluster) judgedDevices {
	out := judgedDevices{}
	judge := func(d *model.Device) {
		if _, done := out[d.ID]; done {
			return
		}
		conds := resourceConditions(c, &d.Resource, nil, d.ID, "")
		label := d.ID
		if d.Method != "" {
			label += " (" + d.Method + ")"
		}
		out[d.ID] = deviceVerdict{conds: conds, works: fencingWorks(&d.Resource, conds), label: label, why: conds[0].Message}
	}
	for i := range c.Nodes {
		for j := range c.Nodes[i].Devices {
			judge(&c.Nodes[i].Devices[j])
		}
	}
	for i := range c.UntargetedDevices {
		judge(&c.UntargetedDevices[i])
	}
	return out
}

// throughLevels applies a node's fencing topology: pacemaker tries the
// levels in index order and a level succeeds only if every one of its
// devices does, so the node can be fenced only if some level consists of
// working devices. A healthy device outside every working level does not
// help. It returns the first working level, or why none works. A level's
// device need not target the node by host list, so devices are looked up
// cluster-wide.
func throughLevels(devices judgedDevices, n *model.Node) (by, why string) {
	var failed []string
	for _, l := range n.FencingLevels {
		var labels, problems []string
		for _, id := range l.Devices {
			v, ok := devices[id]
			switch {
			case !ok:
				problems = append(problems, id+" is not a configured fencing device")
			case !v.works:
				problems = append(problems, v.label+": "+v.why)
			default:
				labels = append(labels, v.label)
			}
		}
		if len(problems) == 0 && len(labels) > 0 {
			return fmt.Sprintf("fencing level %d: %s", l.Index, strings.Join(labels, " and ")), ""
		}
		if len(l.Devices) == 0 {
			problems = append(problems, "no devices")
		}
		failed = append(failed, fmt.Sprintf("level %d: %s", l.Index, strings.Join(problems, ", ")))
	}
	return "", "no fencing level can succeed (a level needs every one of its devices): " + strings.Join(failed, "; ")
}

func fencingWorks(d *model.Resource, conds []metav1.Condition) bool {
	for _, c := range conds[1:] { // conds[0] is Healthy
		if c.Status == metav1.ConditionTrue {
			continue
		}
		maintenanceOnly := d.Maintenance != "" &&
			(c.Type == etcdv1.ResourceInServiceConditionType || c.Type == etcdv1.ResourceManagedConditionType)
		if !maintenanceOnly {
			return false
		}
	}
	return true
}
