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
	// PeerListening is set for a learner whose Status does not answer but
	// whose peer listener accepts connections: its server runs. etcd serves
	// a learner's client port only once it published itself (seconds after
	// start), while the learner can be promoted almost at once.
	PeerListening bool
	// Problem explains why the member is not healthy; empty when healthy.
	Problem          string
	Leader           uint64
	RaftTerm         uint64
	RaftIndex        uint64
	RaftAppliedIndex uint64
	DBSize           int64
	Version          string
}

// Healthy means the member answered Status, knows a leader and reports no
// errors (alarms such as NOSPACE count as errors).
func (m Member) Healthy() bool { return m.Health.Reachable && m.Health.Problem == "" }

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
	// LeaderID is the leader as reported by the healthy members; 0 if none.
	LeaderID uint64
	Members  []Member
	// Stale lists member IDs that this node's agent knows are its own
	// earlier incarnation with lost data: they can never become healthy
	// again and must be removed before the node rejoins as a learner.
	Stale []uint64
}

// Voters counts voting members and how many of them are healthy.
func (o Observation) Voters() (voters, healthy int) {
	for _, m := range o.Members {
		if m.IsLearner {
			continue
		}
		voters++
		if m.Healthy() && !o.isStale(m.ID) {
			healthy++
		}
	}
	return voters, healthy
}

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

// Answering returns the member with this peer URL whose own endpoint
// answered: the local member as far as the cluster can tell, when only
// the node's peer URL is known.
func (o Observation) Answering(peerURL string) (Member, bool) {
	for _, m := range o.Members {
		if m.Health.Reachable && slices.Contains(m.PeerURLs, peerURL) {
			return m, true
		}
	}
	return Member{}, false
}

// Quorum is the number of voters that must agree: a majority.
func Quorum(voters int) int { return voters/2 + 1 }

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
