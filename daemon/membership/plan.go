package membership

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/daemon/identity"
)

// Matching pairs the desired list with the observed members. Members are
// matched by name and peer URL, never by position.
type Matching struct {
	Matched   []Pair
	Missing   []identity.Member
	Extra     []Member
	Conflicts []Conflict
}

// listed reports whether m is a desired member's.
func (m Matching) listed(c Member) bool {
	return slices.ContainsFunc(m.Matched, func(p Pair) bool { return p.Member.ID == c.ID })
}

// Pair is a desired member and the etcd member that is it.
type Pair struct {
	Desired identity.Member
	Member  Member
}

// Conflict is a desired identity that an etcd member half-matches: it
// holds the desired peer URL under another name, or the desired name with
// other peer URLs. etcdlet never guesses which side is right.
type Conflict struct {
	Desired identity.Member
	Member  Member
	Reason  string
}

// Match classifies every desired identity and every observed member.
func Match(desired []identity.Member, members []Member) Matching {
	byPeerURL := map[string]int{}
	byName := map[string]int{}
	for i, d := range desired {
		byPeerURL[d.PeerURL] = i
		byName[d.Name] = i
	}
	var m Matching
	claimed := make([]bool, len(desired))
	for _, member := range members {
		i, urlMatch := -1, false
		for _, u := range member.PeerURLs {
			if j, ok := byPeerURL[u]; ok {
				i, urlMatch = j, true
				break
			}
		}
		switch {
		case urlMatch && (member.Name == "" || member.Name == desired[i].Name):
			m.Matched = append(m.Matched, Pair{Desired: desired[i], Member: member})
		case urlMatch:
			m.Conflicts = append(m.Conflicts, Conflict{Desired: desired[i], Member: member,
				Reason: fmt.Sprintf("member %q holds peer URL %s, which belongs to %s", member.Name, desired[i].PeerURL, desired[i].Name)})
		default:
			j, nameMatch := byName[member.Name]
			if !nameMatch {
				m.Extra = append(m.Extra, member)
				continue
			}
			i = j
			m.Conflicts = append(m.Conflicts, Conflict{Desired: desired[i], Member: member,
				Reason: fmt.Sprintf("member %s has peer URLs %v, want %s", member.Name, member.PeerURLs, desired[i].PeerURL)})
		}
		claimed[i] = true
	}
	for i, d := range desired {
		if !claimed[i] {
			m.Missing = append(m.Missing, d)
		}
	}
	return m
}

// ActionKind names a membership change.
type ActionKind string

// The membership changes etcdlet makes.
const (
	ActionAddLearner ActionKind = "add-learner"
	ActionPromote    ActionKind = "promote"
	ActionRemove     ActionKind = "remove"
	ActionMoveLeader ActionKind = "move-leader"
	// ActionDisarm clears the alarm of a member that is no longer in the
	// cluster: nobody else can, and it would hold the cluster's writes.
	ActionDisarm ActionKind = "disarm-alarm"
)

// Action is one membership change.
type Action struct {
	Kind ActionKind
	// Name and PeerURL identify the member the action is about.
	Name    string
	PeerURL string
	// MemberID is set for promote, remove and move-leader (the current leader).
	MemberID uint64
	// TransfereeID is the new leader for move-leader.
	TransfereeID uint64
	// Alarm is the alarm type for disarm-alarm.
	Alarm string
	// Expired marks the removal of a learner that was not promoted within
	// the learner timeout.
	Expired bool
	// Reason says why, in words for logs and status.
	Reason string
}

func (a Action) String() string {
	switch a.Kind {
	case ActionAddLearner:
		return fmt.Sprintf("add %s (%s) as learner: %s", a.Name, a.PeerURL, a.Reason)
	case ActionMoveLeader:
		return fmt.Sprintf("move leadership from %s to member %s: %s", a.Name, IDString(a.TransfereeID), a.Reason)
	case ActionDisarm:
		return fmt.Sprintf("disarm the %s alarm of member %s: %s", a.Alarm, IDString(a.MemberID), a.Reason)
	default:
		return fmt.Sprintf("%s %s [%s]: %s", a.Kind, a.Name, IDString(a.MemberID), a.Reason)
	}
}

