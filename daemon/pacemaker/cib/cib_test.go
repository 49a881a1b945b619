package cib

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/internal/reach"
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
	// Only the attributes etcdlet reads are kept: ip, pcmk_delay_base,
	// drop_in_dependency and the clone's notify are gone.
	if got := c.Primitives["master-0_redfish"].Params; len(got) != 1 {
		t.Errorf("master-0_redfish params = %v, want only pcmk_host_list", got)
	}
	if got := c.Primitives["bmc-b"].Params; got == nil || len(got) != 0 {
		t.Errorf("bmc-b params = %#v, want an empty map", got)
	}
	if _, ok := c.Meta["etcd-clone"]; ok {
		t.Errorf("etcd-clone meta = %v, want none kept (no maintenance attribute)", c.Meta["etcd-clone"])
	}
}

func TestParseMaintenanceMeta(t *testing.T) {
	c, err := Parse([]byte(`<cib><configuration><resources>
  <clone id="etcd-clone">
    <meta_attributes id="cm"><nvpair id="cm1" name="maintenance" value="true"/><nvpair id="cm2" name="notify" value="true"/></meta_attributes>
    <primitive id="etcd" class="ocf" provider="heartbeat" type="podman-etcd">
      <meta_attributes id="pm"><nvpair id="pm1" name="maintenance" value="false"/><nvpair id="pm2" name="target-role" value="Started"/></meta_attributes>
    </primitive>
  </clone>
</resources></configuration></cib>`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Meta["etcd-clone"]; len(got) != 1 || got["maintenance"] != "true" {
		t.Errorf("etcd-clone meta = %v, want only maintenance=true", got)
	}
	if got := c.Meta["etcd"]; len(got) != 1 || got["maintenance"] != "false" {
		t.Errorf("etcd meta = %v, want only maintenance=false", got)
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
          <nvpair id="b2" name="pcmk_host_map" value="node-1:1"/>
        </instance_attributes>
        <instance_attributes id="c">
          <nvpair id="c1" name="pcmk_host_map" value="ignored: an earlier set defines it"/>
        </instance_attributes>
      </primitive>
    </master>
  </resources>
</configuration>`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Primitives["dev"].Params
	if p["pcmk_host_list"] != "node-1 node-2" || p["pcmk_host_map"] != "node-1:1" {
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

// secretCIB is a CIB whose fencing devices carry credentials the way
// fence agents take them, in plain and rule-based sets, at the top level
// and nested in a group, next to the attributes etcdlet does read.
const secretCIB = `<cib><configuration>
  <nodes>
    <node id="1" uname="master-0">
      <instance_attributes id="n0">
        <nvpair id="n0-ip" name="node_ip" value="192.0.2.10"/>
        <nvpair id="n0-s" name="bmc_password" value="S3cret-node-attr"/>
      </instance_attributes>
    </node>
  </nodes>
  <resources>
    <primitive id="master-0_redfish" class="stonith" type="fence_redfish">
      <instance_attributes id="r0">
        <nvpair id="r0-hl" name="pcmk_host_list" value="master-0"/>
        <nvpair id="r0-ip" name="ip" value="192.0.2.200"/>
        <nvpair id="r0-u" name="username" value="S3cret-username"/>
        <nvpair id="r0-p" name="password" value="S3cret-password"/>
        <nvpair id="r0-ssl" name="ssl_insecure" value="1"/>
      </instance_attributes>
      <instance_attributes id="r0-rule">
        <rule id="r0-rule-r" score="INFINITY"><expression id="r0-e" attribute="#uname" operation="eq" value="master-1"/></rule>
        <nvpair id="r0-rp" name="passwd" value="S3cret-rule-based"/>
      </instance_attributes>
      <meta_attributes id="r0-m">
        <nvpair id="r0-m1" name="maintenance" value="false"/>
        <nvpair id="r0-m2" name="description" value="S3cret-in-meta"/>
      </meta_attributes>
    </primitive>
    <group id="fence-group">
      <primitive id="ipmi-rack1" class="stonith" type="fence_ipmilan">
        <instance_attributes id="i1">
          <nvpair id="i1-hm" name="pcmk_host_map" value="master-0:10"/>
          <nvpair id="i1-l" name="login" value="S3cret-login"/>
          <nvpair id="i1-p" name="passwd" value="S3cret-passwd"/>
          <nvpair id="i1-ps" name="passwd_script" value="/usr/local/bin/S3cret-script"/>
        </instance_attributes>
      </primitive>
    </group>
    <primitive id="etcd" class="ocf" provider="heartbeat" type="podman-etcd">
      <instance_attributes id="e">
        <nvpair id="e-nim" name="node_ip_map" value="master-0:192.0.2.10"/>
        <nvpair id="e-tok" name="token" value="S3cret-agent-param"/>
      </instance_attributes>
    </primitive>
  </resources>
</configuration></cib>`

// No credential of a fencing device (or anything else not on the
// allow-lists) survives Parse: not as a value, not as a name, not behind a
// pointer. A later writer that serializes a Config cannot leak one.
func TestParseKeepsNoSecrets(t *testing.T) {
	c, err := Parse([]byte(secretCIB))
	if err != nil {
		t.Fatal(err)
	}
	// What etcdlet reads is still there.
	if c.Primitives["master-0_redfish"].Params["pcmk_host_list"] != "master-0" ||
		c.Primitives["ipmi-rack1"].Params["pcmk_host_map"] != "master-0:10" ||
		c.Primitives["etcd"].Params["node_ip_map"] != "master-0:192.0.2.10" ||
		c.NodeAttributes["master-0"]["node_ip"] != "192.0.2.10" ||
		c.Meta["master-0_redfish"]["maintenance"] != "false" {
		t.Fatalf("an attribute etcdlet reads was lost: %#v", c)
	}
	dump := fmt.Sprintf("%#v", c)
	for _, s := range reach.Strings(c) {
		dump += "\n" + s
	}
	for _, leak := range []string{"S3cret", "password", "passwd", "username", "login", "token", "192.0.2.200"} {
		if strings.Contains(dump, leak) {
			t.Errorf("%q survived parsing:\n%s", leak, dump)
		}
	}
}

// A tripwire: the allow-lists are exactly the names the model reads. A
// name added here must be one that is never a secret, and documented in
// docs/pacemaker.md ("What is kept of the CIB").
func TestAllowLists(t *testing.T) {
	for _, tt := range []struct {
		list []string
		want string
	}{
		{PrimitiveParams, "pcmk_host_list pcmk_host_map node_ip_map"},
		{NodeAttributeNames, "node_ip standby"},
		{MetaAttributeNames, "maintenance"},
	} {
		if got := strings.Join(tt.list, " "); got != tt.want {
			t.Errorf("allow-list %q, want %q: review docs/pacemaker.md and the model before changing it", got, tt.want)
		}
	}
}
