package status

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC)

const yes, no = crmmon.True, crmmon.False

func runningResource(id string) model.Resource {
	return model.Resource{Placement: model.Here, IDs: []string{id}, Role: crmmon.RoleStarted, RunsOn: []string{"x"},
		Active: yes, Managed: yes, Failed: no, Blocked: no}
}

func healthyNode(name string, addr string) model.Node {
	return model.Node{
		Name: name, Type: "member",
		Online: yes, Standby: no, StandbyOnFail: no, Maintenance: no, Pending: no, Unclean: no, ExpectedUp: yes,
		Addresses: []netip.Addr{netip.MustParseAddr(addr)},
		Kubelet:   runningResource("kubelet"),
		Etcd:      runningResource("etcd"),
		Devices: []model.Device{{ID: name + "_redfish", Type: "fence_redfish", Method: model.MethodRedfish,
			Targets: []string{name}, Resource: runningResource(name + "_redfish")}},
	}
}

func healthyCluster(nodes ...string) *model.Cluster {
	c := &model.Cluster{DCPresent: yes, WithQuorum: yes, MaintenanceMode: no, StonithEnabled: yes, StopAllResources: no,
		KubeletSelector: "agent systemd:kubelet", EtcdSelector: "agent ocf:heartbeat:podman-etcd"}
	for i, n := range nodes {
		c.Nodes = append(c.Nodes, healthyNode(n, fmt.Sprintf("192.0.2.%d", 10+i)))
	}
	return c
}

func cond(t *testing.T, conds []metav1.Condition, typ string) metav1.Condition {
	t.Helper()
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no condition %s in %v", typ, conds)
	return metav1.Condition{}
}

