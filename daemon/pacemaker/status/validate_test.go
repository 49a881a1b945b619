package status

import (
	"strings"
	"testing"
	"time"

	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// validObject builds a valid two-node status to break.
func validObject(t *testing.T) *etcdv1.PacemakerCluster {
	t.Helper()
	obj, err := ToObject(Build(healthyCluster("master-0", "master-1"), 2, nil, now), VersionV1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*etcdv1.PacemakerCluster)
}

func dropConditionType(conds []metav1.Condition, typ string) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	return out
}

// dropEverywhere removes a condition type from every condition list.
func dropEverywhere(typ string) func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
	return func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		s := &o.Status
		s.Conditions = dropConditionType(s.Conditions, typ)
		for i := range *s.Nodes {
			n := &(*s.Nodes)[i]
			n.Conditions = dropConditionType(n.Conditions, typ)
			for j := range n.Resources {
				n.Resources[j].Conditions = dropConditionType(n.Resources[j].Conditions, typ)
			}
			for j := range n.FencingAgents {
				n.FencingAgents[j].Conditions = dropConditionType(n.FencingAgents[j].Conditions, typ)
			}
		}
		return nil
	}
}

// ruleViolations breaks each CEL rule of the CRD, keyed by the rule's
// message. A mutation may return the stored object to validate against.
var ruleViolations = map[string]func(o, stored *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster{
	"PacemakerCluster must be named 'cluster'": func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		o.Name = "pacemaker"
		return nil
	},
	"status may not be removed once set": func(o, stored *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		o.Status = etcdv1.PacemakerClusterStatus{}
		return stored
	},
	"lastUpdated may not be set to an earlier timestamp": func(o, stored *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		o.Status.LastUpdated = metav1.NewTime(stored.Status.LastUpdated.Add(-time.Second))
		return stored
	},
	"must be a valid global unicast IPv4 or IPv6 address in canonical form": func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		(*o.Status.Nodes)[0].Addresses[0].Address = "127.0.0.1"
		return nil
	},
	"nodeName must be a lowercase RFC 1123 subdomain consisting of lowercase alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character": func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		(*o.Status.Nodes)[0].NodeName = "Master_0"
		return nil
	},
	"resources must contain a resource named Kubelet": func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		n := &(*o.Status.Nodes)[0]
		n.Resources[0].Name = etcdv1.PacemakerClusterResourceNameEtcd
		return nil
	},
	"resources must contain a resource named Etcd": func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		n := &(*o.Status.Nodes)[0]
		n.Resources[1].Name = etcdv1.PacemakerClusterResourceNameKubelet
		return nil
	},
	"fencing agent names must be unique": func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		n := &(*o.Status.Nodes)[0]
		n.FencingAgents = append(n.FencingAgents, n.FencingAgents[0])
		return nil
	},
	"name must contain only alphanumeric characters, dots, hyphens, and underscores": func(o, _ *etcdv1.PacemakerCluster) *etcdv1.PacemakerCluster {
		(*o.Status.Nodes)[0].FencingAgents[0].Name = "bmc:0"
		return nil
	},
	"conditions must contain a condition of type Healthy":             dropEverywhere("Healthy"),
	"conditions must contain a condition of type InService":           dropEverywhere("InService"),
	"conditions must contain a condition of type NodeCountAsExpected": dropEverywhere("NodeCountAsExpected"),
	"conditions must contain a condition of type Online":              dropEverywhere("Online"),
	"conditions must contain a condition of type Active":              dropEverywhere("Active"),
	"conditions must contain a condition of type Ready":               dropEverywhere("Ready"),
	"conditions must contain a condition of type Clean":               dropEverywhere("Clean"),
	"conditions must contain a condition of type Member":              dropEverywhere("Member"),
	"conditions must contain a condition of type FencingAvailable":    dropEverywhere("FencingAvailable"),
	"conditions must contain a condition of type FencingHealthy":      dropEverywhere("FencingHealthy"),
	"conditions must contain a condition of type Managed":             dropEverywhere("Managed"),
	"conditions must contain a condition of type Enabled":             dropEverywhere("Enabled"),
	"conditions must contain a condition of type Operational":         dropEverywhere("Operational"),
	"conditions must contain a condition of type Started":             dropEverywhere("Started"),
	"conditions must contain a condition of type Schedulable":         dropEverywhere("Schedulable"),
}

