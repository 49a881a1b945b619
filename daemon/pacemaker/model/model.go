// Package model turns what pacemaker and corosync report into per-node
// facts: which nodes exist and what state they are in, where the Kubelet and
// Etcd resources are (including stopped clone instances, which crm_mon
// prints without a node), which fencing devices can fence each node, and
// each node's addresses. It is pure: inputs in, facts out, no judgement of
// health (that is the status package's job).
package model

import (
	"net/netip"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/cib"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/corosync"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
)

// Bool re-exports crmmon's tri-state boolean for readers of the model.
type Bool = crmmon.Bool

// Input is everything one poll gathered. Only Doc is required; a missing
// CIB or corosync node list narrows what can be derived and is explained
// by the matching *Problem field.
type Input struct {
	Doc             *crmmon.Document
	CIB             *cib.Config
	CIBProblem      string
	Corosync        []corosync.Node
	CorosyncProblem string
}

// Cluster is the cluster-wide view.
type Cluster struct {
	// APIVersion is crm_mon's api-version, recorded for messages and metrics.
	APIVersion       string
	DCPresent        Bool
	DCName           string
	WithQuorum       Bool
	NoQuorumPolicy   string
	MaintenanceMode  Bool
	StonithEnabled   Bool
	StopAllResources Bool
	// Nodes are the cluster's hosts (members and pacemaker_remote nodes;
	// bundle and VM guest nodes are resources, not hosts), sorted by name.
	Nodes []Node
	// UntargetedDevices are fencing devices whose target node could not be
	// determined; they cannot be attributed to any node.
	UntargetedDevices []Device
	// CIBProblem says why the CIB configuration could not be read; then
	// device targets come only from the <node>_<method> id convention, and
	// messages must not claim that host lists were checked.
	CIBProblem string
	// KubeletSelector and EtcdSelector describe how the resources were
	// matched ("agent systemd:kubelet", "ids kubelet"), for messages.
	KubeletSelector string
	EtcdSelector    string
	// Notes explain inputs that were unavailable or odd (the CIB could not
	// be read, timestamps could not be parsed, …).
	Notes []string
}

// Node is one host.
type Node struct {
	Name string
	ID   string
	// Type is "member", "remote", "ping" or "unknown".
	Type          string
	Online        Bool
	Standby       Bool
	StandbyOnFail Bool
	Maintenance   Bool
	Pending       Bool
	Unclean       Bool
	ExpectedUp    Bool
	Shutdown      Bool
	// ConfiguredStandby is the standby node attribute in the CIB. Pacemaker
	// reports a joining (pending) node as standby too, so while a node is
	// pending this is what tells a real standby apart.
	ConfiguredStandby Bool

	// Addresses are canonical global-unicast IPs, the etcd peer address
	// first; empty when no source had a usable one.
	Addresses []netip.Addr
	// AddressSource names where Addresses came from.
	AddressSource string
	// AddressProblems say why sources tried before (or instead of) the one
	// used gave nothing usable.
	AddressProblems []string

	Kubelet Resource
	Etcd    Resource
	// Devices are the fencing devices that can fence this node.
	Devices []Device
	// FencingLevels is the fencing topology for this node, lowest index
	// first; empty without topology. With levels, pacemaker fences through
	// a level only if every device of that level succeeds.
	FencingLevels []FencingLevel
	// LastFence is the most recent fencing action against this node
	// (pending ones first); nil without fence history (always offline).
	LastFence *crmmon.FenceEvent
}

// FencingLevel is one level of a node's fencing topology.
type FencingLevel struct {
	Index   int
	Devices []string
}

// Placement says how a resource relates to the node it is reported under.
type Placement int

// Placements.
const (
	// Missing: no configured resource matches at all.
	Missing Placement = iota
	// Here: an instance is placed on this node (in any role).
	Here
	// Stopped: a stopped instance is attributed to this node (a clone
	// instance missing from the node is stopped there).
	Stopped
	// Elsewhere: the resource exists but is placed on other nodes only
	// and has no stopped instance left over for this node.
	Elsewhere
)

// Resource is the state of the Kubelet or Etcd resource on one node, or
// of a fencing device wherever it runs.
type Resource struct {
	Placement Placement
	// IDs are the matched primitive ids.
	IDs []string
	// Agent is the resource agent, "class:provider:type".
	Agent string
	// Role is the normalised role of the instance; empty when Missing.
	Role string
	// RunsOn lists the hosts of instances (for Elsewhere and devices).
	RunsOn  []string
	Active  Bool
	Managed Bool
	Failed  Bool
	Blocked Bool
	// Disabled explains why the resource may not run (target-role
	// Stopped, stop-all-resources); empty when enabled.
	Disabled string
	// Maintenance explains why the resource is in maintenance (cluster
	// maintenance-mode, node maintenance, resource meta attribute); empty
	// when in service.
	Maintenance string
	// Banned is the id of a -INFINITY location constraint that keeps the
	// resource off this node.
	Banned string
	// Failure is the failure record of the resource's last start or
	// monitor on this node (for devices: on any node, unless the device
	// runs healthy elsewhere); nil when the last one succeeded.
	Failure *crmmon.Failure
	// Recovered is a failure record that newer successful operations
	// superseded; kept only for messages.
	Recovered *crmmon.Failure
	FailCount string
	// OnUncleanNode is set when the state is the last known one of a node
	// pacemaker cannot reach.
	OnUncleanNode bool
}

// Device is a fencing (stonith) device.
type Device struct {
	ID string
	// Type is the agent type, e.g. "fence_redfish".
	Type string
	// Method is "Redfish", "IPMI", or empty when neither can be derived
	// from the agent or the device id.
	Method string
	// TargetsFrom names where the target list came from.
	TargetsFrom string
	Targets     []string
	Resource
}
