package cib

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func parseFile(t *testing.T, path string) *Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", path, err)
	}
	return c
}

func TestParseFencingConfiguration(t *testing.T) {
	c := parseFile(t, "../testdata/cib/two-fence-devices.xml")
	tests := []struct{ id, param, want string }{
		{"master-0_redfish", "pcmk_host_list", "master-0"},
		{"ipmi-rack1", "pcmk_host_map", "master-0:10;other-host:11"},
		{"etcd", "node_ip_map", "master-0:192.0.2.10;master-1:192.0.2.11"},
	}
	for _, tt := range tests {
		if got := c.Primitives[tt.id].Params[tt.param]; got != tt.want {
			t.Errorf("%s %s = %q, want %q", tt.id, tt.param, got, tt.want)
		}
	}
	if p := c.Primitives["ipmi-rack1"]; p.Class != "stonith" || p.Type != "fence_ipmilan" {
		t.Errorf("ipmi-rack1 = %+v", p)
	}
	if p := c.Primitives["etcd"]; p.Class != "ocf" || p.Provider != "heartbeat" || p.Type != "podman-etcd" {
		t.Errorf("etcd = %+v", p)
	}
	want := []FencingLevel{
		{Target: "master-1", Devices: []string{"master-1_redfish"}},
		{Target: "master-1", Devices: []string{"bmc-b"}},
	}
	if len(c.FencingLevels) != 2 || c.FencingLevels[0].Target != want[0].Target ||
		!slices.Equal(c.FencingLevels[1].Devices, want[1].Devices) {
		t.Errorf("levels = %+v, want %+v", c.FencingLevels, want)
	}
	// Meta attributes of containers and primitives, by id.
	if got := c.Meta["etcd-clone"]["notify"]; got != "true" {
		t.Errorf("etcd-clone notify = %q", got)
	}
}

func TestParseNestedAndNodeAttributes(t *testing.T) {
	bundle := parseFile(t, "../testdata/cib/bundle.xml")
	if _, ok := bundle.Primitives["etcd"]; !ok {
		t.Error("primitive inside a bundle not found")
	}
	group := parseFile(t, "../testdata/cib/group.xml")
	for _, id := range []string{"kubelet", "etcd"} {
		if _, ok := group.Primitives[id]; !ok {
			t.Errorf("primitive %s inside a cloned group not found", id)
		}
	}
	noaddr := parseFile(t, "../testdata/cib/no-address.xml")
	if got := noaddr.NodeAttributes["master-0"]["node_ip"]; got != "2001:db8::10" {
		t.Errorf("master-0 node_ip = %q", got)
	}
	standby := parseFile(t, "../testdata/cib/standby.xml")
	if got := standby.NodeAttributes["master-1"]["standby"]; got != "on" {
		t.Errorf("master-1 standby = %q", got)
	}
}

func TestParseConfigurationScopeAndRules(t *testing.T) {
	// What `cibadmin --query --scope configuration` prints.
	c, err := Parse([]byte(`<configuration>
  <resources>
    <master id="old-promotable">
      <primitive id="dev" class="stonith" type="fence_ipmilan">
        <instance_attributes id="a">
          <rule id="r" score="INFINITY"><expression id="e" attribute="#uname" operation="eq" value="x"/></rule>
          <nvpair id="a1" name="pcmk_host_list" value="conditional"/>
        </instance_attributes>
        <instance_attributes id="b">
          <nvpair id="b1" name="pcmk_host_list" value="node-1 node-2"/>
          <nvpair id="b2" name="ip" value="192.0.2.1"/>
        </instance_attributes>
        <instance_attributes id="c">
          <nvpair id="c1" name="ip" value="ignored: an earlier set defines it"/>
        </instance_attributes>
      </primitive>
    </master>
  </resources>
</configuration>`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Primitives["dev"].Params
	if p["pcmk_host_list"] != "node-1 node-2" || p["ip"] != "192.0.2.1" {
		t.Errorf("params = %v; the unconditional set must win over the rule-based one", p)
	}
}

func TestParseRejects(t *testing.T) {
	deep := strings.Repeat(`<group id="g">`, maxNesting+1) + strings.Repeat(`</group>`, maxNesting+1)
	for name, in := range map[string]string{
		"empty":         "",
		"no config":     `<cib><status/></cib>`,
		"not xml":       "Could not connect to the CIB",
		"deeply nested": `<cib><configuration><resources>` + deep + `</resources></configuration></cib>`,
		"truncated":     `<cib><configuration><resources><primitive id="x">`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(in)); err == nil {
				t.Error("Parse accepted it")
			}
		})
	}
}
