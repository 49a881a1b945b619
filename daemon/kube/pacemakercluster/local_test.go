package pacemakercluster

import (
	"net/netip"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
)

func TestLocalNode(t *testing.T) {
	c := &model.Cluster{Nodes: []model.Node{
		{Name: "master-0", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}},
		{Name: "master-1.example.com", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.11")}},
		{Name: "master-1"},
	}}
	tests := []struct {
		name     string
		c        *model.Cluster
		ip       string
		hostname string
		want     string
	}{
		{"by address", c, "192.0.2.11", "unrelated", "master-1.example.com"},
		{"by second address", c, "2001:db8::10", "", "master-0"},
		{"IPv4-mapped node IP", c, "::ffff:192.0.2.10", "", "master-0"},
		{"address wins over name", c, "192.0.2.10", "master-1", "master-0"},
		{"by exact host name", c, "", "master-1.example.com", "master-1.example.com"},
		{"exact host name wins over short form", c, "198.51.100.1", "master-1.example.com", "master-1.example.com"},
		{"by short host name", c, "", "master-0.cluster.local", "master-0"},
		{"host names ignore case", c, "", "Master-0.Cluster.Local", "master-0"},
		{"no match", c, "198.51.100.1", "worker-0.example.com", ""},
		{"no IP, no host name", c, "", "", ""},
		{"no cluster", nil, "192.0.2.10", "master-0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ip netip.Addr
			if tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			if got := LocalNode(tt.c, ip, tt.hostname); got != tt.want {
				t.Errorf("LocalNode(%s, %q) = %q, want %q", tt.ip, tt.hostname, got, tt.want)
			}
		})
	}
}

func TestIsDC(t *testing.T) {
	tests := []struct {
		name    string
		present crmmon.Bool
		dc      string
		node    string
		want    bool
	}{
		{"this node is DC", crmmon.True, "a", "a", true},
		{"the other node is DC", crmmon.True, "b", "a", false},
		{"no DC elected", crmmon.False, "", "a", false},
		{"DC presence unknown", crmmon.Unknown, "a", "a", false},
		{"this node not found", crmmon.True, "a", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &model.Cluster{DCPresent: tt.present, DCName: tt.dc}
			if got := IsDC(c, tt.node); got != tt.want {
				t.Errorf("IsDC = %v, want %v", got, tt.want)
			}
		})
	}
}