func TestValidateRejectsEachCRDRule(t *testing.T) {
	for msg, violate := range ruleViolations {
		t.Run(msg, func(t *testing.T) {
			stored := validObject(t)
			obj := stored.DeepCopy()
			var prev Object
			if p := violate(obj, stored); p != nil {
				prev = p
			}
			err := Validate(obj, prev)
			if err == nil || !strings.Contains(err.Error(), msg) {
				t.Errorf("Validate = %v, want an error containing %q", err, msg)
			}
		})
	}
}

func TestValidateSchema(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(o *etcdv1.PacemakerCluster)
		wantErr string // empty: valid
	}{
		{"valid", func(*etcdv1.PacemakerCluster) {}, ""},
		{"IPv6 global", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].Addresses[0].Address = "2001:db8::1" }, ""},
		{"IPv6 not canonical", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].Addresses[0].Address = "2001:0db8::1" }, "canonical form"},
		{"IPv4 leading zeros", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].Addresses[0].Address = "192.168.001.001" }, "canonical form"},
		{"link-local", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].Addresses[0].Address = "fe80::1" }, "global unicast"},
		{"IPv4-mapped", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].Addresses[0].Address = "::ffff:192.0.2.1" }, "global unicast"},
		{"placeholder", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].Addresses[0].Address = "0.0.0.0" }, "global unicast"},
		{"no address", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].Addresses = nil }, "must have at least 1 items"},
		{"empty fencing agents", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].FencingAgents = nil }, "omitted from the JSON"},
		{"unknown method", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[0].FencingAgents[0].Method = "SBD" }, "Unsupported value"},
		{"bad reason", func(o *etcdv1.PacemakerCluster) { o.Status.Conditions[0].Reason = "Not OK" }, "reason"},
		{"bad status", func(o *etcdv1.PacemakerCluster) { o.Status.Conditions[0].Status = "Maybe" }, "Unsupported value"},
		{"duplicate condition", func(o *etcdv1.PacemakerCluster) {
			o.Status.Conditions = append(o.Status.Conditions, o.Status.Conditions[0])
		}, "Duplicate value"},
		{"no lastTransitionTime", func(o *etcdv1.PacemakerCluster) { o.Status.Conditions[0].LastTransitionTime = metav1.Time{} }, "lastTransitionTime: Required"},
		{"no lastUpdated", func(o *etcdv1.PacemakerCluster) { o.Status.LastUpdated = metav1.Time{} }, "lastUpdated: Required"},
		{"no nodes list", func(o *etcdv1.PacemakerCluster) { o.Status.Nodes = nil }, "status.nodes: Required"},
		{"six nodes", func(o *etcdv1.PacemakerCluster) {
			nodes := *o.Status.Nodes
			for i := range 4 {
				n := *nodes[0].DeepCopy()
				n.NodeName = "extra-" + string(rune('a'+i))
				nodes = append(nodes, n)
			}
			o.Status.Nodes = &nodes
		}, "Too many"},
		{"duplicate node", func(o *etcdv1.PacemakerCluster) { (*o.Status.Nodes)[1].NodeName = (*o.Status.Nodes)[0].NodeName }, "Duplicate value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validObject(t)
			tt.mutate(o)
			err := Validate(o, nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestObjectRoundTrip(t *testing.T) {
	s := Build(healthyCluster("master-0", "master-1"), 2, nil, now)
	for _, v := range versions {
		obj, err := ToObject(s, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := obj.GetObjectKind().GroupVersionKind(); got.Version != v || got.Group != "etcd.openshift.io" || got.Kind != "PacemakerCluster" {
			t.Errorf("%s: GVK = %v", v, got)
		}
		back, has, err := FromObject(obj)
		if err != nil || !has {
			t.Fatalf("%s: FromObject = %v, %v", v, has, err)
		}
		again, _ := ToObject(back, v, nil)
		if err := Validate(again, obj); err != nil {
			t.Errorf("%s: round trip is invalid: %v", v, err)
		}
	}
	if _, err := ToObject(s, "v2", nil); err == nil {
		t.Error("ToObject accepted an unknown version")
	}
}
