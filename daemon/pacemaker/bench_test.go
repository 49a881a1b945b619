package pacemaker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/cib"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/corosync"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// Run: go test ./daemon/pacemaker -run '^$' -bench . -benchmem

var benchMapping = model.Mapping{
	Kubelet: model.Matcher{Agent: config.DefaultKubeletAgent},
	Etcd:    model.Matcher{Agent: config.DefaultEtcdAgent},
}

// parseAndBuild is the pure part of one poll plus Build: parse crm_mon's
// XML and the CIB, derive the model, build, convert and validate.
func parseAndBuild(b *testing.B, mon, cibXML []byte, nodes []corosync.Node) {
	doc, err := crmmon.Parse(mon, time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	if err := crmmon.Check(doc, 0); err != nil {
		b.Fatal(err)
	}
	in := model.Input{Doc: doc, Corosync: nodes}
	if cibXML != nil {
		if in.CIB, err = cib.Parse(cibXML); err != nil {
			b.Fatal(err)
		}
	}
	st := status.Build(model.Build(in, benchMapping), config.DefaultExpectedNodes, nil, fixtureNow)
	obj, err := status.ToObject(st, status.VersionV1, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := status.Validate(obj, nil); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkParseBuild(b *testing.B) {
	for _, name := range []string{"healthy", "failed-start", "two-fence-devices", "bundle"} {
		mon, err := os.ReadFile("testdata/crm_mon/" + name + ".xml")
		if err != nil {
			b.Fatal(err)
		}
		cibXML, err := os.ReadFile("testdata/cib/" + name + ".xml")
		if err != nil {
			b.Fatal(err)
		}
		b.Run("2-node/"+name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(mon) + len(cibXML)))
			for b.Loop() {
				parseAndBuild(b, mon, cibXML, nil)
			}
		})
	}
	mon, nodes := synthetic(5, 500)
	b.Run("5-node-500-resources", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(mon)))
		for b.Loop() {
			parseAndBuild(b, mon, nil, nodes)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	mon, _ := synthetic(32, 2000)
	b.Run("32-node-2000-resources", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(mon)))
		for b.Loop() {
			if _, err := crmmon.Parse(mon, time.UTC); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPoll is the wall time of one full poll with the real crm_mon
// (offline, over the healthy fixture CIB; a live cluster adds IPC time).
func BenchmarkPoll(b *testing.B) {
	c := fixtureCollector(b, "healthy", nil)
	for b.Loop() {
		if s := c.Poll(context.Background()); !s.Known {
			b.Fatal(s.Reason)
		}
	}
}

// synthetic renders a crm_mon document in 2.1.5's shape: kubelet and etcd
// clones across all nodes, one fencing device per node, and cloned groups
// filling up to the resource count, every instance with its operation
// history; plus a corosync node list giving each node an address.
func synthetic(nodes, resources int) ([]byte, []corosync.Node) {
	var b bytes.Buffer
	b.WriteString(`<pacemaker-result api-version="2.25" request="crm_mon --one-shot --inactive --output-as=xml">
  <summary>
    <stack type="corosync"/>
    <current_dc present="true" version="2.1.5" name="node-0" id="1" with_quorum="true" mixed_version="false"/>
    <last_update time="Wed Jan  1 10:30:00 2020"/>
    <last_change time="Wed Jan  1 10:00:00 2020" user="root" client="cibadmin" origin="node-0"/>
    <cluster_options stonith-enabled="true" symmetric-cluster="true" no-quorum-policy="stop" maintenance-mode="false" stop-all-resources="false" stonith-timeout-ms="60000" priority-fencing-delay-ms="0"/>
  </summary>
  <nodes>
`)
	var cs []corosync.Node
	for i := range nodes {
		fmt.Fprintf(&b, `    <node name="node-%d" id="%d" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" health="green" feature_set="3.16.1" shutdown="false" expected_up="true" is_dc="%t" resources_running="%d" type="member"/>
`, i, i+1, i == 0, resources/nodes)
		cs = append(cs, corosync.Node{Name: fmt.Sprintf("node-%d", i), ID: fmt.Sprint(i + 1), Addrs: []string{fmt.Sprintf("192.0.2.%d", i+1)}})
	}
	b.WriteString("  </nodes>\n  <resources>\n")
	type placed struct{ id, node string }
	var history []placed
	instance := func(id, agent, node string) {
		fmt.Fprintf(&b, `      <resource id="%s" resource_agent="%s" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1">
        <node name="%s" id="1" cached="true"/>
      </resource>
`, id, agent, node)
		history = append(history, placed{id, node})
	}
	count := 0
	for i := range nodes {
		instance(fmt.Sprintf("node-%d_redfish", i), "stonith:fence_redfish", fmt.Sprintf("node-%d", (i+1)%nodes))
		count++
	}
	for _, r := range []struct{ id, agent string }{{"kubelet", "systemd:kubelet"}, {"etcd", "ocf:heartbeat:podman-etcd"}} {
		fmt.Fprintf(&b, `    <clone id="%s-clone" multi_state="false" unique="false" managed="true" disabled="false" failed="false" failure_ignored="false">
`, r.id)
		for i := range nodes {
			instance(r.id, r.agent, fmt.Sprintf("node-%d", i))
			count++
		}
		b.WriteString("    </clone>\n")
	}
	for g := 0; count < resources; g++ {
		fmt.Fprintf(&b, `    <clone id="app-%d-clone" multi_state="false" unique="false" managed="true" disabled="false" failed="false" failure_ignored="false">
`, g)
		for i := 0; i < nodes && count < resources; i++ {
			fmt.Fprintf(&b, `    <group id="app-%d:%d" number_resources="2" managed="true" disabled="false">
`, g, i)
			for k := 0; k < 2 && count < resources; k++ {
				instance(fmt.Sprintf("app-%d-%d", g, k), "ocf:heartbeat:Dummy", fmt.Sprintf("node-%d", i))
				count++
			}
			b.WriteString("    </group>\n")
		}
		b.WriteString("    </clone>\n")
	}
	b.WriteString("  </resources>\n  <node_history>\n")
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		fmt.Fprintf(&b, "    <node name=%q>\n", name)
		for _, h := range history {
			if h.node != name {
				continue
			}
			fmt.Fprintf(&b, `      <resource_history id="%s" orphan="false" migration-threshold="1000000">
        <operation_history call="2" task="start" rc="0" rc_text="ok" last-rc-change="Wed Jan  1 10:00:00 2020" exec-time="0ms" queue-time="0ms"/>
        <operation_history call="3" task="monitor" rc="0" rc_text="ok" interval="30000ms" last-rc-change="Wed Jan  1 10:00:00 2020" exec-time="0ms" queue-time="0ms"/>
      </resource_history>
`, h.id)
		}
		b.WriteString("    </node>\n")
	}
	b.WriteString(`  </node_history>
  <failures>
    <failure op_key="app-0-0_monitor_30000" node="node-1" exitstatus="error" exitreason="not running" exitcode="7" call="1" status="complete" last-rc-change="2020-01-01 10:01:00Z" queued="0" exec="0" interval="30000" task="monitor"/>
  </failures>
  <status code="0" message="OK"/>
</pacemaker-result>
`)
	return b.Bytes(), cs
}

// TestSyntheticDocumentIsWhatTheBenchmarksClaim keeps the benchmark input
// honest: the sizes it is named after, and a valid, healthy status.
func TestSyntheticDocumentIsWhatTheBenchmarksClaim(t *testing.T) {
	for _, size := range []struct{ nodes, resources int }{{5, 500}, {32, 2000}} {
		mon, nodes := synthetic(size.nodes, size.resources)
		doc, err := crmmon.Parse(mon, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if len(doc.Nodes) != size.nodes || len(doc.Resources) != size.resources || len(doc.Warnings) > 0 {
			t.Errorf("synthetic(%d, %d): %d nodes, %d resources, warnings %v", size.nodes, size.resources, len(doc.Nodes), len(doc.Resources), doc.Warnings)
		}
		if size.nodes <= 5 {
			c := model.Build(model.Input{Doc: doc, Corosync: nodes}, benchMapping)
			st := status.Build(c, size.nodes, nil, fixtureNow)
			if len(st.Nodes) != size.nodes || st.Conditions[0].Status != "True" {
				t.Errorf("synthetic cluster not healthy: %+v", st.Conditions)
			}
		}
	}
}
