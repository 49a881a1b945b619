package model

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/cib"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/corosync"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
)

var tnf = Mapping{
	Kubelet: Matcher{Agent: "systemd:kubelet"},
	Etcd:    Matcher{Agent: "ocf:heartbeat:podman-etcd"},
}

// doc wraps resources and extra sections in a two-node crm_mon document.
func doc(t *testing.T, resources, extra string) *crmmon.Document {
	t.Helper()
	d, err := crmmon.Parse([]byte(`<pacemaker-result api-version="2.25">
  <summary><current_dc present="true" name="a" with_quorum="true"/>
    <cluster_options stonith-enabled="true" maintenance-mode="false" stop-all-resources="false"/></summary>
  <nodes>
    <node name="a" id="1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="true" type="member"/>
    <node name="b" id="2" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="false" type="member"/>
  </nodes>
  <resources>`+resources+`</resources>`+extra+`
  <status code="0" message="OK"/>
</pacemaker-result>`), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if err := crmmon.Check(d, 0); err != nil {
		t.Fatal(err)
	}
	return d
}

func res(id, agent, role string, nodes ...string) string {
	active := "false"
	if len(nodes) > 0 {
		active = "true"
	}
	s := fmt.Sprintf(`<resource id=%q resource_agent=%q role=%q active=%q orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="%d">`,
		id, agent, role, active, len(nodes))
	for _, n := range nodes {
		s += fmt.Sprintf(`<node name=%q id="x" cached="true"/>`, n)
	}
	return s + `</resource>`
}

func node(t *testing.T, c *Cluster, name string) *Node {
	t.Helper()
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			return &c.Nodes[i]
		}
	}
	t.Fatalf("node %s not in %v", name, c.Nodes)
	return nil
}