// WaitReason classifies why a needed change is not made now.
type WaitReason string

// Why a change waits. Each is a refusal the planner makes for safety.
const (
	WaitEmptyList         WaitReason = "EmptyList"         // an empty list never removes members
	WaitNoQuorum          WaitReason = "NoQuorum"          // the cluster cannot commit any change
	WaitWouldLoseQuorum   WaitReason = "WouldLoseQuorum"   // removal would leave too few healthy voters
	WaitLearnerPending    WaitReason = "LearnerPending"    // etcd allows one learner at a time
	WaitLearnerNotStarted WaitReason = "LearnerNotStarted" // promotion waits for the learner's server
	WaitLearnerCatchingUp WaitReason = "LearnerCatchingUp" // the learner still copies the keyspace
	WaitUnhealthyVoter    WaitReason = "UnhealthyVoter"    // etcd refuses adds until every voter is connected
	WaitJoinPending       WaitReason = "JoinPending"       // a replacement votes before the old member leaves
	WaitNoTransferee      WaitReason = "NoTransferee"      // no healthy voter can take leadership
	WaitConflict          WaitReason = "Conflict"          // identity half-matches; needs an operator
	WaitForeign           WaitReason = "Foreign"           // an endpoint answers for another cluster
	WaitOrphaningList     WaitReason = "OrphaningList"     // the list shares no address with the voters
	WaitLearnerBackoff    WaitReason = "LearnerBackoff"    // its learner expired; others join first
	// WaitListsDisagree: agents hold lists that differ about the address,
	// and a change following one list would be undone by the other.
	WaitListsDisagree WaitReason = "ListsDisagree"
	// WaitListSettling: the list changed moments ago; a healthy voter is
	// removed only once the list held for the hold-down.
	WaitListSettling WaitReason = "ListSettling"
	// WaitRemovedUnderNewerList: the address's member was removed under a
	// list newer than the one this agent holds.
	WaitRemovedUnderNewerList WaitReason = "RemovedUnderNewerList"
	// WaitNodeRefuses: the node refuses to join (its moves-aside limit).
	WaitNodeRefuses WaitReason = "NodeRefuses"
)

// Wait is a change that is needed but refused for now, and why.
type Wait struct {
	Kind   ActionKind
	Name   string
	Reason WaitReason
	Detail string
}

func (w Wait) String() string {
	if w.Name == "" {
		return fmt.Sprintf("%s: %s", w.Reason, w.Detail)
	}
	return fmt.Sprintf("%s %s waits (%s): %s", w.Kind, w.Name, w.Reason, w.Detail)
}

// Plan is what the agent does next: at most one change (one change in
// flight at a time; the next pass re-observes), and everything else that
// is needed but waits.
type Plan struct {
	Next    *Action
	Waiting []Wait
}

// Converged is true when nothing is to be done or waits.
func (p Plan) Converged() bool { return p.Next == nil && len(p.Waiting) == 0 }

// WaitsFor reports whether the plan waits for reason, for the member named
// name when name is not empty.
func (p Plan) WaitsFor(reason WaitReason, name string) bool {
	return slices.ContainsFunc(p.Waiting, func(w Wait) bool { return w.Reason == reason && (name == "" || w.Name == name) })
}

