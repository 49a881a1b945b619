package consent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	list := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}
	self := Answer{Cluster: "etcd-main", Token: "etcd-main", Node: "192.0.2.1", List: list, Phase: Fresh}
	answer := func(node string, change func(*Answer)) Asked {
		a := self
		a.Node = node
		if change != nil {
			change(&a)
		}
		return Asked{Node: netip.MustParseAddr(node), Answer: a}
	}
	silent := func(node string) Asked {
		return Asked{Node: netip.MustParseAddr(node), Err: errors.New("connection refused")}
	}
	tests := []struct {
		name        string
		self        Answer
		asked       []Asked
		granted     bool
		reasonParts []string
	}{
		{
			name:        "every listed node fresh with the same list",
			self:        self,
			asked:       []Asked{answer("192.0.2.2", nil), answer("192.0.2.3", nil)},
			granted:     true,
			reasonParts: []string{"every listed node confirms it is fresh"},
		},
		{
			name: "a node already bootstrapping the same list counts as consent",
			self: self,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Bootstrapping }),
				answer("192.0.2.3", nil)},
			granted: true,
		},
		{
			name:        "a silent node is no consent: it may host the only member",
			self:        self,
			asked:       []Asked{answer("192.0.2.2", nil), silent("192.0.2.3")},
			reasonParts: []string{"no answer from 192.0.2.3 (connection refused)"},
		},
		{
			name: "a node the operator approved to found a cluster refuses: it founds its own",
			self: self,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Approved = true }),
				answer("192.0.2.3", nil)},
			reasonParts: []string{"refused by 192.0.2.2 (the operator approved a new cluster there"},
		},
		{
			name: "an agent that refuses to answer this node blocks: a refusal is no silence",
			self: self,
			asked: []Asked{answer("192.0.2.2", nil), {Node: netip.MustParseAddr("192.0.2.3"),
				Err: &RefusedError{Reason: "only a node of this node's member list may ask for a promise or a wake-up"}}},
			reasonParts: []string{"refused by 192.0.2.3 (its agent refuses this node: only a node of this node's member list"},
		},
		{
			name:        "a node that has been a member refuses",
			self:        self,
			asked:       []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Member }), answer("192.0.2.3", nil)},
			reasonParts: []string{"refused by 192.0.2.2 (member)"},
		},
		{
			name: "a node that reads another list refuses",
			self: self,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.List = []string{"192.0.2.1", "192.0.2.2"} }),
				answer("192.0.2.3", nil)},
			reasonParts: []string{"its list is [192.0.2.1 192.0.2.2], not [192.0.2.1 192.0.2.2 192.0.2.3]"},
		},
		{
			name: "another cluster's or token's agent refuses",
			self: self,
			asked: []Asked{answer("192.0.2.2", func(a *Answer) { a.Token = "etcd-events" }),
				answer("192.0.2.3", nil)},
			reasonParts: []string{`not "etcd-main" (token "etcd-main")`},
		},
		{
			name:        "an agent that answers as another node refuses (a wrong address in the list)",
			self:        self,
			asked:       []Asked{answer("192.0.2.2", func(a *Answer) { a.Node = "192.0.2.9" }), answer("192.0.2.3", nil)},
			reasonParts: []string{"it answers as node 192.0.2.9"},
		},
		{
			name:        "a node that promised another list refuses",
			self:        self,
			asked:       []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Promised }), answer("192.0.2.3", nil)},
			reasonParts: []string{"refused by 192.0.2.2 (promised)"},
		},
		{
			name:        "an agent that has not looked yet refuses",
			self:        self,
			asked:       []Asked{answer("192.0.2.2", func(a *Answer) { a.Phase = Starting }), answer("192.0.2.3", nil)},
			reasonParts: []string{"refused by 192.0.2.2 (starting)"},
		},
		{
			name:        "this node itself must be fresh",
			self:        func() Answer { a := self; a.Phase = Member; return a }(),
			asked:       []Asked{answer("192.0.2.2", nil), answer("192.0.2.3", nil)},
			reasonParts: []string{"refused by this node (member)"},
		},
		{
			name:        "a single-node list needs only this node",
			self:        Answer{Cluster: "etcd-main", Token: "etcd-main", Node: "2001:db8::1", List: []string{"2001:db8::1"}, Phase: Fresh},
			granted:     true,
			reasonParts: []string{"every listed node confirms"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Evaluate(tt.self, tt.asked)
			if v.Granted != tt.granted || v.Approved {
				t.Errorf("granted %v approved %v, want %v false (%s)", v.Granted, v.Approved, tt.granted, v.Reason())
			}
			for _, part := range tt.reasonParts {
				if !strings.Contains(v.Reason(), part) {
					t.Errorf("reason %q does not say %q", v.Reason(), part)
				}
			}
		})
	}
}