func TestPlacement(t *testing.T) {
	tests := []struct {
		name      string
		resources string
		extra     string
		node      string
		check     func(t *testing.T, r Resource)
	}{
		{
			name:      "stopped anonymous instance belongs to the node without one",
			resources: `<clone id="etcd-clone">` + res("etcd", "ocf:heartbeat:podman-etcd", "Started", "a") + res("etcd", "ocf:heartbeat:podman-etcd", "Stopped") + `</clone>`,
			node:      "b",
			check: func(t *testing.T, r Resource) {
				if r.Placement != Stopped || r.Role != crmmon.RoleStopped || r.Failure != nil {
					t.Errorf("got %+v, want a stopped, unfailed instance", r)
				}
			},
		},
		{
			name:      "primitive running on the other node only",
			resources: res("etcd", "ocf:heartbeat:podman-etcd", "Started", "a"),
			node:      "b",
			check: func(t *testing.T, r Resource) {
				if r.Placement != Elsewhere || !slices.Equal(r.RunsOn, []string{"a"}) || !r.Active.IsFalse() {
					t.Errorf("got %+v, want Elsewhere on a", r)
				}
			},
		},
		{
			name:      "unique clone instances match by primitive id",
			resources: `<clone id="etcd-clone">` + res("etcd:0", "ocf:heartbeat:podman-etcd", "Started", "a") + res("etcd:1", "ocf:heartbeat:podman-etcd", "Started", "b") + `</clone>`,
			extra:     `<failures><failure op_key="etcd:1_monitor_30000" node="b" exitstatus="error" exitreason="gone" exitcode="1" call="9" status="complete" interval="30000" task="monitor"/></failures>`,
			node:      "b",
			check: func(t *testing.T, r Resource) {
				if r.Placement != Here || r.Failure == nil || r.Failure.ExitReason != "gone" || !slices.Equal(r.IDs, []string{"etcd"}) {
					t.Errorf("got %+v, want etcd:1 with its failure", r)
				}
			},
		},
		{
			name:      "failure superseded by a later successful monitor",
			resources: res("etcd", "ocf:heartbeat:podman-etcd", "Started", "b"),
			extra: `<node_history><node name="b"><resource_history id="etcd" orphan="false" migration-threshold="3" fail-count="1">
				<operation_history call="5" task="monitor" interval="30000ms" rc="1" rc_text="error"/>
				<operation_history call="7" task="start" rc="0" rc_text="ok"/>
				<operation_history call="8" task="monitor" interval="30000ms" rc="0" rc_text="ok"/>
			</resource_history></node></node_history>
			<failures><failure op_key="etcd_monitor_30000" node="b" exitstatus="error" exitreason="x" exitcode="1" call="5" status="complete" interval="30000" task="monitor"/></failures>`,
			node: "b",
			check: func(t *testing.T, r Resource) {
				if r.Failure != nil || r.Recovered == nil || r.FailCount != "1" {
					t.Errorf("got failure %v recovered %v count %q, want recovered", r.Failure, r.Recovered, r.FailCount)
				}
			},
		},
		{
			name:      "failure of a stop is not a failed start or monitor",
			resources: res("etcd", "ocf:heartbeat:podman-etcd", "Started", "b"),
			extra:     `<failures><failure op_key="etcd_stop_0" node="b" exitstatus="error" exitreason="x" exitcode="1" call="5" status="complete" interval="0" task="stop"/></failures>`,
			node:      "b",
			check: func(t *testing.T, r Resource) {
				if r.Failure != nil {
					t.Errorf("failure = %+v", r.Failure)
				}
			},
		},
		{
			name:      "a failed twin is not hidden behind a healthy one",
			resources: res("etcd-a", "ocf:heartbeat:podman-etcd", "Started", "a") + strings.Replace(res("etcd-b", "ocf:heartbeat:podman-etcd", "Started", "a"), `failed="false"`, `failed="true"`, 1),
			node:      "a",
			check: func(t *testing.T, r Resource) {
				if !r.Failed.IsTrue() || len(r.IDs) != 2 {
					t.Errorf("got %+v, want the failed instance", r)
				}
			},
		},
		{
			name:      "banned from the node",
			resources: `<clone id="etcd-clone">` + res("etcd", "ocf:heartbeat:podman-etcd", "Stopped") + `</clone>`,
			extra:     `<bans><ban id="cli-ban-etcd-clone-on-b" resource="etcd-clone" node="b" weight="-1000000" promoted-only="false"/><ban id="soft" resource="etcd-clone" node="a" weight="-100" promoted-only="false"/></bans>`,
			node:      "b",
			check: func(t *testing.T, r Resource) {
				if r.Banned != "cli-ban-etcd-clone-on-b" {
					t.Errorf("banned = %q", r.Banned)
				}
			},
		},
		{
			name:      "not configured",
			resources: res("kubelet", "systemd:kubelet", "Started", "a"),
			node:      "a",
			check: func(t *testing.T, r Resource) {
				if r.Placement != Missing {
					t.Errorf("got %+v, want Missing", r)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Build(Input{Doc: doc(t, tt.resources, tt.extra)}, tnf)
			tt.check(t, node(t, c, tt.node).Etcd)
		})
	}
}

func TestMatcher(t *testing.T) {
	p := crmmon.Primitive{ID: "etcd", Agent: crmmon.ParseAgent("ocf:heartbeat:podman-etcd"),
		Parents: []crmmon.Parent{{Kind: crmmon.KindClone, ID: "etcd-clone"}}}
	fence := crmmon.Primitive{ID: "etcd", Agent: crmmon.ParseAgent("stonith:fence_redfish")}
	tests := []struct {
		m    Matcher
		p    *crmmon.Primitive
		want bool
	}{
		{Matcher{Agent: "ocf:heartbeat:podman-etcd"}, &p, true},
		{Matcher{Agent: "OCF::heartbeat:Podman-Etcd"}, &p, true},
		{Matcher{Agent: "ocf:*:podman-etcd"}, &p, true},
		{Matcher{Agent: "ocf:heartbeat:podman"}, &p, false},
		{Matcher{Agent: "ocf:heartbeat:podman-etcd", IDs: []string{"other"}}, &p, false},
		{Matcher{IDs: []string{"etcd-clone"}}, &p, true},
		{Matcher{IDs: []string{"etcd"}}, &fence, false},
		{Matcher{Agent: "*:*:*"}, &fence, false},
	}
	for _, tt := range tests {
		if got := tt.m.Match(tt.p); got != tt.want {
			t.Errorf("%+v.Match(%s %s) = %v, want %v", tt.m, tt.p.ID, tt.p.Agent, got, tt.want)
		}
	}
}

func TestFencingTargetsAndMethods(t *testing.T) {
	devices := res("m0_redfish", "stonith:fence_redfish", "Started", "b") +
		res("rack", "stonith:fence_ipmilan", "Started", "a") +
		res("pattern-dev", "stonith:fence_idrac", "Started", "a") +
		res("B_ipmi", "stonith:fence_dummy", "Started", "a") +
		res("sbd", "stonith:fence_sbd", "Started", "a") +
		res("orphan-dev", "stonith:fence_redfish", "Started", "a")
	cfg := &cib.Config{
		Primitives: map[string]cib.Primitive{
			"m0_redfish": {Params: map[string]string{"pcmk_host_list": "A, z"}},
			"rack":       {Params: map[string]string{"pcmk_host_map": "a=1;b:2,unknown:3"}},
			"sbd":        {Params: map[string]string{"pcmk_host_list": "a b"}},
		},
		FencingLevels: []cib.FencingLevel{{TargetPattern: "^[ab]$", Pattern: regexp.MustCompile("^[ab]$"), Devices: []string{"pattern-dev"}}},
	}
	c := Build(Input{Doc: doc(t, devices, ""), CIB: cfg}, tnf)
	got := map[string][]string{}
	for _, n := range c.Nodes {
		for _, d := range n.Devices {
			got[n.Name] = append(got[n.Name], fmt.Sprintf("%s:%s:%s", d.ID, d.Method, d.TargetsFrom))
		}
	}
	want := map[string][]string{
		"a": {"m0_redfish:Redfish:pcmk_host_list", "rack:IPMI:pcmk_host_map", "pattern-dev:IPMI:fencing topology", "sbd::pcmk_host_list"},
		"b": {"rack:IPMI:pcmk_host_map", "pattern-dev:IPMI:fencing topology", "B_ipmi:IPMI:<node>_<method> id convention", "sbd::pcmk_host_list"},
	}
	for n, w := range want {
		if !slices.Equal(got[n], w) {
			t.Errorf("node %s devices = %v\nwant %v", n, got[n], w)
		}
	}
	if len(c.UntargetedDevices) != 1 || c.UntargetedDevices[0].ID != "orphan-dev" {
		t.Errorf("untargeted = %+v", c.UntargetedDevices)
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "orphan-dev: no target node found") {
		t.Errorf("notes = %q", c.Notes)
	}
}

// pcmk_host_map is read as pacemaker's fencer reads it: a comma is part
// of a port list, not a separator.
func TestHostMapNames(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"a:1;b:2", []string{"a", "b"}},
		{"a=1 b=2\tc:3", []string{"a", "b", "c"}},
		{" a:1 ;  b:2 ", []string{"a", "b"}},
		{"a:1,b:2", []string{"a"}},        // one mapping: a -> "1,b:2"
		{"a:1,2;b:3", []string{"a", "b"}}, // a's port list "1,2"
		{"a: b:2", []string{"b"}},         // "a:" has no port: malformed
		{":1;=2;b", nil},                  // no names, no port
		{"node.example.com:plug-1", []string{"node.example.com"}},
	} {
		if got := hostMapNames(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("hostMapNames(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A node's fencing levels are collected by target and by pattern, lowest
// index first.
func TestFencingLevelsPerNode(t *testing.T) {
	devices := res("pdu-a", "stonith:fence_ipmilan", "Started", "a") + res("pdu-b", "stonith:fence_ipmilan", "Started", "b") +
		res("bmc-a", "stonith:fence_redfish", "Started", "b")
	cfg := &cib.Config{
		Primitives: map[string]cib.Primitive{},
		FencingLevels: []cib.FencingLevel{
			{Index: 2, Target: "A", Devices: []string{"pdu-a", "pdu-b"}},
			{Index: 1, TargetPattern: "^a$", Pattern: regexp.MustCompile("^a$"), Devices: []string{"bmc-a"}},
			{Index: 1, Target: "b", Devices: []string{"pdu-b"}},
		},
	}
	c := Build(Input{Doc: doc(t, devices, ""), CIB: cfg}, tnf)
	got := map[string]string{}
	for _, n := range c.Nodes {
		got[n.Name] = fmt.Sprint(n.FencingLevels)
	}
	want := map[string]string{"a": "[{1 [bmc-a]} {2 [pdu-a pdu-b]}]", "b": "[{1 [pdu-b]}]"}
	if !maps.Equal(got, want) {
		t.Errorf("levels = %v, want %v", got, want)
	}
}

func TestDeviceFailureElsewhere(t *testing.T) {
	// The device failed to start on b, then started on a: it can fence.
	resources := res("a_redfish", "stonith:fence_redfish", "Started", "a")
	extra := `<failures><failure op_key="a_redfish_start_0" node="b" exitstatus="error" exitreason="login failed" exitcode="1" call="3" status="complete" interval="0" task="start"/></failures>`
	c := Build(Input{Doc: doc(t, resources, extra)}, tnf)
	d := node(t, c, "a").Devices[0]
	if d.Failure != nil || d.Recovered == nil || d.Recovered.ExitReason != "login failed" {
		t.Errorf("failure %v recovered %v; a device running healthy elsewhere is operational", d.Failure, d.Recovered)
	}
	// Not running anywhere: the failure stands.
	c = Build(Input{Doc: doc(t, res("a_redfish", "stonith:fence_redfish", "Stopped"), extra)}, tnf)
	if d := node(t, c, "a").Devices[0]; d.Failure == nil {
		t.Error("failure of a stopped device was dropped")
	}
}

func TestAddresses(t *testing.T) {
	etcd := `<clone id="etcd-clone">` + res("etcd", "ocf:heartbeat:podman-etcd", "Started", "a") + res("etcd", "ocf:heartbeat:podman-etcd", "Started", "b") + `</clone>`
	cfgMap := func(v string) *cib.Config {
		return &cib.Config{Primitives: map[string]cib.Primitive{"etcd": {Params: map[string]string{"node_ip_map": v}}}}
	}
	tests := []struct {
		name     string
		in       Input
		node     string
		want     []string
		source   string
		problems string
	}{
		{"node_ip_map with IPv6", Input{CIB: cfgMap("a:2001:db8::a;b:192.0.2.2"), CorosyncProblem: "not read"}, "a", []string{"2001:db8::a"}, SourceNodeIPMap, "corosync nodelist: not read"},
		{"corosync by nodeid, all links", Input{Corosync: nodesWith("other-name", "1", "192.0.2.1", "2001:db8::1")}, "a", []string{"192.0.2.1", "2001:db8::1"}, SourceCorosync, ""},
		{"corosync host names fall through", Input{Corosync: nodesWith("a", "1", "a.example.com"), CIB: cfgMap("a:192.0.2.9")}, "a", []string{"192.0.2.9"}, SourceNodeIPMap, `"a.example.com" is not an IP address`},
		{"canonicalised and deduplicated", Input{Corosync: nodesWith("a", "1", "2001:0db8::1", "2001:db8::1", "::ffff:192.0.2.7")}, "a", []string{"2001:db8::1", "192.0.2.7"}, SourceCorosync, ""},
		{"nothing usable", Input{Corosync: nodesWith("a", "1", "127.0.0.1", "fe80::1%eth0", "224.0.0.1", "0.0.0.0"), CIB: cfgMap("b:192.0.2.2")}, "a", nil, "", "node_ip_map of the etcd resource: no entry for this node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Doc = doc(t, etcd, "")
			n := node(t, Build(tt.in, tnf), tt.node)
			var got []string
			for _, a := range n.Addresses {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tt.want) || n.AddressSource != tt.source {
				t.Errorf("addresses %v from %q, want %v from %q (problems %q)", got, n.AddressSource, tt.want, tt.source, n.AddressProblems)
			}
			if !strings.Contains(strings.Join(n.AddressProblems, "; "), tt.problems) {
				t.Errorf("problems = %q, want %q", n.AddressProblems, tt.problems)
			}
		})
	}
}

func nodesWith(name, id string, addrs ...string) []corosync.Node {
	return []corosync.Node{{Name: name, ID: id, Addrs: addrs}}
}

func TestUsableLimit(t *testing.T) {
	var raw []string
	for i := range MaxAddresses + 2 {
		raw = append(raw, netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}).String())
	}
	addrs, rejected := usable(raw)
	if len(addrs) != MaxAddresses || len(rejected) != 2 {
		t.Errorf("kept %d, rejected %d; want %d and 2", len(addrs), len(rejected), MaxAddresses)
	}
}