// MakePlan decides the next membership change. Its order encodes the
// safety rules of docs/membership.md:
//
//  1. an empty list, a list that shares no address with the voters (it
//     would orphan the cluster), answers from two clusters to an agent
//     that belongs to neither, or a cluster without quorum: no change;
//  2. alarms of members that left the cluster are disarmed;
//  3. learners that are not listed, and learners not promoted within the
//     learner timeout, are removed (they do not vote, so their removal is
//     always safe, and it frees etcd's single learner slot);
//  4. dead members that are not listed (or stale incarnations of this
//     node) go next, when the healthy voters keep quorum: etcd refuses to
//     add anyone while a voter is disconnected, so they block every join;
//  5. a listed learner is promoted once its server runs as itself (etcd
//     says when it is in sync; while it copies the keyspace, only its own
//     agent keeps trying);
//  6. a missing member is added as a learner, one at a time, only when
//     every voter takes part in raft, and never for an address that
//     answers for another cluster;
//  7. a voter that is not listed is removed only when no listed member is
//     still joining (replacements vote and serve before the old one
//     leaves), when quorum of healthy voters holds afterwards, and after
//     the leader has handed leadership over.
func MakePlan(desired []identity.Member, obs Observation) Plan {
	var p Plan
	obs.Stale = silentStale(obs)
	if len(desired) == 0 {
		p.wait("", "", WaitEmptyList, "the member list is empty; an empty list never removes members")
		return p
	}
	if c, ok := otherNaming(Match(desired, obs.Members)); ok {
		// The listed members run under names of another cluster.name than
		// this agent's: its configuration is not the cluster's, and
		// whatever it added or promoted would be the others' conflict.
		p.wait("", "", WaitConflict, fmt.Sprintf("the cluster's members are named as for another cluster.name than this agent's (%s); this agent makes no change until its cluster.name is the cluster's", c.Reason))
		return p
	}
	if orphaning(desired, obs) {
		p.wait("", "", WaitOrphaningList, "the list shares no address with the cluster's voters, so following it would orphan the cluster; replace members in steps that keep one voter listed")
		return p
	}
	if obs.Ambiguous() {
		p.wait("", "", WaitForeign, fmt.Sprintf("this agent belongs to no cluster yet and the endpoints answer for more than one (%s): it acts for neither", foreignList(obs.Foreign)))
		return p
	}
	if err := obs.HasQuorum(); err != nil {
		p.wait("", "", WaitNoQuorum, err.Error()+"; no membership change can commit")
		return p
	}
	// 2. Alarms left behind by members that are gone.
	for _, a := range obs.Alarms {
		if _, ok := obs.Member(a.MemberID); !ok {
			return p.next(Action{Kind: ActionDisarm, MemberID: a.MemberID, Alarm: a.Type, Reason: "the member that raised it is no longer in the cluster"})
		}
	}
	m := Match(desired, obs.Members)
	own := ownList(desired, obs.Lists)
	for _, c := range m.Conflicts {
		p.wait(ActionAddLearner, c.Desired.Name, WaitConflict, c.Reason+"; resolve by hand (etcdctl member remove/update)")
	}
	if obs.Lists.Known && obs.Lists.Own.Since == 0 {
		p.wait("", "", WaitListsDisagree, fmt.Sprintf("this agent's list %s [%s] is not posted for the other agents to see yet; no change follows it before it is",
			own.Digest(), strings.Join(own.List, " ")))
		return p
	}

	// A stale incarnation of this node is desired by IP but must go.
	extra := slices.Clone(m.Extra)
	var learners []Member
	for _, pair := range m.Matched {
		switch {
		case obs.isStale(pair.Member.ID):
			extra = append(extra, pair.Member)
		case pair.Member.IsLearner:
			learners = append(learners, pair.Member)
		}
	}
	slices.SortFunc(extra, func(a, b Member) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })

	// 3. Extra and expired learners, and learners of nodes that refuse
	// to join.
	for _, e := range extra {
		if e.IsLearner && !p.disputed(obs, own, ActionRemove, e.Name, addrOf(e), false) {
			return p.next(Action{Kind: ActionRemove, Name: e.Name, PeerURL: first(e.PeerURLs), MemberID: e.ID, Reason: "learner is not in the member list"})
		}
	}
	for _, l := range learners {
		name := nameOr(l, pairDesired(m, l.ID).Name)
		if slices.Contains(obs.Expired, l.ID) {
			return p.next(Action{Kind: ActionRemove, Name: name, PeerURL: first(l.PeerURLs), MemberID: l.ID, Expired: true,
				Reason: "learner was not promoted within the learner timeout (" + problemOr(l, "never in sync") + "); it frees the learner slot and its node rejoins"})
		}
		if post, ok := obs.Lists.refusing(addrOf(l)); ok && !l.Started() {
			return p.next(Action{Kind: ActionRemove, Name: name, PeerURL: first(l.PeerURLs), MemberID: l.ID,
				Reason: "its node refuses to join (" + post.Refusing + "); the learner would hold etcd's only learner slot for nothing"})
		}
	}
	// 4. Dead or stale voters that are not listed.
	for _, e := range extra {
		if e.IsLearner || (e.InRaft() && !obs.isStale(e.ID)) {
			continue
		}
		// A stale incarnation goes whatever the lists say; a dead member
		// that another agent's list names stays until the lists agree.
		if !obs.isStale(e.ID) && p.disputed(obs, own, ActionRemove, e.Name, addrOf(e), false) {
			continue
		}
		// Always safe here: the cluster has quorum (checked above), removing
		// a voter outside raft leaves the healthy count unchanged, and
		// Quorum(voters-1) <= Quorum(voters).
		reason := "unhealthy member is not in the member list"
		if obs.isStale(e.ID) {
			reason = "member is this node's earlier incarnation and its data is gone; it rejoins as a learner"
		}
		return p.removeOrMoveLeader(e, reason, obs, m)
	}
	// 5. Listed learners are promoted.
	if len(learners) > 0 {
		l := learners[0]
		name := nameOr(l, pairDesired(m, l.ID).Name)
		switch {
		case p.disputed(obs, own, ActionPromote, name, addrOf(l), true):
		case l.Health.WrongIdentity:
			// Whatever answers there is not this learner: promoting it
			// cannot succeed, and must not.
			p.wait(ActionPromote, name, WaitLearnerNotStarted, "the learner's endpoint answers as someone else: "+l.Health.Problem)
		case !l.InRaft() && l.Health.PeerListening && slices.Contains(obs.CatchingUp, l.ID) && l.ID != obs.Local:
			// etcd refused its promotion as not in sync, and it does not
			// serve its client port yet: it still copies the leader's
			// snapshot of the keyspace, or applies it. Its own agent tries
			// the promotion at a short pace (the case below), so that it
			// becomes a voter the moment etcd allows, which is as soon as
			// the leader knows the snapshot arrived: seconds before the
			// learner has applied it and published itself. The other
			// agents leave it to that one rather than take the lock in
			// turn, which would only keep each other waiting.
			p.wait(ActionPromote, name, WaitLearnerCatchingUp, "etcd refused its promotion as not in sync; it copies the keyspace, and its agent promotes it as soon as etcd allows")
		case l.InRaft() || l.Health.PeerListening:
			p = p.next(Action{Kind: ActionPromote, Name: name, PeerURL: first(l.PeerURLs), MemberID: l.ID, Reason: "listed learner joins the voters once in sync"})
		default:
			// Promoting a learner whose server does not run yet can only
			// fail; its agent starts it once it sees the learner.
			p.wait(ActionPromote, name, WaitLearnerNotStarted, "the learner's server does not run yet: "+l.Health.Problem)
		}
		for _, d := range m.Missing {
			p.wait(ActionAddLearner, d.Name, WaitLearnerPending, fmt.Sprintf("learner %s must be promoted first; etcd allows one learner at a time", name))
		}
		p.waitForJoins(extra, name)
		return p
	}
	// 6. Missing members are added as learners.
	if len(m.Missing) > 0 {
		if learner, ok := anyLearner(obs.Members); ok {
			for _, d := range m.Missing {
				p.wait(ActionAddLearner, d.Name, WaitLearnerPending, fmt.Sprintf("learner %s must be promoted or removed first; etcd allows one learner at a time", learner))
			}
		} else if sick := outsideRaft(obs); len(sick) > 0 {
			for _, d := range m.Missing {
				p.wait(ActionAddLearner, d.Name, WaitUnhealthyVoter, fmt.Sprintf("voter %s is not in raft; etcd refuses membership changes until every voter is connected", sick[0]))
			}
		} else if d, ok := p.pickMissing(m.Missing, obs); ok {
			p = p.next(Action{Kind: ActionAddLearner, Name: d.Name, PeerURL: d.PeerURL, Reason: "listed address is not a member"})
			for _, other := range m.Missing {
				if other.Name != d.Name && !p.waits(other.Name) {
					p.wait(ActionAddLearner, other.Name, WaitLearnerPending, "joins after "+d.Name+"; etcd allows one learner at a time")
				}
			}
			p.waitForJoins(extra, d.Name)
			return p
		}
	}
	// 7. Voters that are not listed.
	if joining := joiningName(m, learners, obs.Lists); joining != "" {
		p.waitForJoins(extra, joining)
		return p
	}
	if applying, ok := applyingVoter(m); ok {
		// A voter promoted before it applied the keyspace (or one that
		// restarts) runs without serving yet: a healthy voter leaves only
		// once the one that replaces it serves, so that the cluster never
		// counts on fewer working members than before. (Its published
		// name says nothing here: the leader applies the publication long
		// before the new member, which serves only once it applied it.)
		for _, e := range extra {
			if e.InRaft() {
				p.wait(ActionRemove, e.Name, WaitJoinPending, applying+" must serve first: its server runs, but it applies the keyspace or restarts; a replacement serves before the old member leaves")
			}
		}
		return p
	}
	for _, e := range extra {
		// The only voter is never extra here: a list without it is
		// orphaning, refused above. Learners, dead and stale voters had
		// their turn above.
		if e.IsLearner || !obs.Counts(e) {
			continue
		}
		switch quorum := obs.MayRemove(e.ID); {
		case quorum != nil:
			p.wait(ActionRemove, e.Name, WaitWouldLoseQuorum, quorum.Error())
		case p.disputed(obs, own, ActionRemove, e.Name, addrOf(e), false):
		case obs.Lists.Stable < obs.Lists.HoldDown:
			// Of all changes, removing a healthy voter is the one that
			// costs: its data is moved aside and the keyspace copied again
			// if the list wants it back. A list that flaps, or is written
			// in two steps, must cost nobody.
			p.wait(ActionRemove, e.Name, WaitListSettling, fmt.Sprintf("the list changed %s ago; a healthy voter is removed once the list has held for %s (agent.removalHoldDown)",
				obs.Lists.Stable.Round(time.Millisecond), obs.Lists.HoldDown))
		default:
			return p.removeOrMoveLeader(e, "member is not in the member list", obs, m)
		}
	}
	return p
}