func mustValid(t *testing.T, s *Status) {
	t.Helper()
	obj, err := ToObject(s, VersionV1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(obj, nil); err != nil {
		t.Fatalf("built status is invalid: %v", err)
	}
}

func TestBuildAggregation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *model.Cluster)
		check  func(t *testing.T, s *Status)
	}{
		{
			name:   "healthy",
			mutate: func(*model.Cluster) {},
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Conditions, "Healthy"); c.Status != metav1.ConditionTrue {
					t.Errorf("cluster Healthy = %v", c)
				}
			},
		},
		{
			// Bug 8: a running but unmanaged etcd makes the node unhealthy.
			name:   "unmanaged etcd",
			mutate: func(c *model.Cluster) { c.Nodes[1].Etcd.Managed = no },
			check: func(t *testing.T, s *Status) {
				n := s.Nodes[1]
				if c := cond(t, n.Conditions, "Healthy"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "Etcd") {
					t.Errorf("node Healthy = %v, want False naming Etcd", c)
				}
				if c := cond(t, s.Conditions, "Healthy"); c.Status != metav1.ConditionFalse {
					t.Errorf("cluster Healthy = %v", c)
				}
			},
		},
		{
			// Bug 8: FencingHealthy is part of node health.
			name: "one of two devices failed",
			mutate: func(c *model.Cluster) {
				d := c.Nodes[0].Devices[0]
				d.ID, d.Failed = "bmc", yes
				c.Nodes[0].Devices = append(c.Nodes[0].Devices, d)
			},
			check: func(t *testing.T, s *Status) {
				n := s.Nodes[0]
				if c := cond(t, n.Conditions, "FencingAvailable"); c.Status != metav1.ConditionTrue {
					t.Errorf("FencingAvailable = %v", c)
				}
				if c := cond(t, n.Conditions, "FencingHealthy"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "bmc") {
					t.Errorf("FencingHealthy = %v", c)
				}
				if c := cond(t, n.Conditions, "Healthy"); c.Status != metav1.ConditionFalse {
					t.Errorf("node Healthy = %v", c)
				}
			},
		},
		{
			// A level needs all its devices: one healthy device of a level
			// whose other device failed cannot fence.
			name: "topology: the only level has a failed device",
			mutate: func(c *model.Cluster) {
				d := c.Nodes[0].Devices[0]
				d.ID, d.Failed = "pdu-a", yes
				c.Nodes[0].Devices = append(c.Nodes[0].Devices, d)
				c.Nodes[0].FencingLevels = []model.FencingLevel{{Index: 1, Devices: []string{"pdu-a", "master-0_redfish"}}}
			},
			check: func(t *testing.T, s *Status) {
				c := cond(t, s.Nodes[0].Conditions, "FencingAvailable")
				if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "level 1: pdu-a") {
					t.Errorf("FencingAvailable = %v, want False naming level 1 and pdu-a", c)
				}
			},
		},
		{
			name: "topology: a later level works",
			mutate: func(c *model.Cluster) {
				c.Nodes[0].FencingLevels = []model.FencingLevel{
					{Index: 1, Devices: []string{"gone"}},
					{Index: 2, Devices: []string{"master-0_redfish", "master-1_redfish"}},
				}
			},
			check: func(t *testing.T, s *Status) {
				c := cond(t, s.Nodes[0].Conditions, "FencingAvailable")
				if c.Status != metav1.ConditionTrue || c.Message != "can be fenced by fencing level 2: master-0_redfish (Redfish) and master-1_redfish (Redfish)" {
					t.Errorf("FencingAvailable = %v", c)
				}
			},
		},
		{
			name: "topology: no level works",
			mutate: func(c *model.Cluster) {
				c.Nodes[0].FencingLevels = []model.FencingLevel{{Index: 1, Devices: []string{"gone"}}}
			},
			check: func(t *testing.T, s *Status) {
				c := cond(t, s.Nodes[0].Conditions, "FencingAvailable")
				if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "level 1: gone is not a configured fencing device") {
					t.Errorf("FencingAvailable = %v", c)
				}
			},
		},
		{
			// Without the CIB no host list was checked; do not claim it.
			name: "CIB unreadable, no device by id",
			mutate: func(c *model.Cluster) {
				c.CIBProblem = "cibadmin exited 102 (not connected)"
				c.Nodes[0].Devices = nil
			},
			check: func(t *testing.T, s *Status) {
				c := cond(t, s.Conditions, "NodeCountAsExpected")
				if !strings.Contains(c.Message, "the CIB could not be read (cibadmin exited 102 (not connected))") || strings.Contains(c.Message, "checked pcmk_host_list") {
					t.Errorf("NodeCountAsExpected = %v", c)
				}
			},
		},
		{
			// crm_mon reports a blocked resource as unmanaged: say why.
			name: "etcd blocked and banned",
			mutate: func(c *model.Cluster) {
				e := &c.Nodes[1].Etcd
				e.Managed, e.Blocked, e.Banned = no, yes, "cli-ban-etcd-on-master-1"
			},
			check: func(t *testing.T, s *Status) {
				r := s.Nodes[1].Resources[1].Conditions
				if c := cond(t, r, "Managed"); c.Status != metav1.ConditionFalse || strings.Contains(c.Message, "is-managed") || !strings.Contains(c.Message, "blocked") {
					t.Errorf("Managed = %v", c)
				}
				if c := cond(t, r, "Schedulable"); !strings.Contains(c.Message, "cli-ban-etcd-on-master-1") || !strings.Contains(c.Message, "is blocked") {
					t.Errorf("Schedulable = %v, want the ban and the block", c)
				}
			},
		},
		{
			// With no-quorum-policy=ignore lost quorum stops nothing, so it
			// is not named as the reason etcd is stopped.
			name: "no quorum, policy ignore",
			mutate: func(c *model.Cluster) {
				c.WithQuorum, c.NoQuorumPolicy = no, "ignore"
				c.Nodes[1].Etcd.Placement, c.Nodes[1].Etcd.Role = model.Stopped, crmmon.RoleStopped
			},
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Nodes[1].Resources[1].Conditions, "Started"); c.Status != metav1.ConditionFalse || strings.Contains(c.Message, "quorum") {
					t.Errorf("Started = %v", c)
				}
			},
		},
		{
			name: "no quorum, policy stop",
			mutate: func(c *model.Cluster) {
				c.WithQuorum, c.NoQuorumPolicy = no, "stop"
				c.Nodes[1].Etcd.Placement, c.Nodes[1].Etcd.Role = model.Stopped, crmmon.RoleStopped
			},
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Nodes[1].Resources[1].Conditions, "Started"); !strings.Contains(c.Message, "no-quorum-policy is stop") {
					t.Errorf("Started = %v", c)
				}
			},
		},
		{
			// A pending promote or demote runs throughout.
			name:   "etcd being promoted",
			mutate: func(c *model.Cluster) { c.Nodes[1].Etcd.Role = "Promoting" },
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Nodes[1].Resources[1].Conditions, "Started"); c.Status != metav1.ConditionTrue {
					t.Errorf("Started = %v", c)
				}
				if c := cond(t, s.Conditions, "Healthy"); c.Status != metav1.ConditionTrue {
					t.Errorf("cluster Healthy = %v", c)
				}
			},
		},
		{
			name:   "etcd stopping",
			mutate: func(c *model.Cluster) { c.Nodes[1].Etcd.Role = "Stopping" },
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Nodes[1].Resources[1].Conditions, "Started"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "Stopping") {
					t.Errorf("Started = %v", c)
				}
			},
		},
		{
			name:   "stonith disabled",
			mutate: func(c *model.Cluster) { c.StonithEnabled = no },
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Nodes[0].Conditions, "FencingAvailable"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "stonith-enabled") {
					t.Errorf("FencingAvailable = %v", c)
				}
			},
		},
		{
			// Bug 14: a missing resource is inactive and stopped, not failed.
			name:   "no etcd resource configured",
			mutate: func(c *model.Cluster) { c.Nodes[0].Etcd = model.Resource{Placement: model.Missing} },
			check: func(t *testing.T, s *Status) {
				r := s.Nodes[0].Resources[1]
				want := map[string]metav1.ConditionStatus{
					"Healthy": metav1.ConditionFalse, "Operational": metav1.ConditionTrue, "Active": metav1.ConditionFalse,
					"Started": metav1.ConditionFalse, "Managed": metav1.ConditionUnknown, "InService": metav1.ConditionTrue,
				}
				for typ, st := range want {
					if c := cond(t, r.Conditions, typ); c.Status != st {
						t.Errorf("Etcd %s = %s (%s), want %s", typ, c.Status, c.Message, st)
					}
				}
				if c := cond(t, r.Conditions, "Started"); !strings.Contains(c.Message, "no pacemaker resource matches agent ocf:heartbeat:podman-etcd") {
					t.Errorf("Started message = %q", c.Message)
				}
			},
		},
		{
			// Bug 17: a missing attribute is unknown, never silently false.
			name:   "unknown node flag",
			mutate: func(c *model.Cluster) { c.Nodes[0].Unclean = crmmon.Unknown },
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Nodes[0].Conditions, "Clean"); c.Status != metav1.ConditionUnknown || c.Reason != "Unclean" {
					t.Errorf("Clean = %v, want Unknown with the API's False reason", c)
				}
				if c := cond(t, s.Nodes[0].Conditions, "Healthy"); c.Status != metav1.ConditionFalse {
					t.Errorf("Healthy = %v; unknown must not count as healthy", c)
				}
			},
		},
		{
			name:   "shutting down",
			mutate: func(c *model.Cluster) { c.Nodes[0].Shutdown = yes },
			check: func(t *testing.T, s *Status) {
				if c := cond(t, s.Nodes[0].Conditions, "Online"); c.Status != metav1.ConditionTrue || c.Message != "node is online and shutting down" {
					t.Errorf("Online = %v", c)
				}
			},
		},
		{
			name:   "mixed-case node name",
			mutate: func(c *model.Cluster) { c.Nodes[0].Name = "Master-0" },
			check: func(t *testing.T, s *Status) {
				if s.Nodes[0].Name != "master-0" {
					t.Errorf("node name = %q, want the Kubernetes form master-0", s.Nodes[0].Name)
				}
			},
		},
		{
			name: "node without a listable agent is omitted",
			mutate: func(c *model.Cluster) {
				c.Nodes[1].Devices[0].Method = "" // e.g. fence_sbd
				c.Nodes[1].Devices[0].Type = "fence_sbd"
				c.Nodes[1].Devices[0].ID = "sbd"
			},
			check: func(t *testing.T, s *Status) {
				if len(s.Nodes) != 1 {
					t.Fatalf("nodes = %d, want the node without agents omitted", len(s.Nodes))
				}
				if c := cond(t, s.Conditions, "NodeCountAsExpected"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "sbd (agent fence_sbd is neither Redfish nor IPMI)") {
					t.Errorf("NodeCountAsExpected = %v", c)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := healthyCluster("master-0", "master-1")
			tt.mutate(c)
			s := Build(c, 2, nil, now)
			mustValid(t, s)
			tt.check(t, s)
		})
	}
}