func TestGuestNodesAreNotHosts(t *testing.T) {
	d := doc(t, `<bundle id="db" type="podman" image="x" unique="false" managed="true" failed="false"><replica id="0">`+
		res("etcd", "ocf:heartbeat:podman-etcd", "Started", "db-0")+
		res("db-podman-0", "ocf:heartbeat:podman", "Started", "b")+
		res("db-0", "ocf:pacemaker:remote", "Started", "b")+`</replica></bundle>`+
		res("vm", "ocf:heartbeat:VirtualDomain", "Started", "a"), "")
	d.Nodes = append(d.Nodes,
		crmmon.Node{Name: "db-0", Type: "member", Online: crmmon.True},
		crmmon.Node{Name: "guest-vm", Type: "remote", Container: "vm"},
		crmmon.Node{Name: "remote-host", Type: "remote", Online: crmmon.True})
	c := Build(Input{Doc: d}, tnf)
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "remote-host"}) {
		t.Errorf("nodes = %v, want hosts and the pacemaker_remote node, without guests", names)
	}
	if r := node(t, c, "b").Etcd; r.Placement != Here {
		t.Errorf("etcd in the bundle on b = %+v, want Here (its container runs on b)", r)
	}
}

func TestPendingNodeStandby(t *testing.T) {
	d := doc(t, "", "")
	d.Nodes[1].Pending, d.Nodes[1].Standby = crmmon.True, crmmon.True
	cfg := &cib.Config{NodeAttributes: map[string]map[string]string{"a": {"standby": "on"}}}
	c := Build(Input{Doc: d, CIB: cfg}, tnf)
	if got := node(t, c, "b").ConfiguredStandby; got != crmmon.Unknown {
		t.Errorf("b configured standby = %v, want unknown", got)
	}
	if got := node(t, c, "a").ConfiguredStandby; got != crmmon.True {
		t.Errorf("a configured standby = %v, want true", got)
	}
}

