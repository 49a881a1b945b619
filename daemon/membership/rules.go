package membership

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The rule book: what may go down, go, or lead, judged on one
// observation. Every caller that stops, removes or moves a member asks
// here (the planner, `etcdlet member`, the member-restart task, the
// rolling defragmentation), so that one change to a rule reaches them
// all. Like etcd's own IsReadyTo… checks, each rule is a pure function
// that says no with the numbers.
//
// One meaning of healthy runs through them: a voter counts toward
// quorum when it answers as itself in this cluster and follows a leader
// (InRaft), and is not this node's stale incarnation. An alarm does not
// take a member out of the quorum: it still votes and replicates.

// Quorum is the number of voters that must agree: a majority.
func Quorum(voters int) int { return voters/2 + 1 }

// MaxLeaderLag is how far a member's applied index may trail the
// leader's for it to take leadership. Raft's transfer waits until the
// transferee's log matches the leader's and stalls proposals meanwhile; a
// member further behind (restoring a snapshot) would stall writes that
// long, or time out.
const MaxLeaderLag = 1000

// Counts reports whether m counts toward quorum: a voter in raft that is
// not this node's stale incarnation.
func (o Observation) Counts(m Member) bool { return !m.IsLearner && m.InRaft() && !o.isStale(m.ID) }

// Voters counts the voting members and how many of them count toward
// quorum.
func (o Observation) Voters() (voters, counted int) {
	for _, m := range o.Members {
		if m.IsLearner {
			continue
		}
		voters++
		if o.Counts(m) {
			counted++
		}
	}
	return voters, counted
}

// HasQuorum says whether enough voters count for a change to commit.
func (o Observation) HasQuorum() error {
	voters, counted := o.Voters()
	if voters > 0 && counted < Quorum(voters) {
		return fmt.Errorf("%d of %d voters are healthy, quorum is %d", counted, voters, Quorum(voters))
	}
	return nil
}

// MayRemove says whether member id may leave the cluster for good: the
// voters that remain keep a quorum of healthy ones. A learner does not
// vote, and neither does a voter outside raft: removing either leaves
// the count as it is (and Quorum(voters-1) <= Quorum(voters)).
func (o Observation) MayRemove(id uint64) error {
	m, ok := o.Member(id)
	if !ok || m.IsLearner {
		return nil
	}
	voters, counted := o.Voters()
	if voters == 1 {
		return errors.New("it is the last voter: removing it would end the cluster")
	}
	after := counted
	if o.Counts(m) {
		after--
	}
	if q := Quorum(voters - 1); after < q {
		return fmt.Errorf("%d of %d voters are healthy; removing it would leave %d healthy of %d, below quorum %d", counted, voters, after, voters-1, q)
	}
	return nil
}

// MayStop says whether member id may stall or stop for a while (a
// defragmentation, a restart) while the cluster keeps writing: the other
// voters that count are a quorum of all the voters, which stay voters
// meanwhile.
func (o Observation) MayStop(id uint64) error {
	voters, others := 0, 0
	for _, m := range o.Members {
		if m.IsLearner {
			continue
		}
		voters++
		if m.ID != id && o.Counts(m) {
			others++
		}
	}
	if q := Quorum(voters); others < q {
		return fmt.Errorf("%d other of %d voters are healthy; quorum needs %d while it is down", others, voters, q)
	}
	return nil
}

// MayRestart says whether member id may stop for a planned restart. A
// planned stop asks more than MayStop, as a disruption budget of one
// does: no other voter is unhealthy or raised an alarm, and no learner is
// joining (its promotion would change the voters meanwhile). Then a
// failure elsewhere during the restart does not cost quorum either. In
// one- and two-voter clusters no member can stop without stopping the
// cluster; they are refused.
func (o Observation) MayRestart(id uint64) error {
	var problems []string
	for _, m := range o.Members {
		switch {
		case m.ID == id:
		case m.IsLearner:
			problems = append(problems, fmt.Sprintf("%s is a learner joining the cluster; wait until it is promoted", m.displayName()))
		case !m.Healthy() || o.isStale(m.ID):
			problems = append(problems, fmt.Sprintf("%s is not healthy (%s)", m.displayName(), cmp.Or(m.Health.Problem+strings.Join(m.Health.Alarms, ","), "no reason given")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("another member is not ready, and this member's restart could cost quorum: %s", strings.Join(problems, "; "))
	}
	if err := o.MayStop(id); err != nil {
		voters, _ := o.Voters()
		return fmt.Errorf("a cluster of %d voters has no quorum without this member (%w): restarting it stops the cluster for that time; restart it in a maintenance window", voters, err)
	}
	return nil
}

// MayLead says whether member id may take leadership now: a voter that
// counts, raised no alarm, and is within MaxLeaderLag of the leader.
func (o Observation) MayLead(id uint64) error {
	m, ok := o.Member(id)
	if !ok {
		return fmt.Errorf("member %s is not in the cluster", IDString(id))
	}
	if err := o.mayTakeOver(m); err != nil {
		return err
	}
	if len(m.Health.Alarms) > 0 {
		return fmt.Errorf("it is not healthy: alarm %s", strings.Join(m.Health.Alarms, ", "))
	}
	return nil
}

// mayTakeOver is MayLead without the alarms, which Transferee weighs
// itself.
func (o Observation) mayTakeOver(m Member) error {
	switch {
	case m.IsLearner:
		return errors.New("it is a learner; a learner cannot lead")
	case o.isStale(m.ID):
		return errors.New("it is this node's earlier incarnation, whose data is gone")
	case !m.InRaft():
		return fmt.Errorf("it is not healthy: %s", m.Health.Problem)
	}
	if leader, ok := o.Member(o.LeaderID); ok && leader.Health.RaftAppliedIndex > m.Health.RaftAppliedIndex+MaxLeaderLag {
		return fmt.Errorf("it is %d applied entries behind the leader (at most %d)", leader.Health.RaftAppliedIndex-m.Health.RaftAppliedIndex, MaxLeaderLag)
	}
	return nil
}

// Transferee picks who takes leadership over from the member leaving,
// among the members eligible (nil: all) that could lead. It ranks them:
// no alarm raised; then those prefer says (nil: none); then the one
// furthest along; then the lowest ID, so that every agent picks the same
// one. A member that raised NOSPACE leads only when none without an alarm
// can: NOSPACE is usually raised by every member at once, and the
// leadership must still move for the defragmentation that clears it. One
// that raised CORRUPT never leads.
func (o Observation) Transferee(leaving uint64, eligible, prefer func(Member) bool) (Member, bool) {
	var best *Member
	better := func(c, b Member) bool {
		if ca, ba := len(c.Health.Alarms) == 0, len(b.Health.Alarms) == 0; ca != ba {
			return ca
		}
		if cp, bp := prefer != nil && prefer(c), prefer != nil && prefer(b); cp != bp {
			return cp
		}
		if c.Health.RaftAppliedIndex != b.Health.RaftAppliedIndex {
			return c.Health.RaftAppliedIndex > b.Health.RaftAppliedIndex
		}
		return c.ID < b.ID
	}
	for i := range o.Members {
		c := &o.Members[i]
		if c.ID == leaving || o.mayTakeOver(*c) != nil || slices.Contains(c.Health.Alarms, pb.AlarmType_CORRUPT.String()) || (eligible != nil && !eligible(*c)) {
			continue
		}
		if best == nil || better(*c, *best) {
			best = c
		}
	}
	if best == nil {
		return Member{}, false
	}
	return *best, true
}

func (m Member) displayName() string { return cmp.Or(m.Name, IDString(m.ID)) }
