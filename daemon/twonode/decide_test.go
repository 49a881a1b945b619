package twonode

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/state"
)

func TestDecide(t *testing.T) {
	self, peer := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	healthy := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	fenced := &crmmon.FenceEvent{Status: "success", Action: "reboot", Target: "master-1", Delegate: "master-0", Completed: healthy.Add(8 * time.Second)}
	// lost is the usual failover: master-1 lost, fenced by master-0.
	lost := func() Facts {
		return Facts{
			Self: self, Peer: peer, Cluster: "c1", Voter: true, BootID: "boot-1",
			Witness: &state.Witness{ClusterID: "c1", Peer: peer.String(), BootID: "boot-1", Healthy: healthy},
			Pacemaker: &model.Cluster{WithQuorum: crmmon.True, Nodes: []model.Node{
				{Name: "master-0", Online: crmmon.True, Unclean: crmmon.False, Addresses: []netip.Addr{self}},
				{Name: "master-1", Online: crmmon.False, Unclean: crmmon.False, Addresses: []netip.Addr{peer}, LastFence: fenced},
			}},
		}
	}
	peerNode := func(f *Facts) *model.Node { return &f.Pacemaker.Nodes[1] }
	for _, tc := range []struct {
		name   string
		change func(*Facts)
		want   string // a part of the reason; "" forces
	}{
		{"the peer fenced after both were seen healthy: force", func(*Facts) {}, ""},
		{"a fencing by power-off counts too", func(f *Facts) {
			e := *fenced
			e.Action = "off"
			peerNode(f).LastFence = &e
		}, ""},
		{"pacemaker unknown", func(f *Facts) { f.Pacemaker, f.Unknown = nil, "crm_mon: connection refused" }, "pacemaker's state is unknown (crm_mon: connection refused)"},
		{"no pacemaker node at this address", func(f *Facts) { f.Self = netip.MustParseAddr("192.0.2.9") }, "no node at this node's address 192.0.2.9"},
		{"no pacemaker node at the peer's address", func(f *Facts) { peerNode(f).Addresses = nil }, "no node at the peer's address 192.0.2.2"},
		{"this node offline in pacemaker", func(f *Facts) { f.Pacemaker.Nodes[0].Online = crmmon.False }, "does not see this node (master-0) online"},
		{"no quorum here: the cut-off side", func(f *Facts) { f.Pacemaker.WithQuorum = crmmon.False }, "no quorum on this node"},
		{"quorum unknown", func(f *Facts) { f.Pacemaker.WithQuorum = crmmon.Unknown }, "no quorum on this node"},
		{"the peer online", func(f *Facts) { peerNode(f).Online = crmmon.True }, "does not see the peer master-1 offline"},
		{"the peer's state unknown", func(f *Facts) { peerNode(f).Online = crmmon.Unknown }, "does not see the peer master-1 offline"},
		{"the peer unclean: not fenced yet", func(f *Facts) { peerNode(f).Unclean = crmmon.True }, "unclean: pacemaker has not fenced it yet"},
		{"no fencing recorded (a clean shutdown)", func(f *Facts) { peerNode(f).LastFence = nil }, "records no fencing of the peer master-1"},
		{"the fencing failed", func(f *Facts) {
			e := *fenced
			e.Status = "failed"
			peerNode(f).LastFence = &e
		}, "is a failed reboot"},
		{"the fencing is pending", func(f *Facts) {
			e := *fenced
			e.Status, e.Completed = "pending", time.Time{}
			peerNode(f).LastFence = &e
		}, "is a pending reboot"},
		{"an unfencing (on) is no fencing", func(f *Facts) {
			e := *fenced
			e.Action = "on"
			peerNode(f).LastFence = &e
		}, "success on, not a successful reboot or off"},
		{"no completion time", func(f *Facts) {
			e := *fenced
			e.Completed = time.Time{}
			peerNode(f).LastFence = &e
		}, "no completion time"},
		{"this member a learner", func(f *Facts) { f.Voter = false }, "not a voter of cluster c1"},
		{"never saw both healthy", func(f *Facts) { f.Witness = nil }, "never saw both members of cluster c1 healthy"},
		{"saw another cluster healthy", func(f *Facts) { f.Witness.ClusterID = "c0" }, "never saw both members of cluster c1 healthy"},
		{"saw another peer healthy", func(f *Facts) { f.Witness.Peer = "192.0.2.3" }, "never saw both members"},
		{"no boot ID", func(f *Facts) { f.BootID, f.Witness.BootID = "", "" }, "boot ID cannot be read"},
		{"this host rebooted since: it may be the wrong survivor", func(f *Facts) { f.BootID = "boot-2" }, "this host restarted since it last saw both members healthy (2026-11-28T10:00:00Z)"},
		{"the fencing predates the last healthy sight: a new failure not fenced yet", func(f *Facts) {
			f.Witness.Healthy = fenced.Completed.Add(time.Minute)
		}, "is not after both members were last seen healthy"},
		{"the fencing in the same instant as the last healthy sight", func(f *Facts) { f.Witness.Healthy = fenced.Completed }, "is not after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := lost()
			tc.change(&f)
			v := Decide(f)
			if tc.want == "" {
				if !v.Force || !strings.Contains(v.Reason, "pacemaker fenced the peer master-1") || !strings.Contains(v.Reason, "by master-0") {
					t.Fatalf("Decide = %+v, want to force, naming the fencing", v)
				}
				return
			}
			if v.Force || !strings.Contains(v.Reason, tc.want) {
				t.Fatalf("Decide = %+v, want a wait saying %q", v, tc.want)
			}
		})
	}
}
