package node

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// A node promises a recovering node not to start its member again only
// for the cluster its data belongs to, only to the node that asks, and
// only while that cluster has no quorum here; the promise is recorded
// before the answer says so, and a second recovery elsewhere is refused
// unless the first recovering node is named gone.
func TestRetirePromisesOnlyWhatItMay(t *testing.T) {
	self, a, b := netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	cfg := &config.Config{Cluster: config.Cluster{Name: "etcd-main"}, Agent: config.Agent{CallTimeout: time.Second}}
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	earlier := &state.Retirement{ClusterID: "c1", By: a.String(), At: at.Add(-time.Hour)}
	tests := []struct {
		name    string
		caller  netip.Addr
		req     consent.RetireRequest
		pinned  uint64
		quorum  bool
		before  *state.Retirement
		retired bool
		says    string
		after   *state.Retirement
	}{
		{name: "the recovering node asks for the cluster of this node's data", caller: a, req: consent.RetireRequest{Cluster: "c1", By: a.String()}, pinned: 0xc1,
			retired: true, after: &state.Retirement{ClusterID: "c1", By: a.String(), At: at}},
		{name: "asked again: the promise stands as it was", caller: a, req: consent.RetireRequest{Cluster: "c1", By: a.String()}, pinned: 0xc1, before: earlier,
			retired: true, after: earlier},
		{name: "a node asks for another", caller: b, req: consent.RetireRequest{Cluster: "c1", By: a.String()}, pinned: 0xc1,
			says: `the request is for "192.0.2.1", but it comes from 192.0.2.2`},
		{name: "another cluster than this node's", caller: a, req: consent.RetireRequest{Cluster: "c2", By: a.String()}, pinned: 0xc1,
			says: "its data and state belong to cluster c1, not c2"},
		{name: "the cluster answers with quorum here", caller: a, req: consent.RetireRequest{Cluster: "c1", By: a.String()}, pinned: 0xc1, quorum: true,
			says: "cluster c1 answers with quorum here"},
		{name: "a second recovery while the first node is not named gone", caller: b, req: consent.RetireRequest{Cluster: "c1", By: b.String()}, pinned: 0xc1, before: earlier,
			says: "it promised 192.0.2.1 at", after: earlier},
		{name: "a second recovery naming the first node gone", caller: b, req: consent.RetireRequest{Cluster: "c1", By: b.String(), Gone: []string{a.String()}}, pinned: 0xc1, before: earlier,
			retired: true, after: &state.Retirement{ClusterID: "c1", By: b.String(), At: at}},
		{name: "not a cluster ID", caller: a, req: consent.RetireRequest{Cluster: "zz", By: a.String()}, pinned: 0xc1, says: `cluster "zz" is not a cluster ID`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &memStore{retired: tt.before}
			n := &Node{Deps: Deps{Settings: SettingsFrom(cfg), Store: store, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return at },
				DataDir: datadir.Dir{Path: t.TempDir()}}, scheme: identity.SchemeFrom(cfg)}
			n.last = Snapshot{Self: n.scheme.For(self), Pinned: tt.pinned,
				View: membership.View{Reached: tt.quorum, Observation: membership.Observation{ClusterID: tt.pinned}}}
			got := n.Retire(tt.caller, tt.req)
			if got.Retired != tt.retired || !strings.Contains(got.Detail, tt.says) {
				t.Errorf("answer %+v, want retired %v saying %q", got, tt.retired, tt.says)
			}
			switch {
			case (store.retired == nil) != (tt.after == nil):
				t.Errorf("recorded %+v, want %+v", store.retired, tt.after)
			case tt.after != nil && *store.retired != *tt.after:
				t.Errorf("recorded %+v, want %+v", *store.retired, *tt.after)
			}
			// What the pass then decides with it.
			if r := n.retirement(tt.pinned); got.Retired && (r.Cluster != tt.pinned || r.By.String() != tt.req.By) {
				t.Errorf("the pass reads the promise as %+v", r)
			}
		})
	}
}