func TestBuildNodeCount(t *testing.T) {
	tests := []struct {
		nodes      int
		expected   int
		wantReason string
		wantListed int
	}{
		{2, 2, "AsExpected", 2},
		{1, 2, "InsufficientNodes", 1},
		{3, 2, "ExcessiveNodes", 3},
		// The API carries at most five nodes; the rest are named, not sent.
		{7, 2, "ExcessiveNodes", 5},
		{0, 2, "InsufficientNodes", 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d of %d", tt.nodes, tt.expected), func(t *testing.T) {
			var names []string
			for i := range tt.nodes {
				names = append(names, fmt.Sprintf("node-%d", i))
			}
			s := Build(healthyCluster(names...), tt.expected, nil, now)
			mustValid(t, s)
			c := cond(t, s.Conditions, "NodeCountAsExpected")
			if c.Reason != tt.wantReason || len(s.Nodes) != tt.wantListed {
				t.Errorf("reason %s with %d nodes listed, want %s with %d (%s)", c.Reason, len(s.Nodes), tt.wantReason, tt.wantListed, c.Message)
			}
			if s.Nodes == nil {
				t.Error("nodes is nil; an empty list must be sent as []")
			}
		})
	}
}

func TestBuildTruncatesLongMessages(t *testing.T) {
	c := healthyCluster("master-0", "master-1")
	c.Nodes[0].Etcd.Failed = yes
	c.Nodes[0].Etcd.Failure = &crmmon.Failure{Task: "start", Node: "master-0", ExitReason: strings.Repeat("é", 40000), ExitCode: 1}
	s := Build(c, 2, nil, now)
	mustValid(t, s)
	if m := cond(t, s.Nodes[0].Resources[1].Conditions, "Operational").Message; len(m) > maxMessage || !strings.HasSuffix(m, "…") {
		t.Errorf("message of %d bytes, want at most %d ending in an ellipsis", len(m), maxMessage)
	}
}
