package clusterlist

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func TestEditApply(t *testing.T) {
	current := addrs("192.0.2.1", "2001:db8::2", "192.0.2.3")
	tests := []struct {
		name    string
		edit    Edit
		want    []netip.Addr
		wantErr string
	}{
		{"add goes last", Edit{Add, addrs("192.0.2.4")}, addrs("192.0.2.1", "2001:db8::2", "192.0.2.3", "192.0.2.4"), ""},
		{"add twice", Edit{Add, addrs("2001:db8::2")}, nil, "2001:db8::2 is listed already"},
		{"remove keeps the order", Edit{Remove, addrs("2001:db8::2")}, addrs("192.0.2.1", "192.0.2.3"), ""},
		{"remove one not listed", Edit{Remove, addrs("192.0.2.9")}, nil, "192.0.2.9 is not listed (the list: 192.0.2.1 2001:db8::2 192.0.2.3)"},
		{"set replaces", Edit{Set, addrs("198.51.100.1")}, addrs("198.51.100.1"), ""},
		{"unknown", Edit{"swap", nil}, nil, `unknown edit "swap"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.edit.Apply(current)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if !slices.Equal(current, addrs("192.0.2.1", "2001:db8::2", "192.0.2.3")) {
		t.Errorf("Apply changed the list it was given: %v", current)
	}
}

// The change in flight, and which edits take back a join: a voter never
// counts as a join to take back.
func TestPendingAndTakesBack(t *testing.T) {
	scheme := identity.Scheme{Cluster: "etcd-main", PeerScheme: "https", ClientScheme: "https", PeerPort: 2380, ClientPort: 2379}
	member := func(ip string, learner, started bool) membership.Member {
		id := scheme.For(netip.MustParseAddr(ip))
		m := membership.Member{ID: uint64(len(ip)), PeerURLs: []string{id.PeerURL}, IsLearner: learner}
		if started {
			m.Name, m.ClientURLs = id.Name, []string{id.ClientURL}
		}
		return m
	}
	listed := scheme.ForAll(addrs("192.0.2.1", "2001:db8::2", "192.0.2.3", "192.0.2.4"))
	members := []membership.Member{
		member("192.0.2.1", false, true),
		member("2001:db8::2", true, true), // a learner
		member("192.0.2.3", false, false), // added, not started
		member("192.0.2.9", false, true),  // no longer listed
	}
	got := Pending(listed, members)
	want := []string{
		"192.0.2.3: a member whose etcd has not started yet",
		"192.0.2.4: listed, not a member yet",
		"2001:db8::2: a learner, not promoted yet",
		"etcd-main-192.0.2.9 (https://192.0.2.9:2380): a member, no longer listed",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Pending:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if p := Pending(listed[:1], members[:1]); len(p) != 0 {
		t.Errorf("a cluster that is its list has nothing in flight, got %v", p)
	}
	for _, tt := range []struct {
		edit Edit
		want bool
	}{
		{Edit{Remove, addrs("192.0.2.4")}, true},                // never a member
		{Edit{Remove, addrs("2001:db8::2", "192.0.2.3")}, true}, // a learner, an unstarted member
		{Edit{Remove, addrs("192.0.2.1")}, false},               // a voter
		{Edit{Remove, addrs("192.0.2.4", "192.0.2.1")}, false},
		{Edit{Add, addrs("192.0.2.5")}, false},
		{Edit{Set, addrs("192.0.2.1")}, false},
	} {
		if got := tt.edit.TakesBack(listed, members); got != tt.want {
			t.Errorf("%s: TakesBack %v, want %v", tt.edit, got, tt.want)
		}
	}
}