// otherNaming tells an agent whose cluster.name is not the cluster's: no
// started voter at a listed address bears the name this agent expects,
// and one bears a name of another cluster.name's prefix. (A single member
// renamed by hand beside correctly named ones is only a conflict.)
func otherNaming(m Matching) (Conflict, bool) {
	for _, p := range m.Matched {
		if p.Member.Started() && !p.Member.IsLearner {
			return Conflict{}, false
		}
	}
	for _, c := range m.Conflicts {
		prefix := strings.TrimSuffix(c.Desired.Name, c.Desired.IP.String())
		if c.Member.Started() && !c.Member.IsLearner && !strings.HasPrefix(c.Member.Name, prefix) {
			return c, true
		}
	}
	return Conflict{}, false
}

// silentStale keeps of the stale reports those about members that do not
// answer in raft as themselves: a member that does is alive, whoever
// claims its address (a cloned host, a configuration with another node's
// address), and is never removed as stale.
func silentStale(obs Observation) []uint64 {
	var out []uint64
	for _, id := range obs.Stale {
		if m, ok := obs.Member(id); !ok || !m.InRaft() {
			out = append(out, id)
		}
	}
	return out
}

// ownList is this agent's list as the agents post it: the addresses of
// the desired members.
func ownList(desired []identity.Member, a Agreement) PostedList {
	own := a.Own
	addrs := make([]netip.Addr, len(desired))
	for i, d := range desired {
		addrs[i] = d.IP
	}
	own.List = SortedList(addrs)
	return own
}

