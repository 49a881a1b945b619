package consent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// With cluster.bootstrap explicit a new cluster forms on an operator's act
// on one node (etcdlet bootstrap --approve, or cluster.founder naming it);
// in consent mode an approval is such an act too (a cluster without the
// nodes that stay silent, or disaster recovery):
// that node founds a one-member cluster of itself, and the writer adds the
// other listed nodes as learners one at a time. No other node has to agree,
// for none of them forms a cluster on its own; but none may hold what the
// new cluster would split from: data, a membership, a bootstrap or a
// founding of its own, or an operator's act that names another node; and
// every one that answers must read the same list, so that none of them is
// left with a list that names none of the new cluster's members.

// EvaluateFounding applies that rule. self is this node's own answer: its
// Approved says the operator approved a founding here, its Founder is its
// cluster.founder; asked are the other listed nodes'. A node that does not
// answer is no objection only when the operator approved: cluster.founder
// is a standing setting that may outlive its purpose (a host rebuilt with
// the same configuration while the cluster's other hosts are down), and an
// approval is an act at a moment, by someone who looked at the answers.
func EvaluateFounding(self Answer, asked []Asked) Verdict {
	v := Verdict{Founding: true}
	switch self.Phase {
	case Fresh, Explicit, Founding:
		// Founding: its own mark, when it asks again before it starts.
	default:
		detail := string(self.Phase)
		if self.Detail != "" {
			detail += ": " + self.Detail
		}
		v.Refusing = append(v.Refusing, "this node ("+detail+")")
	}
	if f := self.Founder; f != "" && f != self.Node && slices.Contains(self.List, f) {
		v.Refusing = append(v.Refusing, fmt.Sprintf("this node (cluster.founder names %s: that node founds the cluster; approve there, or remove cluster.founder)", f))
	}
	for _, a := range asked {
		switch silent, why := FoundingObjection(self, a); {
		case why == "":
		case silent:
			v.Silent = append(v.Silent, fmt.Sprintf("%s (%s)", a.Node, why))
		default:
			v.Refusing = append(v.Refusing, fmt.Sprintf("%s (%s)", a.Node, why))
		}
	}
	if len(v.Refusing) == 0 && (len(v.Silent) == 0 || self.Approved) {
		v.Granted, v.Approved = true, self.Approved
	}
	return v
}

// FoundingObjection says why a listed node's answer stands against self
// founding a cluster ("" when it does not); silent says the node gave no
// answer yet, which only the operator's approval outweighs.
func FoundingObjection(self Answer, a Asked) (silent bool, why string) {
	ans := a.Answer
	switch {
	case IsRefused(a.Err):
		// Its agent answers and does not take this node for a listed peer.
		return false, a.Err.Error()
	case a.Err != nil:
		return true, a.Err.Error()
	case ans.Node != a.Node.String():
		return false, fmt.Sprintf("it answers as node %s", ans.Node)
	case ans.Cluster != self.Cluster:
		return false, fmt.Sprintf("it belongs to cluster %q, not %q", ans.Cluster, self.Cluster)
	case ans.Phase == Starting:
		return true, "its agent has not looked yet"
	case ans.Phase == Fresh && !slices.Equal(ans.List, self.List):
		// It bootstraps by consent (cluster.bootstrap consent) and may be
		// forming [its list] with others; with the same list it cannot, for
		// that needs this node's promise, which it does not give.
		return false, fmt.Sprintf("it bootstraps by consent and reads the list [%s]: it may be forming a cluster with other nodes", strings.Join(ans.List, " "))
	case (ans.Phase == Explicit || ans.Phase == NotListed) && !slices.Equal(ans.List, self.List):
		// A list change on its way: founding now could found from the list
		// that is going away, and a node that reads only the new one may
		// never find the cluster (its list names none of its members).
		return false, fmt.Sprintf("it reads the list [%s], not [%s]: found once every host reads the same list", strings.Join(ans.List, " "), strings.Join(self.List, " "))
	case ans.Phase != Fresh && ans.Phase != Explicit && ans.Phase != NotListed:
		detail := string(ans.Phase)
		if ans.Detail != "" {
			detail += ": " + ans.Detail
		}
		return false, detail
	case ans.Approved && !approvedFirst(self, ans):
		return false, "the operator approved a founding there too, not later than here: that node founds, and this one joins it (keep the approval on one node only)"
	case self.Founder == self.Node && ans.Founder != self.Founder:
		// Founding on cluster.founder: every host must name this node, or a
		// half-applied change of the setting could make two founders.
		return false, fmt.Sprintf("its cluster.founder is %s, not %s: the hosts' configurations disagree", orNone(ans.Founder), self.Founder)
	case ans.Founder != "" && ans.Founder != self.Node && slices.Contains(self.List, ans.Founder):
		return false, fmt.Sprintf("its cluster.founder is %s: that node founds the cluster", ans.Founder)
	}
	return false, ""
}

func orNone(s string) string {
	if s == "" {
		return "not set"
	}
	return s
}

// approvedFirst reports whether self's approval goes first of two: two
// operators who each approved a node, unaware of each other, get one
// cluster, founded by the node approved first (the lower address on a
// tie), rather than two nodes that each wait for the other's approval to
// go. An approval whose time is unknown (an older agent) goes first.
func approvedFirst(self, other Answer) bool {
	switch {
	case !self.Approved || self.ApprovedAt.IsZero() || other.ApprovedAt.IsZero():
		return false
	case !self.ApprovedAt.Equal(other.ApprovedAt):
		return self.ApprovedAt.Before(other.ApprovedAt)
	}
	a, errA := netip.ParseAddr(self.Node)
	b, errB := netip.ParseAddr(other.Node)
	return errA == nil && errB == nil && a.Less(b)
}
