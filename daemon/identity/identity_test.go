package identity

import (
	"net/netip"
	"testing"
)

func TestIdentity(t *testing.T) {
	tests := []struct {
		ip, peerScheme, clientScheme string
		peerPort, clientPort         int
		name, peerURL, clientURL     string
	}{
		{"192.0.2.1", "http", "http", 2380, 2379, "etcd-main-192.0.2.1", "http://192.0.2.1:2380", "http://192.0.2.1:2379"},
		{"10.250.0.17", "https", "https", 2380, 2379, "etcd-main-10.250.0.17", "https://10.250.0.17:2380", "https://10.250.0.17:2379"},
		{"2001:db8::1", "https", "https", 2380, 2379, "etcd-main-2001:db8::1", "https://[2001:db8::1]:2380", "https://[2001:db8::1]:2379"},
		{"::1", "http", "https", 12380, 12379, "etcd-main-::1", "http://[::1]:12380", "https://[::1]:12379"},
		{"fd00:10:250::a", "https", "http", 2380, 2379, "etcd-main-fd00:10:250::a", "https://[fd00:10:250::a]:2380", "http://[fd00:10:250::a]:2379"},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			s := Scheme{Cluster: "etcd-main", PeerScheme: tt.peerScheme, ClientScheme: tt.clientScheme, PeerPort: tt.peerPort, ClientPort: tt.clientPort}
			m := s.For(netip.MustParseAddr(tt.ip))
			if m.Name != tt.name || m.PeerURL != tt.peerURL || m.ClientURL != tt.clientURL {
				t.Errorf("got %s %s %s, want %s %s %s", m.Name, m.PeerURL, m.ClientURL, tt.name, tt.peerURL, tt.clientURL)
			}
			if ip, ok := IPFromURL(m.PeerURL); !ok || ip != m.IP {
				t.Errorf("IPFromURL(%s) = %v, %v", m.PeerURL, ip, ok)
			}
		})
	}
}

func TestInitialCluster(t *testing.T) {
	s := Scheme{Cluster: "etcd-main", PeerScheme: "https", ClientScheme: "https", PeerPort: 2380, ClientPort: 2379}
	got := InitialCluster(s.ForAll([]netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::3")}))
	want := "etcd-main-192.0.2.2=https://192.0.2.2:2380,etcd-main-2001:db8::3=https://[2001:db8::3]:2380"
	if got != want {
		t.Errorf("InitialCluster = %s, want %s", got, want)
	}
}

func TestIPFromURLRejectsHostnames(t *testing.T) {
	for _, u := range []string{"https://etcd-0.etcd-peer.svc:2380", "not a url", "http://:2380"} {
		if _, ok := IPFromURL(u); ok {
			t.Errorf("IPFromURL(%q) accepted a non-IP host", u)
		}
	}
}