// disputed reports whether agents' lists disagree about addr (this
// agent's list names it when ownHas): a change that follows this agent's
// list would be undone by an agent that follows the other, so it waits
// until they agree, and says which node holds which list.
func (p *Plan) disputed(obs Observation, own PostedList, kind ActionKind, name, addr string, ownHas bool) bool {
	if addr == "" {
		return false
	}
	others := obs.Lists.disagreeing(addr, ownHas)
	if len(others) == 0 {
		return false
	}
	verb := "does not name"
	if ownHas {
		verb = "names"
	}
	p.wait(kind, name, WaitListsDisagree, fmt.Sprintf("the agents' lists disagree about %s: this agent's list %s [%s] %s it, but %s; it waits until they agree",
		addr, own.Digest(), strings.Join(own.List, " "), verb, describeLists(others)))
	return true
}

// addrOf is the address a member's peer URL names ("" when none).
func addrOf(m Member) string {
	if ip, ok := identity.IPFromURL(first(m.PeerURLs)); ok {
		return ip.String()
	}
	return ""
}

// pickMissing chooses the missing member to add next: the first in list
// order whose address does not answer for another cluster and, while
// another can go first, whose learner did not expire recently. The others
// get a wait each.
func (p *Plan) pickMissing(missing []identity.Member, obs Observation) (identity.Member, bool) {
	var eligible, heldBack []identity.Member
	for _, d := range missing {
		addr := d.IP.String()
		if f, ok := foreignAt(obs, d.ClientURL); ok {
			p.wait(ActionAddLearner, d.Name, WaitForeign, fmt.Sprintf("%s; never added to this cluster", f))
			continue
		}
		if post, ok := obs.Lists.refusing(addr); ok {
			p.wait(ActionAddLearner, d.Name, WaitNodeRefuses, "its node refuses to join: "+post.Refusing)
			continue
		}
		if r, ok := obs.Lists.removedUnderNewer(addr); ok {
			p.wait(ActionAddLearner, d.Name, WaitRemovedUnderNewerList, fmt.Sprintf("member %s was removed at %s by %s under list %s (posted at revision %d), newer than this agent's (revision %d); it is added back only under a list posted after that",
				r.MemberID, r.At.UTC().Format(time.RFC3339), r.By, r.Digest, r.Since, obs.Lists.Own.Since))
			continue
		}
		if p.disputed(obs, ownList(nil, obs.Lists), ActionAddLearner, d.Name, addr, true) {
			continue
		}
		if slices.Contains(obs.HeldBack, d.PeerURL) {
			heldBack = append(heldBack, d)
			continue
		}
		eligible = append(eligible, d)
	}
	if len(eligible) == 0 && len(heldBack) > 0 {
		return heldBack[0], true // nobody else is waiting for the slot
	}
	for _, d := range heldBack {
		p.wait(ActionAddLearner, d.Name, WaitLearnerBackoff, "its learner was not promoted in time; the other listed addresses join first")
	}
	if len(eligible) == 0 {
		return identity.Member{}, false
	}
	return eligible[0], true
}

