package consent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestEvaluateFounding(t *testing.T) {
	list := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}
	self := Answer{Cluster: "etcd-main", Token: "etcd-main", Node: "192.0.2.1", List: list, Phase: Explicit}
	approved := self
	approved.Approved = true
	founder := self
	founder.Founder = "192.0.2.1"
	answer := func(node string, change func(*Answer)) Asked {
		a := Answer{Cluster: "etcd-main", Token: "etcd-main", Node: node, List: list, Phase: Explicit}
		if change != nil {
			change(&a)
		}
		return Asked{Node: netip.MustParseAddr(node), Answer: a}
	}
	founderIs := func(f string) func(*Answer) { return func(a *Answer) { a.Founder = f } }
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	approvedAt := func(a Answer, at time.Time) Answer { a.ApprovedAt = at; return a }
	silent := Asked{Node: netip.MustParseAddr("192.0.2.3"), Err: errors.New("connection refused")}
	refused := Asked{Node: netip.MustParseAddr("192.0.2.3"), Err: &RefusedError{Reason: "a client certificate without an IP SAN"}}

	tests := []struct {
		name     string
		self     Answer
		asked    []Asked
		granted  bool
		says     string
		silentOK bool // the verdict names a silent node, yet grants (approval)
	}{
		{name: "approved; every other node holds no data", self: approved,
			asked: []Asked{answer("192.0.2.2", nil), answer("192.0.2.3", nil)}, granted: true, says: "approved by the operator"},
		{name: "approved; a silent node does not hold it back", self: approved,
			asked: []Asked{answer("192.0.2.2", nil), silent}, granted: true, silentOK: true, says: "despite no answer from 192.0.2.3"},
		{name: "cluster.founder; a silent node holds it back: it may host a cluster that is down", self: founder,
			asked: []Asked{answer("192.0.2.2", founderIs("192.0.2.1")), silent}, says: "no answer from 192.0.2.3 (connection refused)"},
		{name: "cluster.founder; every node answers and names this node", self: founder,
			asked: []Asked{answer("192.0.2.2", founderIs("192.0.2.1")), answer("192.0.2.3", founderIs("192.0.2.1"))}, granted: true,
			says: "names this node as cluster.founder"},
		{name: "cluster.founder; a node whose configuration names another founder (a half-applied change)", self: founder,
			asked: []Asked{answer("192.0.2.2", founderIs("192.0.2.1")), answer("192.0.2.3", founderIs("192.0.2.3"))},
			says:  "its cluster.founder is 192.0.2.3, not 192.0.2.1: the hosts' configurations disagree"},
		{name: "cluster.founder; a node whose configuration names none", self: founder,
			asked: []Asked{answer("192.0.2.2", founderIs("192.0.2.1")), answer("192.0.2.3", nil)},
			says:  "its cluster.founder is not set, not 192.0.2.1"},
		{name: "approved, but another listed node is cluster.founder", self: approved,
			asked: []Asked{answer("192.0.2.2", founderIs("192.0.2.2")), answer("192.0.2.3", founderIs("192.0.2.2"))},
			says:  "its cluster.founder is 192.0.2.2: that node founds the cluster"},
		{name: "approved, but this node's own cluster.founder names another listed node",
			self:  func() Answer { a := approved; a.Founder = "192.0.2.2"; return a }(),
			asked: []Asked{answer("192.0.2.2", nil), answer("192.0.2.3", nil)}, says: "this node (cluster.founder names 192.0.2.2"},
		{name: "approved; a cluster.founder the list does not name founds nothing and holds nothing back",
			self:  func() Answer { a := approved; a.Founder = "192.0.2.9"; return a }(),
			asked: []Asked{answer("192.0.2.2", founderIs("192.0.2.9")), answer("192.0.2.3", founderIs("192.0.2.9"))}, granted: true},
		{name: "approved on two nodes: keep one", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Approved = true }), answer("192.0.2.3", nil)},
			says:  "the operator approved a founding there too"},
		{name: "approved on two nodes, here first: this node founds, the other joins", self: approvedAt(approved, t0),
			asked:   []Asked{answer("192.0.2.2", func(a *Answer) { a.Approved, a.ApprovedAt = true, t0.Add(time.Second) }), answer("192.0.2.3", nil)},
			granted: true},
		{name: "approved on two nodes, there first: that node founds", self: approvedAt(approved, t0.Add(time.Second)),
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Approved, a.ApprovedAt = true, t0 }), answer("192.0.2.3", nil)},
			says:  "192.0.2.2 (the operator approved a founding there too, not later than here"},
		{name: "approved on two nodes at the same instant: the lower address founds", self: approvedAt(approved, t0),
			asked:   []Asked{answer("192.0.2.2", func(a *Answer) { a.Approved, a.ApprovedAt = true, t0 }), answer("192.0.2.3", nil)},
			granted: true},
		{name: "approved on two nodes at the same instant: the higher address waits", self: func() Answer { a := approvedAt(approved, t0); a.Node = "192.0.2.3"; return a }(),
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Approved, a.ApprovedAt = true, t0 }), answer("192.0.2.1", nil)},
			says:  "192.0.2.2 (the operator approved a founding there too"},
		{name: "another node is founding: of two acts at once, at least one sees the other's mark", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Founding }), answer("192.0.2.3", nil)}, says: "192.0.2.2 (founding"},
		{name: "a node with data: a cluster may exist", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase, a.Detail = HasData, "its member runs" }), answer("192.0.2.3", nil)},
			says:  "192.0.2.2 (has-data: its member runs)"},
		{name: "a former member, even without data: its cluster may live on other hosts", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Member }), answer("192.0.2.3", nil)}, says: "192.0.2.2 (member"},
		{name: "a node bootstrapping by consent", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Bootstrapping }), answer("192.0.2.3", nil)}, says: "bootstrapping"},
		{name: "a node that promised a bootstrap", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Promised }), answer("192.0.2.3", nil)}, says: "promised"},
		{name: "a consent node with another list may be forming a cluster with others", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase, a.List = Fresh, []string{"192.0.2.2", "192.0.2.9"} }), answer("192.0.2.3", nil)},
			says:  "it bootstraps by consent and reads the list [192.0.2.2 192.0.2.9]"},
		{name: "a consent node with the same list cannot bootstrap without this node's promise", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Fresh }), answer("192.0.2.3", nil)}, granted: true},
		{name: "an explicit node that reads another list: a list change is on its way", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.List = []string{"192.0.2.2", "192.0.2.3"} }), answer("192.0.2.3", nil)},
			says:  "it reads the list [192.0.2.2 192.0.2.3], not [192.0.2.1 192.0.2.2 192.0.2.3]: found once every host reads the same list"},
		{name: "a node that its own list does not name", self: approved,
			asked: []Asked{answer("192.0.2.2", nil), answer("192.0.2.3", func(a *Answer) { a.Phase, a.List = NotListed, []string{"192.0.2.1", "192.0.2.2"} })},
			says:  "192.0.2.3 (it reads the list [192.0.2.1 192.0.2.2]"},
		{name: "a node of another cluster", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Cluster = "etcd-events" }), answer("192.0.2.3", nil)}, says: `it belongs to cluster "etcd-events"`},
		{name: "a node whose agent has not looked yet is silent, for now", self: founder,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Starting; a.Founder = "192.0.2.1" }), answer("192.0.2.3", founderIs("192.0.2.1"))},
			says:  "no answer from 192.0.2.2 (its agent has not looked yet)"},
		{name: "an agent that refuses this node is a refusal, which no approval outweighs", self: approved,
			asked: []Asked{answer("192.0.2.2", nil), refused}, says: "refused by 192.0.2.3 (its agent refuses this node"},
		{name: "an answer for another address", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Node = "192.0.2.7" }), answer("192.0.2.3", nil)}, says: "it answers as node 192.0.2.7"},
		{name: "an unknown phase (a newer agent) is an objection", self: approved,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = "resting" }), answer("192.0.2.3", nil)}, says: "192.0.2.2 (resting)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := EvaluateFounding(tt.self, tt.asked)
			if v.Granted != tt.granted {
				t.Errorf("granted %v, want %v: %s", v.Granted, tt.granted, v.Reason())
			}
			if !v.Founding {
				t.Error("the verdict is not marked as one on a founding")
			}
			if !strings.Contains(v.Reason(), tt.says) {
				t.Errorf("reason %q does not say %q", v.Reason(), tt.says)
			}
			if tt.silentOK && len(v.Silent) == 0 {
				t.Error("the silent node is not named")
			}
		})
	}
}

// An agent that forms a cluster only on an operator's act answers a
// request for a promise with no consent, whichever agent asks: an older
// one, which knows no "explicit" phase, reads it as a refusal too.
func TestAnExplicitNodeConsentsToNoBootstrap(t *testing.T) {
	a := Answer{Cluster: "etcd-main", Token: "etcd-main", Node: "192.0.2.2", List: []string{"192.0.2.1", "192.0.2.2"}, Phase: Explicit}
	want := a
	if ok, why := a.Consents(want); ok || !strings.Contains(why, "explicit") {
		t.Errorf("an explicit node consents: %v, %q", ok, why)
	}
	for _, p := range []Phase{Explicit, Founding} {
		a.Phase = p
		if v := Evaluate(Answer{Cluster: "etcd-main", Token: "etcd-main", Node: "192.0.2.1", List: a.List, Phase: Fresh},
			[]Asked{{Node: netip.MustParseAddr("192.0.2.2"), Answer: a}}); v.Granted {
			t.Errorf("a bootstrap by consent goes ahead with a node answering %s: %s", p, v.Reason())
		}
	}
}
