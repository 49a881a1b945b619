// Package membership keeps an etcd cluster's membership equal to the
// desired list of member IPs. It is split the way the rest of etcdlet is:
//
//   - Match and Plan are pure functions from (desired list, observation) to
//     a matching and at most one next action, with table tests;
//   - the Observer reads the cluster (MemberList, per-member Status), each
//     call with its own short timeout;
//   - the Reconciler executes the planned action under a cluster-wide etcd
//     lock, after re-observing and re-planning under that lock, so that any
//     number of agents act as a single writer.
package membership

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// Member is one etcd member as observed, with its health.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
	Health     Health
}

// Health is what the member's own Status endpoint said.
type Health struct {
	// Reachable is true when Status answered within the call timeout.
	Reachable bool
	// PeerListening is set for a member whose Status does not answer but
	// whose peer listener accepts connections: its server runs. etcd serves
	// a new member's client port only once it applied the leader's
	// snapshot of the keyspace and published itself (seconds after start,
	// up to etcd's request timeout more when its first publication is
	// lost), while the learner can be promoted as soon as the snapshot
	// arrived.
	PeerListening bool
	// Problem says why the member does not take part in the cluster's
	// raft as itself (unreachable, another cluster's or member's identity,
	// no leader); empty when it does.
	Problem string
	// WrongIdentity is set when the member's endpoint answered as another
	// cluster's member or as another member: whatever runs there is not
	// this member.
	WrongIdentity bool
	// Alarms are the alarms this member raised (NOSPACE, CORRUPT): the
	// member runs in raft, but its storage needs an operator.
	Alarms           []string
	Leader           uint64
	RaftTerm         uint64
	RaftIndex        uint64
	RaftAppliedIndex uint64
	DBSize           int64
	// Version is the member's etcd server version; StorageVersion the
	// version of its data (etcd 3.6 and later). DowngradeTarget is the
	// version a downgrade enabled in the cluster goes to, as the member
	// reports it ("" when none is enabled).
	Version         string
	StorageVersion  string
	DowngradeTarget string
}

// InRaft means the member answered Status as itself, in the observed
// cluster, and knows a leader: it votes and takes part in replication.
// This, not the absence of alarms, is what quorum is counted in.
func (m Member) InRaft() bool { return m.Health.Reachable && m.Health.Problem == "" }

// Applying means a voter's server runs (its peer port listens) without
// answering on its client port: promoted while it applied the keyspace,
// or restarting.
func (m Member) Applying() bool { return !m.IsLearner && !m.InRaft() && m.Health.PeerListening }

// Healthy means the member is in raft and raised no alarm.
func (m Member) Healthy() bool { return m.InRaft() && len(m.Health.Alarms) == 0 }

// Started means the member has published its name and client URLs, which
// etcd does once its server runs. An unstarted member was added (or listed
// at bootstrap) but its process has not joined yet.
func (m Member) Started() bool { return m.Name != "" && len(m.ClientURLs) > 0 }

// IDString renders a member ID the way etcd and etcd-druid do: lower-case
// hex without padding.
func IDString(id uint64) string { return strconv.FormatUint(id, 16) }

// Observation is one consistent view of the cluster.
type Observation struct {
	ClusterID uint64
	// Pinned is the cluster this agent belongs to; 0 before it joined or
	// bootstrapped one.
	Pinned uint64
	// LeaderID is the leader as reported by the healthy members; 0 if none.
	LeaderID uint64
	Members  []Member
	// Foreign lists endpoints that answered for another cluster.
	Foreign []Foreign
	// Alarms are the cluster's alarms, each with the member that raised it.
	Alarms []etcdclient.Alarm
	// Stale lists member IDs that this node's agent knows are its own
	// earlier incarnation with lost data: they can never become healthy
	// again and must be removed before the node rejoins as a learner.
	Stale []uint64
	// Expired lists learners that were not promoted within the learner
	// timeout: they are removed, so that no learner holds etcd's single
	// learner slot for ever.
	Expired []uint64
	// CatchingUp lists learners whose promotion etcd refused as not in
	// sync with the leader (etcdclient.LearnerNotReady) at this agent,
	// for as long as they run without serving their client port.
	CatchingUp []uint64
	// Local is the member of the agent that plans, when it has one and
	// knows it (0 otherwise): its own learner it promotes as soon as etcd
	// allows, while the other agents leave that learner to it.
	Local uint64
	// HeldBack lists peer URLs whose learner expired recently: they are
	// not added again before the others had their turn.
	HeldBack []string
	// Lists is what the agents' posted lists say (lists.go): a change
	// about an address they disagree on waits, and so does the removal of
	// a healthy voter while this agent's list is young.
	Lists Agreement
}

// Ambiguous is true when this agent belongs to no cluster yet and the
// endpoints it asked answer for more than one: it cannot tell which is
// its own, and acts for neither.
func (o Observation) Ambiguous() bool { return o.Pinned == 0 && len(o.Foreign) > 0 }

func (o Observation) isStale(id uint64) bool { return slices.Contains(o.Stale, id) }

// Member returns the member with the given ID.
func (o Observation) Member(id uint64) (Member, bool) {
	for _, m := range o.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// WithPeerURL returns the member with this peer URL, whether or not it
// answers.
func (o Observation) WithPeerURL(peerURL string) (Member, bool) {
	for _, m := range o.Members {
		if slices.Contains(m.PeerURLs, peerURL) {
			return m, true
		}
	}
	return Member{}, false
}

// Answering returns the member with this peer URL whose own endpoint
// answered as that member: the local member as far as the cluster can
// tell, when only the node's peer URL is known.
func (o Observation) Answering(peerURL string) (Member, bool) {
	for _, m := range o.Members {
		if m.Health.Reachable && !m.Health.WrongIdentity && slices.Contains(m.PeerURLs, peerURL) {
			return m, true
		}
	}
	return Member{}, false
}

func (m Member) String() string {
	name := m.Name
	if name == "" {
		name = "(unstarted)"
	}
	if len(m.PeerURLs) == 0 {
		return fmt.Sprintf("%s [%s]", name, IDString(m.ID))
	}
	return fmt.Sprintf("%s [%s] %s", name, IDString(m.ID), m.PeerURLs[0])
}