// orphaning reports whether the list names none of the current voters
// (by name and peer URL; a voter that only half-matches is not named):
// following it would remove every voter and leave the cluster to members
// that never held its data. It is also how an agent that belongs to no
// cluster yet tells a cluster that is not its list's from its own.
func orphaning(desired []identity.Member, obs Observation) bool {
	voters := 0
	for _, m := range obs.Members {
		if !m.IsLearner {
			voters++
		}
	}
	for _, p := range Match(desired, obs.Members).Matched {
		if !p.Member.IsLearner {
			return false
		}
	}
	return voters > 0
}

func foreignAt(obs Observation, endpoint string) (Foreign, bool) {
	for _, f := range obs.Foreign {
		if f.Endpoint == endpoint {
			return f, true
		}
	}
	return Foreign{}, false
}

func foreignList(fs []Foreign) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

func problemOr(m Member, fallback string) string {
	if m.Health.Problem != "" {
		return m.Health.Problem
	}
	return fallback
}

// removeOrMoveLeader removes e, or first moves leadership away from it:
// removing the leader would cost an election with the cluster briefly
// unable to write.
func (p Plan) removeOrMoveLeader(e Member, reason string, obs Observation, m Matching) Plan {
	if e.ID != obs.LeaderID || obs.LeaderID == 0 {
		return p.next(Action{Kind: ActionRemove, Name: e.Name, PeerURL: first(e.PeerURLs), MemberID: e.ID, Reason: reason})
	}
	transferee, ok := obs.Transferee(e.ID, m.listed, nil)
	if !ok {
		p.wait(ActionRemove, e.Name, WaitNoTransferee, "member is the leader and no healthy listed voter can take over")
		return p
	}
	return p.next(Action{Kind: ActionMoveLeader, Name: e.Name, PeerURL: first(e.PeerURLs), MemberID: e.ID, TransfereeID: transferee.ID,
		Reason: "the leader hands leadership over before it is removed"})
}

