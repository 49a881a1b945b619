package corosync

import (
	"os"
	"reflect"
	"testing"
)

func TestParseCmap(t *testing.T) {
	// corosync-cmapctl nodelist.node on corosync 3.1 (keys sorted by name).
	out := []byte(`nodelist.node.0.name (str) = master-0
nodelist.node.0.nodeid (u32) = 1
nodelist.node.0.ring0_addr (str) = 192.0.2.1
nodelist.node.0.ring1_addr (str) = 2001:db8::1
nodelist.node.1.name (str) = master-1
nodelist.node.1.nodeid (u32) = 2
nodelist.node.1.ring0_addr (str) = 192.0.2.2
nodelist.node.10.name (str) = master-10
nodelist.node.10.ring0_addr (str) = master-10.example.com
garbage line
nodelist.local_node_pos (u32) = 0
`)
	got, err := ParseCmap(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "master-0", ID: "1", Addrs: []string{"192.0.2.1", "2001:db8::1"}},
		{Name: "master-1", ID: "2", Addrs: []string{"192.0.2.2"}},
		{Name: "master-10", Addrs: []string{"master-10.example.com"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseCmap = %+v\nwant %+v", got, want)
	}
}

func TestParseConf(t *testing.T) {
	data, err := os.ReadFile("../testdata/corosync.conf")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseConf(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "master-0", ID: "1", Addrs: []string{"2001:db8::10", "192.0.2.10"}},
		{Name: "master-1", ID: "2", Addrs: []string{"2001:db8::11", "192.0.2.11"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseConf = %+v\nwant %+v", got, want)
	}
}

func TestParseConfErrors(t *testing.T) {
	for name, in := range map[string]string{
		"unbalanced": "nodelist {\n}\n}\n",
		"unclosed":   "nodelist {\n node {\n ring0_addr: 192.0.2.1\n",
		"no colon":   "nodelist {\n node {\n ring0_addr 192.0.2.1\n }\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseConf([]byte(in)); err == nil {
				t.Error("ParseConf accepted it")
			}
		})
	}
}
