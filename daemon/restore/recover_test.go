package restore

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

func data(node string, term, index uint64, rev int64) consent.DataReport {
	return consent.DataReport{Node: node, MemberID: "m" + node, ClusterID: "c1", LastTerm: term, LastIndex: index, Commit: index, Revision: rev}
}

func retired(d consent.DataReport, by string) consent.DataReport {
	d.RetiredFor = by
	return d
}

func silentNode(node string) consent.DataReport {
	return consent.DataReport{Node: node, Error: "its agent does not answer: connection refused"}
}

// The survivor a recovery starts from is chosen by evidence: refused
// while a quorum answers, while a listed node is silent and not named
// gone, when a node named gone answers, and, without a reason, when
// another log goes further; the revision goes past the highest reported.
func TestPrepareRecovery(t *testing.T) {
	self := identity.Member{IP: netip.MustParseAddr("2001:db8::1"), Name: "etcd-main-2001:db8::1"}
	tests := []struct {
		name    string
		req     RecoveryRequest
		refused string // "" allowed
		highest int64
	}{
		{"the most advanced, the others gone", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), silentNode("2001:db8::2"), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8:0::2", "2001:db8::3"}, Bump: 1000}, "", 70},
		{"ahead of a survivor that answers", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), data("2001:db8::2", 3, 80, 95), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::3"}, Bump: 1000}, "", 95},
		{"a quorum answers", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70)}, Quorum: []string{"etcd-main-2001:db8::2", "etcd-main-2001:db8::3"}},
			"a cluster answers with quorum (etcd-main-2001:db8::2, etcd-main-2001:db8::3)", 0},
		{"a silent node not named gone", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), silentNode("2001:db8::2"), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::3"}}, "not heard from 2001:db8::2: its log may go further than this node's; start its etcdlet so that it reports its data, or, if that host is gone for good with its data, name it: --gone 2001:db8::2", 0},
		{"a node named gone answers", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), data("2001:db8::2", 3, 10, 5), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::2", "2001:db8::3"}}, "--gone 2001:db8::2: its agent answers (log end 3/10, revision 5): that node is not gone", 0},
		{"gone names this node", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70)}, Gone: []string{"2001:db8::1"}}, "--gone 2001:db8::1 names this node", 0},
		{"gone names no listed node", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70)}, Gone: []string{"192.0.2.9"}}, "--gone 192.0.2.9: not a node of the member list in force", 0},
		{"gone is no IP", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70)}, Gone: []string{"host-b"}}, `--gone "host-b": not an IP address`, 0},
		{"a further log (a later term)", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), data("2001:db8::2", 4, 20, 60), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::3"}}, "2001:db8::2 holds a further log (log end 4/20, revision 60; this node log end 3/90, revision 70): run etcdlet recover there", 0},
		{"a further log, with a reason", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), data("2001:db8::2", 3, 91, 71), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::3"}, Reason: "host b's disk fails", Bump: 1000}, "", 71},
		{"another cluster's data at a listed node (a recovery ran there)", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70),
			{Node: "2001:db8::2", MemberID: "x", ClusterID: "c2", LastTerm: 2, LastIndex: 5, Revision: 1000000070}, silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::3"}, Bump: 1000}, "2001:db8::2 holds data of cluster c2, not of this node's c1: if a recovery or restore already ran there", 0},
		{"another cluster answers at a listed address", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), silentNode("2001:db8::2")},
			Gone: []string{"2001:db8::2"}, Foreign: []string{"https://[2001:db8::2]:2379 answers for cluster c2 (member 9)"}},
			"another cluster answers at listed addresses (https://[2001:db8::2]:2379 answers for cluster c2 (member 9))", 0},
		{"a node without data loses nothing", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), {Node: "2001:db8::2"}}, Bump: 1000}, "", 70},
		{"no data here", RecoveryRequest{Reports: []consent.DataReport{{Node: "2001:db8::1"}, data("2001:db8::2", 3, 90, 70)}}, "holds no member data", 0},
		{"not listed", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::2", 3, 90, 70)}}, "this node (2001:db8::1) is not in the member list in force", 0},
		{"this node promised another recovery", RecoveryRequest{Reports: []consent.DataReport{retired(data("2001:db8::1", 3, 90, 70), "2001:db8::3"), silentNode("2001:db8::2"), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::2"}}, "this node promised 2001:db8::3 not to start its member of cluster c1 again: 2001:db8::3 recovers the cluster from its data; start etcdlet there, or, if 2001:db8::3 is gone for good, name it: --gone 2001:db8::3", 0},
		{"this node promised a recovery now named gone", RecoveryRequest{Reports: []consent.DataReport{retired(data("2001:db8::1", 3, 90, 70), "2001:db8::3"), silentNode("2001:db8::2"), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::2", "2001:db8::3"}, Bump: 1000}, "", 70},
		{"another survivor promised another recovery", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), retired(data("2001:db8::2", 3, 80, 60), "2001:db8::3"), data("2001:db8::3", 3, 90, 70)}},
			"2001:db8::2 promised 2001:db8::3 not to start its member again: a recovery runs on 2001:db8::3", 0},
		{"a survivor that promised this node already (a recovery run again)", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70), retired(data("2001:db8::2", 3, 80, 60), "2001:db8::1"), silentNode("2001:db8::3")},
			Gone: []string{"2001:db8::3"}, Bump: 1000}, "", 70},
		{"a negative bump", RecoveryRequest{Reports: []consent.DataReport{data("2001:db8::1", 3, 90, 70)}, Bump: -1}, "--bump-revision -1: must be 0 or more", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := PrepareRecovery(Settings{DataDir: t.TempDir()}, self, tt.req)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("got %v, want a refusal with %q", err, tt.refused)
			case tt.refused != "":
				return
			}
			if r.Highest != tt.highest || r.Revision() != tt.highest+tt.req.Bump {
				t.Errorf("highest %d, revision %d; want %d and %d", r.Highest, r.Revision(), tt.highest, tt.highest+tt.req.Bump)
			}
			// Every other node with data of the cluster must promise not
			// to start its member again before anything changes.
			var want []string
			for _, d := range tt.req.Reports {
				if d.HasData() && d.Node != self.IP.String() {
					want = append(want, d.Node)
				}
			}
			if !slices.Equal(r.Survivors, want) {
				t.Errorf("survivors asked to promise: %v, want %v", r.Survivors, want)
			}
		})
	}
}