func (p *Plan) waitForJoins(extra []Member, joining string) {
	for _, e := range extra {
		if e.InRaft() {
			p.wait(ActionRemove, e.Name, WaitJoinPending, joining+" must vote first; a replacement joins before the old member leaves")
		}
	}
}

// waits reports whether a wait is already recorded for the member name.
func (p *Plan) waits(name string) bool {
	return slices.ContainsFunc(p.Waiting, func(w Wait) bool { return w.Name == name })
}

func (p *Plan) wait(kind ActionKind, name string, reason WaitReason, detail string) {
	p.Waiting = append(p.Waiting, Wait{Kind: kind, Name: name, Reason: reason, Detail: detail})
}

func (p Plan) next(a Action) Plan {
	p.Next = &a
	return p
}

// joiningName names a listed member that is not yet a voter, if any; a
// node that refuses to join is not waited for.
func joiningName(m Matching, learners []Member, lists Agreement) string {
	if len(learners) > 0 {
		return nameOr(learners[0], pairDesired(m, learners[0].ID).Name)
	}
	for _, d := range m.Missing {
		if _, refuses := lists.refusing(d.IP.String()); !refuses {
			return d.Name
		}
	}
	return ""
}

// applyingVoter names a listed voter whose server runs (its peer port
// listens) but does not answer on its client port.
func applyingVoter(m Matching) (string, bool) {
	for _, pair := range m.Matched {
		if pair.Member.Applying() {
			return nameOr(pair.Member, pair.Desired.Name), true
		}
	}
	return "", false
}

func anyLearner(members []Member) (Member, bool) {
	for _, m := range members {
		if m.IsLearner {
			return m, true
		}
	}
	return Member{}, false
}

// outsideRaft lists the voters that do not take part in raft as
// themselves (or are this node's stale incarnation).
func outsideRaft(obs Observation) []Member {
	var sick []Member
	for _, m := range obs.Members {
		if !m.IsLearner && (!m.InRaft() || obs.isStale(m.ID)) {
			sick = append(sick, m)
		}
	}
	return sick
}

func pairDesired(m Matching, id uint64) identity.Member {
	for _, p := range m.Matched {
		if p.Member.ID == id {
			return p.Desired
		}
	}
	return identity.Member{}
}

func nameOr(m Member, fallback string) string {
	if m.Name != "" {
		return m.Name
	}
	return fallback
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Silent lists the listed members that ran and no longer take part in
// the cluster's raft as themselves (down, cut off, or answering as
// someone else): the agents wait for them and never remove them while
// they are listed, which is right for a host that comes back and wrong
// for one gone for good; only taking its IP off the list lets them go. A
// member added and not started yet is a join in progress, not silent.
func Silent(desired []identity.Member, obs Observation) []identity.Member {
	var out []identity.Member
	for _, p := range Match(desired, obs.Members).Matched {
		if p.Member.Started() && !p.Member.InRaft() {
			out = append(out, p.Desired)
		}
	}
	return out
}
