// Package status builds the OpenShift PacemakerCluster status
// (etcd.openshift.io, singleton "cluster") from the pacemaker model: every
// condition the API requires, computed with the API's documented
// aggregation, lastTransitionTime carried over while a condition's status
// holds, and a Go check of the CRD's validation rules before anything is
// written.
//
// One internal Status is built and converted to the etcd/v1 or
// etcd/v1alpha1 types; the two schemas are identical.
package status

import (
	"fmt"

	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// API versions of the PacemakerCluster group that can be written.
const (
	VersionV1       = "v1"
	VersionV1alpha1 = "v1alpha1"
)

// ObjectName is the name of the singleton.
const ObjectName = "cluster"

// Object is what Build returns: a *etcdv1.PacemakerCluster or a
// *etcdv1alpha1.PacemakerCluster: a Kubernetes object with metadata.
type Object interface {
	runtime.Object
	metav1.Object
}

// Status is the version-independent form of PacemakerClusterStatus.
type Status struct {
	Conditions  []metav1.Condition
	LastUpdated metav1.Time
	// Nodes is never nil once built: the API distinguishes an empty list
	// (pacemaker reports no nodes) from an absent one.
	Nodes []Node
}

// Node is one entry of status.nodes.
type Node struct {
	Name          string
	Addresses     []string
	Conditions    []metav1.Condition
	Resources     []Resource
	FencingAgents []FencingAgent
}

// Resource is a Kubelet or Etcd entry of a node.
type Resource struct {
	Name       string
	Conditions []metav1.Condition
}

// FencingAgent is a fencing device that can fence the node.
type FencingAgent struct {
	Name       string
	Method     string
	Conditions []metav1.Condition
}

// ToObject wraps s in the typed object of the given API version. The
// metadata of prev (the stored object, may be nil) is kept, so that the
// result can be written as an update of it.
func ToObject(s *Status, version string, prev Object) (Object, error) {
	meta := metav1.ObjectMeta{Name: ObjectName}
	switch o := prev.(type) {
	case *etcdv1.PacemakerCluster:
		if o != nil && o.Name != "" {
			o.ObjectMeta.DeepCopyInto(&meta)
		}
	case *etcdv1alpha1.PacemakerCluster:
		if o != nil && o.Name != "" {
			o.ObjectMeta.DeepCopyInto(&meta)
		}
	}
	switch version {
	case VersionV1:
		o := toV1(s)
		o.ObjectMeta = meta
		return o, nil
	case VersionV1alpha1:
		o := toV1alpha1(s)
		o.ObjectMeta = meta
		return o, nil
	default:
		return nil, fmt.Errorf("unknown PacemakerCluster API version %q (want %s or %s)", version, VersionV1, VersionV1alpha1)
	}
}

// FromObject extracts the status of a typed object; a nil object (nothing
// stored yet) gives nil. hasStatus reports whether the object carried a
// status at all.
func FromObject(obj Object) (s *Status, hasStatus bool, err error) {
	switch o := obj.(type) {
	case nil:
		return nil, false, nil
	case *etcdv1.PacemakerCluster:
		if o == nil {
			return nil, false, nil
		}
		return fromV1(&o.Status), o.Status.Nodes != nil || len(o.Status.Conditions) > 0 || !o.Status.LastUpdated.IsZero(), nil
	case *etcdv1alpha1.PacemakerCluster:
		if o == nil {
			return nil, false, nil
		}
		return fromV1alpha1(&o.Status), o.Status.Nodes != nil || len(o.Status.Conditions) > 0 || !o.Status.LastUpdated.IsZero(), nil
	default:
		return nil, false, fmt.Errorf("unsupported object type %T", obj)
	}
}

// The converters below are written out per version on purpose: the two
// API packages define distinct (if identical) Go types, and a JSON round
// trip would cost more than the whole build.

func toV1(s *Status) *etcdv1.PacemakerCluster {
	nodes := make([]etcdv1.PacemakerClusterNodeStatus, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		out := etcdv1.PacemakerClusterNodeStatus{Conditions: n.Conditions, NodeName: n.Name}
		for _, a := range n.Addresses {
			out.Addresses = append(out.Addresses, etcdv1.PacemakerNodeAddress{Type: etcdv1.PacemakerNodeInternalIP, Address: a})
		}
		for _, r := range n.Resources {
			out.Resources = append(out.Resources, etcdv1.PacemakerClusterResourceStatus{Conditions: r.Conditions, Name: etcdv1.PacemakerClusterResourceName(r.Name)})
		}
		out.FencingAgents = make([]etcdv1.PacemakerClusterFencingAgentStatus, 0, len(n.FencingAgents))
		for _, a := range n.FencingAgents {
			out.FencingAgents = append(out.FencingAgents, etcdv1.PacemakerClusterFencingAgentStatus{Conditions: a.Conditions, Name: a.Name, Method: etcdv1.FencingMethod(a.Method)})
		}
		nodes = append(nodes, out)
	}
	return &etcdv1.PacemakerCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: etcdv1.GroupVersion.String(), Kind: "PacemakerCluster"},
		Status:   etcdv1.PacemakerClusterStatus{Conditions: s.Conditions, LastUpdated: s.LastUpdated, Nodes: &nodes},
	}
}

