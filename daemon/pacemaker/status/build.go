package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// API limits that shape what is reported (validate.go checks all of them).
const (
	maxNodes         = 5
	maxFencingAgents = 8
	maxMessage       = 32768
)

// Build computes the status from the model. expectedNodes is the node count
// NodeCountAsExpected wants (2 for Two Node OpenShift with Fencing). prev is
// the stored status, nil when there is none: conditions whose status did not
// change keep its lastTransitionTime, and lastUpdated never goes below its
// value even if this host's clock is behind the previous writer's.
func Build(c *model.Cluster, expectedNodes int, prev *Status, now time.Time) *Status {
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	if prev != nil && ts.Before(&prev.LastUpdated) {
		ts = prev.LastUpdated
	}
	listed, omitted := selectNodes(c)
	s := &Status{LastUpdated: ts, Nodes: listed}
	var unhealthy []string
	for _, n := range listed {
		if !isTrue(n.Conditions, etcdv1.NodeHealthyConditionType) {
			unhealthy = append(unhealthy, n.Name)
		}
	}

	inService := condition(etcdv1.ClusterInServiceConditionType, c.MaintenanceMode.Not(),
		etcdv1.ClusterInServiceReasonInService, etcdv1.ClusterInServiceReasonInMaintenance,
		"the cluster is not in maintenance mode", "cluster property maintenance-mode is true: pacemaker neither starts, stops nor monitors resources")
	count := nodeCount(len(c.Nodes), len(listed), omitted, expectedNodes)

	parts := []metav1.Condition{inService, count}
	msg := summarize(parts)
	if len(unhealthy) > 0 {
		msg = joinMsg(msg, "unhealthy nodes: "+strings.Join(unhealthy, ", "))
	}
	if c.DCPresent.IsFalse() {
		msg = joinMsg(msg, "the partition has no designated controller")
	} else if c.WithQuorum.IsFalse() {
		msg = joinMsg(msg, "the partition reporting this status has no quorum")
	}
	for _, d := range c.UntargetedDevices {
		msg = joinMsg(msg, "fencing device "+d.ID+" targets no known node")
	}
	ok := len(unhealthy) == 0 && allTrue(parts)
	if ok && msg == "" {
		msg = "pacemaker cluster is healthy"
	}
	s.Conditions = []metav1.Condition{
		aggregate(etcdv1.ClusterHealthyConditionType, ok, etcdv1.ClusterHealthyReasonHealthy, etcdv1.ClusterHealthyReasonUnhealthy, msg),
		inService,
		count,
	}
	carry(s, prev, ts)
	return s
}

// selectNodes builds the nodes the API can carry: a valid name, at least
// one address, at least one fencing agent it can list, at most five nodes.
// The others are omitted with the reason, because a single invalid entry
// would make the API server reject the whole status; the omission is
// reported in NodeCountAsExpected.
func selectNodes(c *model.Cluster) (listed []Node, omitted []string) {
	nodes := c.Nodes
	devices := judgeDevices(c)
	listed = make([]Node, 0, len(nodes))
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		name := n.Name
		// Kubernetes node names are lower case; a pacemaker node named
		// after a mixed-case host name is the same node.
		if lower := strings.ToLower(name); len(validation.IsDNS1123Subdomain(lower)) == 0 {
			name = lower
		}
		switch {
		case len(validation.IsDNS1123Subdomain(name)) > 0:
			omitted = append(omitted, fmt.Sprintf("%s (name is not a lowercase RFC 1123 subdomain)", n.Name))
			continue
		case seen[name]:
			omitted = append(omitted, fmt.Sprintf("%s (name collides with another node's)", n.Name))
			continue
		case len(n.Addresses) == 0:
			omitted = append(omitted, fmt.Sprintf("%s (no valid address: %s)", n.Name, strings.Join(n.AddressProblems, "; ")))
			continue
		}
		out := buildNode(c, devices, n, name)
		switch {
		case len(out.FencingAgents) == 0:
			// The API requires the list and cannot carry it empty (see
			// validateAgents), so such a node cannot be reported at all.
			omitted = append(omitted, fmt.Sprintf("%s (no fencing agent the API can list: %s)", n.Name,
				conditionMessage(out.Conditions, etcdv1.NodeFencingHealthyConditionType)))
		case len(listed) == maxNodes:
			omitted = append(omitted, fmt.Sprintf("%s (the API carries at most %d nodes)", n.Name, maxNodes))
		default:
			seen[name] = true
			listed = append(listed, out)
		}
	}
	return listed, omitted
}

