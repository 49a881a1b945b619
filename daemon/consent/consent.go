// Package consent decides whether the listed nodes may bootstrap a new
// etcd cluster. A node bootstraps only when every listed node positively
// confirms that it is fresh (no data, never a member) and sees the same
// list, or is bootstrapping that same cluster already; or when the
// operator approved a bootstrap of that list on this node (etcdlet
// bootstrap). Silence is no consent: a listed node that does not answer
// may be the host of the only member, down or cut off, and a bootstrap
// beside it would split the cluster in two (docs/membership.md).
//
// Each agent answers the question for its own node over the agent peer
// endpoint (agent.peerPort on the node address, TLS with the peer
// certificates when configured); Evaluate is the pure rule.
package consent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Phase is where a node stands with respect to bootstrapping.
type Phase string

// Phases a node answers with.
const (
	// Fresh: no data, never a member of any cluster.
	Fresh Phase = "fresh"
	// Bootstrapping: started a bootstrap of the cluster Answer.List names,
	// and not yet a member of a cluster with quorum.
	Bootstrapping Phase = "bootstrapping"
	// Member: this node has been a member of a cluster.
	Member Phase = "member"
	// HasData: the data dir holds etcd data.
	HasData Phase = "has-data"
	// NotListed: the node's own list does not name it.
	NotListed Phase = "not-listed"
	// Starting: the agent has not finished its first look yet.
	Starting Phase = "starting"
	// Promised: the node agreed to bootstrap another list, and that
	// bootstrap is not known to have been abandoned.
	Promised Phase = "promised"
	// Explicit: no data, never a member, but the node forms a cluster only
	// on an operator's act (cluster.bootstrap explicit or never): it
	// consents to no bootstrap of the listed nodes together and promises
	// none. Agents that predate it read an unknown phase as a refusal.
	Explicit Phase = "explicit"
	// Founding: the node decided to found a one-member cluster on an
	// operator's act and its member has not started yet.
	Founding Phase = "founding"
)

// Answer is one node's answer to "may we bootstrap?".
type Answer struct {
	// Cluster and Token are the node's cluster.name and bootstrap token.
	Cluster string `json:"cluster"`
	Token   string `json:"token"`
	// Node is the node's own address.
	Node string `json:"node"`
	// List is the member list in force on the node, sorted.
	List  []string `json:"list"`
	Phase Phase    `json:"phase"`
	// ClusterID is the cluster the node belongs to, when it belongs to one.
	ClusterID string `json:"clusterID,omitempty"`
	// Approved is set when the operator approved a new cluster of List on
	// that node (etcdlet bootstrap --approve): it founds one, and gives
	// consent to no bootstrap beside it.
	Approved bool `json:"approved,omitempty"`
	// ApprovedAt is when that approval was given: of two approved nodes,
	// the one approved first founds (EvaluateFounding).
	ApprovedAt time.Time `json:"approvedAt,omitzero"`
	// Promised is the list the node agreed to bootstrap, if any.
	Promised []string `json:"promised,omitempty"`
	// Founder is the node's cluster.founder, if set.
	Founder string `json:"founder,omitempty"`
	// Detail says what the phase rests on, for humans.
	Detail string `json:"detail,omitempty"`
}

// Consents reports whether the answer agrees to a bootstrap of the same
// cluster with the same list, and if not, why.
func (a Answer) Consents(want Answer) (bool, string) {
	switch {
	case a.Cluster != want.Cluster || a.Token != want.Token:
		return false, fmt.Sprintf("it belongs to cluster %q (token %q), not %q (token %q)", a.Cluster, a.Token, want.Cluster, want.Token)
	case a.Node != want.Node:
		return false, fmt.Sprintf("it answers as node %s", a.Node)
	case !slices.Equal(a.List, want.List):
		return false, fmt.Sprintf("its list is [%s], not [%s]", strings.Join(a.List, " "), strings.Join(want.List, " "))
	case a.Approved:
		// An approval founds a one-member cluster there, with an identity
		// of its own; a bootstrap of the list beside it would be a second.
		return false, "the operator approved a new cluster there: it founds one, which this node joins"
	case a.Phase == Fresh || a.Phase == Bootstrapping:
		return true, ""
	default:
		detail := string(a.Phase)
		if a.Detail != "" {
			detail += ": " + a.Detail
		}
		return false, detail
	}
}

// Asked is what asking one listed node gave.
type Asked struct {
	Node   netip.Addr
	Answer Answer
	Err    error // nil when the node answered
}

// Verdict is the outcome of Evaluate.
type Verdict struct {
	// Granted: this node may bootstrap.
	Granted bool
	// Approved: granted on the operator's approval rather than on every
	// node's answer.
	Approved bool
	// Silent and Refusing name the nodes that did not answer and the ones
	// that answered no, each with why.
	Silent   []string
	Refusing []string
	// Founding: the verdict is on founding a one-member cluster
	// (EvaluateFounding), not on bootstrapping the listed nodes together.
	Founding bool
}

// Reason says why the verdict is what it is.
func (v Verdict) Reason() string {
	var parts []string
	if len(v.Refusing) > 0 {
		parts = append(parts, "refused by "+strings.Join(v.Refusing, "; "))
	}
	if len(v.Silent) > 0 {
		parts = append(parts, "no answer from "+strings.Join(v.Silent, "; "))
	}
	switch {
	case v.Granted && v.Approved && len(parts) > 0:
		return "approved by the operator (etcdlet bootstrap) despite " + strings.Join(parts, "; ")
	case v.Granted && v.Approved:
		return "approved by the operator, and no listed node stands against it"
	case v.Granted && v.Founding:
		return "cluster.founder names this node, and every other listed node confirms it holds no data and names this node as cluster.founder too"
	case v.Granted:
		return "every listed node confirms it is fresh and sees the same list"
	case v.Founding:
		return "not every listed node confirms it holds no data and founds nothing itself: " + strings.Join(parts, "; ")
	default:
		return "not every listed node confirms it is fresh: " + strings.Join(parts, "; ")
	}
}

// Evaluate applies the rule: self is this node's own answer (the one it
// would give), asked are the other listed nodes'. A node that answers no
// (it has data, has been a member, sees another list, is approved to
// found a cluster itself) blocks: a cluster, or another bootstrap, exists
// or may; so does one whose agent refuses to answer this node
// (RefusedError), and one that does not answer. An operator who wants a
// cluster without the silent nodes approves a founding instead
// (EvaluateFounding): a cluster of one, with an identity of its own.
func Evaluate(self Answer, asked []Asked) Verdict {
	var v Verdict
	if ok, why := self.Consents(self); !ok {
		v.Refusing = append(v.Refusing, fmt.Sprintf("this node (%s)", why))
	}
	for _, a := range asked {
		switch {
		case IsRefused(a.Err):
			// Its agent answers, and not yes: it does not take this node
			// for a listed peer (another list, a certificate that does not
			// name this node's address).
			v.Refusing = append(v.Refusing, fmt.Sprintf("%s (%v)", a.Node, a.Err))
			continue
		case a.Err != nil:
			v.Silent = append(v.Silent, fmt.Sprintf("%s (%v)", a.Node, a.Err))
			continue
		}
		want := self
		want.Node = a.Node.String()
		if ok, why := a.Answer.Consents(want); !ok {
			v.Refusing = append(v.Refusing, fmt.Sprintf("%s (%s)", a.Node, why))
		}
	}
	v.Granted = len(v.Refusing) == 0 && len(v.Silent) == 0
	return v
}
