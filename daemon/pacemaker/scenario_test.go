package pacemaker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScenarioConditions pins, per fixture, the conditions a user (and
// OpenShift's health check) acts on, including every known bug of the
// existing collector that must not come back. The golden files hold the
// whole object; this table says what matters in it.
func TestScenarioConditions(t *testing.T) {
	type want struct {
		path, typ string
		status    metav1.ConditionStatus
		reason    string
		// message, when set, must be contained in the condition's message.
		message string
	}
	const T, F = metav1.ConditionTrue, metav1.ConditionFalse
	tests := []struct {
		scenario string
		want     []want
	}{
		{"healthy", []want{
			{"", "Healthy", T, "ClusterHealthy", ""},
			{"master-0", "Healthy", T, "NodeHealthy", ""},
			{"master-1/agent/master-1_redfish", "Healthy", T, "ResourceHealthy", "master-1_redfish is healthy"},
		}},
		{"offline-clean", []want{
			{"master-1", "Online", F, "Offline", "left the cluster cleanly"},
			{"master-1", "Clean", T, "Clean", ""},
			// The stopped clone instance has no <node>; it is master-1's.
			{"master-1/resource/Kubelet", "Started", F, "Stopped", "node is offline"},
			{"master-1/resource/Kubelet", "Operational", T, "Operational", ""},
		}},
		{"unclean", []want{
			{"master-1", "Clean", F, "Unclean", "must be fenced"},
			{"master-1", "Online", F, "Offline", ""},
			{"master-1/resource/Etcd", "Active", T, "Active", "the node is unclean"},
			{"", "Healthy", F, "ClusterUnhealthy", "unhealthy nodes: master-1"},
		}},
		{"fenced", []want{
			{"master-1", "Online", F, "Offline", ""},
			{"master-1", "Clean", T, "Clean", ""},
		}},
		{"no-quorum", []want{
			// Stopped by no-quorum-policy: stopped, never "failed".
			{"master-0/resource/Etcd", "Started", F, "Stopped", "no quorum"},
			{"master-0/resource/Etcd", "Operational", T, "Operational", ""},
			{"", "Healthy", F, "ClusterUnhealthy", "has no quorum"},
		}},
		{"standby", []want{
			{"master-1", "Active", F, "Standby", ""},
			// Bug 1: plain standby is not "Kubelet has failed, Etcd has failed".
			{"master-1/resource/Kubelet", "Started", F, "Stopped", "node is in standby"},
			{"master-1/resource/Kubelet", "Operational", T, "Operational", ""},
			{"master-1/resource/Etcd", "Operational", T, "Operational", ""},
			{"master-1/resource/Etcd", "Enabled", T, "Enabled", ""},
		}},
		{"pending", []want{
			// Bug 2: pending implies standby in pacemaker; it is Ready=False only.
			{"master-1", "Ready", F, "Pending", ""},
			{"master-1", "Active", T, "Active", ""},
		}},
		{"node-maintenance", []want{
			{"master-1", "InService", F, "InMaintenance", ""},
			// Bug 4: 2.1.5 prints no resource maintenance attribute.
			{"master-1/resource/Etcd", "InService", F, "InMaintenance", "node master-1 is in maintenance"},
			{"master-1/resource/Etcd", "Managed", F, "Unmanaged", ""},
			{"master-0/resource/Etcd", "InService", T, "InService", ""},
			// master-0's device runs on master-1: unmanaged, still a fencer.
			{"master-0/agent/master-0_redfish", "Managed", F, "Unmanaged", ""},
			{"master-0", "FencingAvailable", T, "FencingAvailable", ""},
		}},
		{"cluster-maintenance", []want{
			{"", "InService", F, "InMaintenance", ""},
			{"master-0/resource/Kubelet", "InService", F, "InMaintenance", "cluster maintenance-mode"},
			// Bug 16: maintenance is not a fencing failure.
			{"master-0", "FencingAvailable", T, "FencingAvailable", ""},
			{"master-1", "FencingHealthy", T, "FencingHealthy", ""},
		}},
		{"failed-monitor", []want{
			{"master-1/resource/Etcd", "Operational", F, "Failed", "monitor of etcd failed on master-1 at 2020-01-01T10:01:00Z: Simulated action result"},
			{"master-1/resource/Etcd", "Started", T, "Started", ""},
			{"master-1", "Healthy", F, "NodeUnhealthy", "Etcd"},
			{"master-0/resource/Etcd", "Operational", T, "Operational", ""},
		}},
		{"failed-start", []want{
			{"master-1/resource/Etcd", "Operational", F, "Failed", "fail-count 1000000"},
			{"master-1/resource/Etcd", "Started", F, "Stopped", "its last start failed"},
		}},
		{"failed-fence-device", []want{
			{"master-1/agent/master-1_redfish", "Operational", F, "Failed", "start of master-1_redfish failed on master-0"},
			{"master-1", "FencingAvailable", F, "FencingUnavailable", ""},
			{"master-0", "FencingAvailable", T, "FencingAvailable", ""},
		}},
		{"disabled-resource", []want{
			{"master-0/resource/Etcd", "Enabled", F, "Disabled", "target-role=Stopped"},
			{"master-0/resource/Etcd", "Operational", T, "Operational", ""},
			{"master-0/resource/Kubelet", "Healthy", T, "ResourceHealthy", ""},
		}},
		{"banned", []want{
			{"master-1/resource/Etcd", "Schedulable", F, "Unschedulable", "cli-ban-etcd-clone-on-master-1"},
			{"master-0/resource/Etcd", "Schedulable", T, "Schedulable", ""},
		}},
		{"two-fence-devices", []want{
			// One of two devices failed: fenceable, but at risk.
			{"master-0", "FencingAvailable", T, "FencingAvailable", "master-0_redfish (Redfish)"},
			{"master-0", "FencingHealthy", F, "FencingUnhealthy", "ipmi-rack1"},
			{"master-0/agent/ipmi-rack1", "Operational", F, "Failed", ""},
			// Targets from the id convention and from fencing topology.
			{"master-1/agent/master-1_redfish", "Healthy", T, "ResourceHealthy", ""},
			{"master-1/agent/bmc-b", "Healthy", T, "ResourceHealthy", ""},
			{"master-1", "FencingHealthy", T, "FencingHealthy", "all 2 fencing devices"},
		}},
		{"group", []want{
			{"master-0/resource/Kubelet", "Healthy", T, "ResourceHealthy", ""},
			{"master-1/resource/Etcd", "Healthy", T, "ResourceHealthy", ""},
		}},
		{"bundle", []want{
			// Guest nodes are not hosts; etcd counts for the container's host.
			{"", "NodeCountAsExpected", T, "AsExpected", "pacemaker has 2"},
			{"master-0/resource/Etcd", "Started", T, "Started", ""},
			{"master-1/resource/Etcd", "Healthy", T, "ResourceHealthy", ""},
		}},
		{"no-address", []want{
			// Bug 7: no placeholder address; the node is omitted and named.
			{"", "NodeCountAsExpected", F, "InsufficientNodes", `master-1 (no valid address: corosync nodelist: not read`},
			{"", "NodeCountAsExpected", F, "InsufficientNodes", `"fe80::11" is not a global unicast address`},
		}},
		{"newer-pacemaker", []want{
			{"", "Healthy", T, "ClusterHealthy", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			_, obj := pollFixture(t, tt.scenario, nil)
			for _, w := range tt.want {
				got := find(t, obj, w.path, w.typ)
				if got.Status != w.status || got.Reason != w.reason || !strings.Contains(got.Message, w.message) {
					t.Errorf("%q %s = %s/%s %q; want %s/%s containing %q", w.path, w.typ, got.Status, got.Reason, got.Message, w.status, w.reason, w.message)
				}
			}
		})
	}
}

func TestAddressesAndAgents(t *testing.T) {
	tests := []struct {
		name      string
		scenario  string
		opts      func(*config.Pacemaker)
		node      string
		addresses []string
		agents    map[string]etcdv1.FencingMethod
	}{
		{"node_ip_map", "healthy", nil, "master-1", []string{"192.0.2.11"}, map[string]etcdv1.FencingMethod{"master-1_redfish": etcdv1.FencingMethodRedfish}},
		{"corosync first, ring0 first", "healthy", func(o *config.Pacemaker) { o.CorosyncConf = mustAbs("testdata/corosync.conf") },
			"master-0", []string{"2001:db8::10", "192.0.2.10"}, map[string]etcdv1.FencingMethod{"master-0_redfish": etcdv1.FencingMethodRedfish}},
		{"node_ip attribute", "no-address", nil, "master-0", []string{"2001:db8::10"}, map[string]etcdv1.FencingMethod{"master-0_redfish": etcdv1.FencingMethodRedfish}},
		{"host map and host list", "two-fence-devices", nil, "master-0", []string{"192.0.2.10"},
			map[string]etcdv1.FencingMethod{"master-0_redfish": etcdv1.FencingMethodRedfish, "ipmi-rack1": etcdv1.FencingMethodIPMI}},
		{"id convention and topology", "two-fence-devices", nil, "master-1", []string{"192.0.2.11"},
			map[string]etcdv1.FencingMethod{"master-1_redfish": etcdv1.FencingMethodRedfish, "bmc-b": etcdv1.FencingMethodIPMI}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, obj := pollFixture(t, tt.scenario, tt.opts)
			var node *etcdv1.PacemakerClusterNodeStatus
			for i := range *obj.Status.Nodes {
				if (*obj.Status.Nodes)[i].NodeName == tt.node {
					node = &(*obj.Status.Nodes)[i]
				}
			}
			if node == nil {
				t.Fatalf("node %s not reported", tt.node)
			}
			var addrs []string
			for _, a := range node.Addresses {
				addrs = append(addrs, a.Address)
			}
			if strings.Join(addrs, ",") != strings.Join(tt.addresses, ",") {
				t.Errorf("addresses = %v, want %v (first is the etcd peer address)", addrs, tt.addresses)
			}
			got := map[string]etcdv1.FencingMethod{}
			for _, a := range node.FencingAgents {
				got[a.Name] = a.Method
			}
			if len(got) != len(tt.agents) {
				t.Errorf("fencing agents = %v, want %v", got, tt.agents)
			}
			for name, m := range tt.agents {
				if got[name] != m {
					t.Errorf("agent %s method = %q, want %q (agents %v)", name, got[name], m, got)
				}
			}
		})
	}
}

// TestLastTransitionTimeCarriedOver follows a real sequence of states,
// healthy → failed monitor → healthy, feeding each built object back as
// the stored one: only conditions whose status changed get a new
// lastTransitionTime, and lastUpdated never goes backwards.
func TestLastTransitionTimeCarriedOver(t *testing.T) {
	t0 := fixtureNow
	steps := []struct {
		scenario string
		now      time.Time
	}{
		{"healthy", t0},
		{"failed-monitor", t0.Add(time.Minute)},
		{"failed-monitor", t0.Add(2 * time.Minute)},
		{"healthy", t0.Add(3 * time.Minute)},
		// A writer whose clock lags must not move lastUpdated back.
		{"healthy", t0.Add(-time.Hour)},
	}
	var prev *etcdv1.PacemakerCluster
	var built []*etcdv1.PacemakerCluster
	for _, st := range steps {
		c := fixtureCollector(t, st.scenario, nil)
		snap := c.Poll(context.Background())
		var stored status.Object // a nil *PacemakerCluster must stay a nil interface
		if prev != nil {
			stored = prev
		}
		obj, err := c.Build(snap, stored, st.now)
		if err != nil {
			t.Fatalf("%s at %s: %v", st.scenario, st.now, err)
		}
		prev = obj.(*etcdv1.PacemakerCluster)
		built = append(built, prev)
	}
	ltt := func(i int, path, typ string) time.Time {
		return find(t, built[i], path, typ).LastTransitionTime.Time
	}
	checks := []struct {
		step      int
		path, typ string
		want      time.Time
	}{
		{1, "master-1/resource/Etcd", "Operational", t0.Add(time.Minute)},
		{1, "master-1", "Healthy", t0.Add(time.Minute)},
		{1, "master-1", "Online", t0}, // unchanged status keeps its time
		{2, "master-1/resource/Etcd", "Operational", t0.Add(time.Minute)},
		{3, "master-1/resource/Etcd", "Operational", t0.Add(3 * time.Minute)},
		{3, "master-0/resource/Etcd", "Operational", t0},
		{4, "", "Healthy", t0.Add(3 * time.Minute)},
	}
	for _, c := range checks {
		if got := ltt(c.step, c.path, c.typ); !got.Equal(c.want) {
			t.Errorf("step %d %q %s lastTransitionTime = %s, want %s", c.step, c.path, c.typ, got, c.want)
		}
	}
	if got, want := built[4].Status.LastUpdated.Time, t0.Add(3*time.Minute); !got.Equal(want) {
		t.Errorf("lastUpdated after a lagging clock = %s, want the stored %s", got, want)
	}
}