func fromV1(st *etcdv1.PacemakerClusterStatus) *Status {
	s := &Status{Conditions: st.Conditions, LastUpdated: st.LastUpdated}
	if st.Nodes == nil {
		return s
	}
	s.Nodes = make([]Node, 0, len(*st.Nodes))
	for _, n := range *st.Nodes {
		out := Node{Name: n.NodeName, Conditions: n.Conditions}
		for _, a := range n.Addresses {
			out.Addresses = append(out.Addresses, a.Address)
		}
		for _, r := range n.Resources {
			out.Resources = append(out.Resources, Resource{Name: string(r.Name), Conditions: r.Conditions})
		}
		for _, a := range n.FencingAgents {
			out.FencingAgents = append(out.FencingAgents, FencingAgent{Name: a.Name, Method: string(a.Method), Conditions: a.Conditions})
		}
		s.Nodes = append(s.Nodes, out)
	}
	return s
}

func toV1alpha1(s *Status) *etcdv1alpha1.PacemakerCluster {
	nodes := make([]etcdv1alpha1.PacemakerClusterNodeStatus, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		out := etcdv1alpha1.PacemakerClusterNodeStatus{Conditions: n.Conditions, NodeName: n.Name}
		for _, a := range n.Addresses {
			out.Addresses = append(out.Addresses, etcdv1alpha1.PacemakerNodeAddress{Type: etcdv1alpha1.PacemakerNodeInternalIP, Address: a})
		}
		for _, r := range n.Resources {
			out.Resources = append(out.Resources, etcdv1alpha1.PacemakerClusterResourceStatus{Conditions: r.Conditions, Name: etcdv1alpha1.PacemakerClusterResourceName(r.Name)})
		}
		out.FencingAgents = make([]etcdv1alpha1.PacemakerClusterFencingAgentStatus, 0, len(n.FencingAgents))
		for _, a := range n.FencingAgents {
			out.FencingAgents = append(out.FencingAgents, etcdv1alpha1.PacemakerClusterFencingAgentStatus{Conditions: a.Conditions, Name: a.Name, Method: etcdv1alpha1.FencingMethod(a.Method)})
		}
		nodes = append(nodes, out)
	}
	return &etcdv1alpha1.PacemakerCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "PacemakerCluster"},
		Status:   etcdv1alpha1.PacemakerClusterStatus{Conditions: s.Conditions, LastUpdated: s.LastUpdated, Nodes: &nodes},
	}
}

func fromV1alpha1(st *etcdv1alpha1.PacemakerClusterStatus) *Status {
	s := &Status{Conditions: st.Conditions, LastUpdated: st.LastUpdated}
	if st.Nodes == nil {
		return s
	}
	s.Nodes = make([]Node, 0, len(*st.Nodes))
	for _, n := range *st.Nodes {
		out := Node{Name: n.NodeName, Conditions: n.Conditions}
		for _, a := range n.Addresses {
			out.Addresses = append(out.Addresses, a.Address)
		}
		for _, r := range n.Resources {
			out.Resources = append(out.Resources, Resource{Name: string(r.Name), Conditions: r.Conditions})
		}
		for _, a := range n.FencingAgents {
			out.FencingAgents = append(out.FencingAgents, FencingAgent{Name: a.Name, Method: string(a.Method), Conditions: a.Conditions})
		}
		s.Nodes = append(s.Nodes, out)
	}
	return s
}