func TestMaintenanceAndDisabledReasons(t *testing.T) {
	d := doc(t, `<clone id="etcd-clone">`+res("etcd", "ocf:heartbeat:podman-etcd", "Started", "a")+`</clone>`, "")
	// 2.1.5 prints no resource maintenance attribute; the CIB has it.
	cfg := &cib.Config{Meta: map[string]map[string]string{"etcd-clone": {"maintenance": "true"}}}
	if got := node(t, Build(Input{Doc: d, CIB: cfg}, tnf), "a").Etcd.Maintenance; !strings.Contains(got, "etcd-clone has meta attribute maintenance=true") {
		t.Errorf("maintenance = %q", got)
	}
	d.Summary.StopAllResources = crmmon.True
	if got := node(t, Build(Input{Doc: d}, tnf), "a").Etcd.Disabled; !strings.Contains(got, "stop-all-resources") {
		t.Errorf("disabled = %q", got)
	}
}

func TestSelectorMatchingSeveralResourcesIsNoted(t *testing.T) {
	d := doc(t, res("etcd-a", "ocf:heartbeat:podman-etcd", "Started", "a")+res("etcd-b", "ocf:heartbeat:podman-etcd", "Started", "b"), "")
	c := Build(Input{Doc: d}, tnf)
	if notes := strings.Join(c.Notes, "\n"); !strings.Contains(notes, "Etcd: agent ocf:heartbeat:podman-etcd matches several resources (etcd-a, etcd-b)") {
		t.Errorf("notes = %q", notes)
	}
}
