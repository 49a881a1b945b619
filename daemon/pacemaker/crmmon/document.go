// Package crmmon parses the XML that `crm_mon --output-as=xml` prints, for
// pacemaker 2.0.3 to 3.0.x (and the legacy `crm_mon --as-xml` shape of the
// same versions), into a typed Document.
//
// It is a faithful reader, not a judge: it keeps what pacemaker said,
// distinguishes "attribute absent" from "false" (Bool), and leaves deciding
// what is healthy to the packages above it. Attributes that appeared after
// 2.0 are optional, values pacemaker echoes from user input are compared
// case-insensitively, and each timestamp is parsed in the format of the
// element that carries it.
package crmmon

import (
	"strings"
	"time"
)

// Document is one crm_mon result.
type Document struct {
	// APIVersion is the pacemaker-result api-version ("2.25" on 2.1.5), or
	// the crm_mon version for the legacy root.
	APIVersion string
	// Legacy is true for the deprecated `--as-xml` root <crm_mon>.
	Legacy bool
	// Status is the <status> element; nil when absent (legacy output).
	Status *Status
	// Summary is nil when crm_mon printed none (e.g. it could not read the CIB).
	Summary *Summary
	// HasNodes is true when a <nodes> section was present, even empty.
	HasNodes       bool
	Nodes          []Node
	Resources      []Primitive
	NodeAttributes map[string]map[string]string
	History        []ResourceHistory
	Failures       []Failure
	// FenceHistory is nil when the section is absent, which is always the
	// case offline (CIB_file): fence history lives in the fencer daemon.
	FenceHistory []FenceEvent
	Bans         []Ban
	// Warnings lists values that could not be interpreted (an unparsable
	// timestamp or boolean); the value is treated as unknown.
	Warnings []string
}

// Status is crm_mon's own verdict on the request.
type Status struct {
	Code    int
	Message string
	Errors  []string
}

// Summary is the <summary> section.
type Summary struct {
	Stack string
	// DCPresent is False when the partition has no designated controller.
	DCPresent Bool
	DCName    string
	// WithQuorum is reported only when there is a DC.
	WithQuorum Bool
	LastUpdate time.Time
	LastChange time.Time
	// StonithEnabled reads cluster_options stonith-enabled, or
	// fencing-enabled on pacemaker 3.0.2+.
	StonithEnabled   Bool
	MaintenanceMode  Bool
	StopAllResources Bool
	NoQuorumPolicy   string
}

// Node is one <node> of the <nodes> section.
type Node struct {
	Name          string
	ID            string
	Online        Bool
	Standby       Bool
	StandbyOnFail Bool
	Maintenance   Bool
	Pending       Bool
	Unclean       Bool
	Shutdown      Bool
	ExpectedUp    Bool
	IsDC          Bool
	// Type is "member", "remote", "ping" or "unknown" (lower case).
	Type string
	// Container is the resource a guest node runs in (container_id or
	// id_as_resource); empty for cluster hosts.
	Container string
}

// Parent is a container a primitive is nested in.
type Parent struct {
	Kind ParentKind
	ID   string
	// Managed, Failed and Maintenance are as the container reports them.
	Managed     Bool
	Failed      Bool
	Maintenance Bool
	// Disabled is the clone/group "disabled" flag (target-role Stopped
	// on the container itself).
	Disabled   Bool
	TargetRole string
}

// ParentKind names the container element.
type ParentKind string

// Container kinds, as the element names.
const (
	KindClone   ParentKind = "clone"
	KindGroup   ParentKind = "group"
	KindBundle  ParentKind = "bundle"
	KindReplica ParentKind = "replica"
)

// Primitive is one <resource> element: a primitive, or one instance of a
// cloned primitive. Anonymous clone instances all carry the primitive id;
// an instance is identified by its node, and a stopped instance has none.
type Primitive struct {
	ID    string
	Agent Agent
	// Role is the normalised role (see NormalizeRole).
	Role       string
	TargetRole string
	Active     Bool
	Orphaned   Bool
	Blocked    Bool
	Managed    Bool
	Failed     Bool
	// FailureIgnored is set for on-fail=ignore failures.
	FailureIgnored Bool
	Maintenance    Bool
	Pending        string
	Nodes          []NodeRef
	// Parents lists the enclosing containers, outermost first.
	Parents []Parent
}

// NodeRef is a <node> child of a resource: where the instance is active.
type NodeRef struct {
	Name   string
	Cached Bool
}

// Parent returns the innermost container of the given kind.
func (p *Primitive) Parent(kind ParentKind) (Parent, bool) {
	for i := len(p.Parents) - 1; i >= 0; i-- {
		if p.Parents[i].Kind == kind {
			return p.Parents[i], true
		}
	}
	return Parent{}, false
}

// Agent is a resource agent "class[:provider]:type".
type Agent struct {
	Class    string
	Provider string
	Type     string
}

// ParseAgent splits a resource_agent attribute. Older tools printed
// "ocf::heartbeat:X"; the doubled colon is normalised.
func ParseAgent(s string) Agent {
	s = strings.ReplaceAll(s, "::", ":")
	parts := strings.SplitN(s, ":", 3)
	switch len(parts) {
	case 3:
		return Agent{Class: strings.ToLower(parts[0]), Provider: parts[1], Type: parts[2]}
	case 2:
		return Agent{Class: strings.ToLower(parts[0]), Type: parts[1]}
	default:
		return Agent{Type: s}
	}
}

func (a Agent) String() string {
	if a.Provider != "" {
		return a.Class + ":" + a.Provider + ":" + a.Type
	}
	if a.Class == "" {
		return a.Type
	}
	return a.Class + ":" + a.Type
}

// IsStonith reports whether the agent is a fencing device.
func (a Agent) IsStonith() bool { return a.Class == "stonith" }

// ResourceHistory is a <resource_history> of one node.
type ResourceHistory struct {
	Node      string
	Resource  string
	FailCount string
	// LastFailure is zero when not reported or unparsable.
	LastFailure time.Time
	Operations  []Operation
}

// Operation is an <operation_history> entry.
type Operation struct {
	Call     int
	Task     string
	Interval time.Duration
	RC       int
	RCText   string
	// LastRCChange is zero when not reported or unparsable.
	LastRCChange time.Time
}

// Failure is a <failure>: the last unexpected result of an operation.
type Failure struct {
	// Resource is the resource id the failed operation belongs to.
	Resource   string
	OpKey      string
	Node       string
	Task       string
	Interval   time.Duration
	ExitStatus string
	ExitReason string
	ExitCode   int
	Call       int
	Status     string
	// LastRCChange is zero when not reported or unparsable.
	LastRCChange time.Time
}

// FenceEvent is a <fence_event>.
type FenceEvent struct {
	// Status is "success", "failed" or "pending" (lower case).
	Status     string
	Action     string
	Target     string
	Delegate   string
	Origin     string
	Client     string
	ExitReason string
	// Completed is zero for pending events or when unparsable.
	Completed time.Time
}

// Ban is a location constraint with a negative score that crm_mon lists.
type Ban struct {
	ID       string
	Resource string
	Node     string
	Weight   int
}

// Infinity is pacemaker's INFINITY score; a ban of -Infinity forbids the node.
const Infinity = 1000000