func nodeCount(inPacemaker, listed int, omitted []string, expected int) metav1.Condition {
	msg := fmt.Sprintf("expected %d nodes, pacemaker has %d", expected, inPacemaker)
	if len(omitted) > 0 {
		msg += fmt.Sprintf(", %d reported; omitted: %s", listed, strings.Join(omitted, ", "))
	}
	c := metav1.Condition{Type: etcdv1.ClusterNodeCountAsExpectedConditionType, Message: msg}
	switch {
	case inPacemaker > expected:
		c.Status, c.Reason = metav1.ConditionFalse, etcdv1.ClusterNodeCountAsExpectedReasonExcessiveNodes
	case inPacemaker < expected || len(omitted) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, etcdv1.ClusterNodeCountAsExpectedReasonInsufficientNodes
	default:
		c.Status, c.Reason = metav1.ConditionTrue, etcdv1.ClusterNodeCountAsExpectedReasonAsExpected
	}
	return c
}

// condition renders a fact. Unknown facts give status Unknown with the
// False reason: the API defines no third reason, and "not confirmed" must
// never read as healthy.
func condition(typ string, fact model.Bool, trueReason, falseReason, trueMsg, falseMsg string) metav1.Condition {
	c := metav1.Condition{Type: typ}
	switch {
	case fact.IsTrue():
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, trueReason, trueMsg
	case fact.IsFalse():
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, falseReason, falseMsg
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, falseReason, "pacemaker did not report this state"
	}
	c.Message = truncate(c.Message)
	return c
}

func aggregate(typ string, ok bool, trueReason, falseReason, msg string) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: falseReason, Message: truncate(msg)}
	if ok {
		c.Status, c.Reason = metav1.ConditionTrue, trueReason
	}
	return c
}

// summarize lists the conditions that are not True as "Type: message".
func summarize(parts []metav1.Condition) string {
	var msgs []string
	for _, p := range parts {
		if p.Status != metav1.ConditionTrue {
			msgs = append(msgs, p.Type+": "+p.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

func allTrue(parts []metav1.Condition) bool {
	for _, p := range parts {
		if p.Status != metav1.ConditionTrue {
			return false
		}
	}
	return true
}

func conditionMessage(conds []metav1.Condition, typ string) string {
	for _, c := range conds {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

func isTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func joinMsg(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func truncate(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	const ellipsis = " …"
	cut := maxMessage - len(ellipsis)
	for cut > 0 && !utf8Start(msg[cut]) {
		cut--
	}
	return msg[:cut] + ellipsis
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// carry sets every lastTransitionTime: kept from prev when the condition
// (same object, same type) had the same status, now otherwise.
func carry(s *Status, prev *Status, now metav1.Time) {
	old := map[string]metav1.Condition{}
	if prev != nil {
		walk(prev, func(key string, c *metav1.Condition) { old[key] = *c })
	}
	walk(s, func(key string, c *metav1.Condition) {
		c.LastTransitionTime = now
		if p, ok := old[key]; ok && p.Status == c.Status && !p.LastTransitionTime.IsZero() {
			c.LastTransitionTime = p.LastTransitionTime
		}
	})
}

// walk visits every condition with a key naming its object and type.
func walk(s *Status, visit func(key string, c *metav1.Condition)) {
	each := func(prefix string, conds []metav1.Condition) {
		for i := range conds {
			visit(prefix+conds[i].Type, &conds[i])
		}
	}
	each("cluster/", s.Conditions)
	for _, n := range s.Nodes {
		each("node/"+n.Name+"/", n.Conditions)
		for _, r := range n.Resources {
			each("node/"+n.Name+"/resource/"+r.Name+"/", r.Conditions)
		}
		for _, a := range n.FencingAgents {
			each("node/"+n.Name+"/agent/"+a.Name+"/", a.Conditions)
		}
	}
}
