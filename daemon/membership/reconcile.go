package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

// Reconciler executes planned membership changes as the single writer.
//
// Any agent may be the writer; the writer lock decides which one acts. The
// lock holder re-observes and re-plans under the lock before it acts, so
// two agents that planned concurrently never both act on a stale view:
// two removals that are each safe alone can never both happen. The locked
// section has a deadline well inside the lock's lease, and before every
// membership call the holder confirms that it still holds the lock and
// that the lease outlasts the call; any error around the lock closes its
// session, revoking the lease (docs/membership.md, "One writer at a time").
type Reconciler struct {
	Cluster  etcdclient.Cluster
	Locker   etcdclient.Locker
	Observer *Observer
	Log      *slog.Logger
	Policy   etcdclient.Policy
	// Section bounds the locked section: re-observe, plan, act.
	Section time.Duration
	// LearnerTimeout is how long a learner may stay unpromoted before it
	// is removed.
	LearnerTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// OnChange is called after every membership call with its outcome.
	OnChange func(a Action, r etcdclient.Result)

	mu       sync.Mutex
	learners map[uint64]learnerSeen // first seen, per learner ID
	heldBack map[string]time.Time   // peer URL -> not re-added before
}

type learnerSeen struct {
	at      time.Time
	peerURL string
	// catchingUp: etcd refused to promote it as not in sync, and it has
	// not served its client port since.
	catchingUp bool
}

// ListState is what the writer knows of the list it acts on.
type ListState struct {
	// Own is this agent's post of the list (what it posted, or would:
	// Node and List); the Board under the lock says whether it is there.
	Own PostedList
	// InForce is when the list took force here; HoldDown how long it must
	// have held before a healthy voter is removed.
	InForce  time.Time
	HoldDown time.Duration
	// Unchanged, when set, says right before each membership call whether
	// the list in force is still the one the plan came from: a list that
	// changes mid-pass stops the call (etcdclient.ErrListChanged).
	Unchanged func() error
}

// StepResult says what one reconcile step did.
type StepResult struct {
	Plan Plan
	// Acted is the action executed under the lock, if any.
	Acted  *Action
	Result etcdclient.Result
	// Busy is true when another agent held the writer lock.
	Busy bool
}

// Step plans from the view and, when there is something to do, takes the
// writer lock, re-observes, re-plans and executes that plan's next action.
// local is the local member's ID (0 when it has none): the agent of a
// learner promotes it as soon as etcd allows (Observation.Local); while
// the cluster takes no writes (a NOSPACE or CORRUPT alarm), the lock
// cannot be taken, and the agent of the leading member acts alone
// (etcdclient.LeaderLock).
//
// Under the lock the agents' posted lists are read again (the Board): no
// change is made on a list this agent has not posted, nor about an address
// the posted lists disagree on; and before each call, lists.Unchanged says
// whether the list in force is still the one the plan came from.
func (r *Reconciler) Step(ctx context.Context, desired []identity.Member, view View, stale []uint64, local uint64, lists ListState) (StepResult, error) {
	view.Stale, view.Local = stale, local
	view.Lists.Stable, view.Lists.HoldDown = r.now().Sub(lists.InForce), lists.HoldDown
	r.age(&view.Observation)
	plan := MakePlan(desired, view.Observation)
	res := StepResult{Plan: plan}
	if plan.Next == nil || !view.Reached {
		return res, nil
	}
	removing := uint64(0)
	if plan.Next.Kind == ActionRemove {
		removing = plan.Next.MemberID
	}
	voters := LockEndpoints(view.Members, removing)
	if len(voters) == 0 {
		return res, errors.New("no voter with a client URL to take the writer lock through")
	}
	ctx, cancel := context.WithTimeout(ctx, r.Section)
	defer cancel()
	lock, err := r.Locker.TryLock(ctx, voters, view.ClusterID)
	alarmed := etcdclient.RefusesWrites(err)
	if alarmed {
		lock, err = r.leaderLock(view, local, err)
	}
	if errors.Is(err, etcdclient.ErrLocked) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.Policy.AttemptTimeout)
		defer cancel()
		if err := lock.Unlock(unlockCtx); err != nil {
			r.Log.Warn("release writer lock failed", "error", err)
		}
	}()

	// Re-observe under the lock: the view the plan came from may predate
	// another writer's change.
	target := Target{Endpoints: Endpoints(desired, view.Members), Listed: ClientURLs(desired), Pinned: view.Pinned}
	fresh := r.Observer.Observe(ctx, target)
	if !fresh.Reached {
		return res, fmt.Errorf("cluster unreachable after taking the writer lock: %v", fresh.Problems)
	}
	if fresh.ClusterID != view.ClusterID {
		return res, fmt.Errorf("the cluster answered as %s under the writer lock, %s before it", IDString(fresh.ClusterID), IDString(view.ClusterID))
	}
	fresh.Stale, fresh.Local = stale, local
	r.age(&fresh.Observation)
	if alarmed {
		// No agent can post its list under the alarm: the leading
		// member's agent acts on its own list alone, as it did before
		// there was a Board.
		fresh.Lists = Agreement{}
	} else if fresh.Lists, err = r.agreement(ctx, voters, fresh.ClusterID, lists); err != nil {
		return res, fmt.Errorf("read the agents' lists under the writer lock: %w", err)
	}
	res.Plan = MakePlan(desired, fresh.Observation)
	if res.Plan.Next == nil {
		return res, nil
	}
	action := *res.Plan.Next
	res.Acted = &action
	// Without the record, an agent holding an older list could add the
	// member back: no removal without it. Under an alarm it cannot be
	// written, and a removal is often what ends the alarm (a corrupt
	// member replaced): the leading member's agent, acting alone, goes on.
	if !alarmed {
		if err := r.recordRemoval(ctx, voters, fresh, action, fresh.Lists.Own); err != nil {
			res.Result = etcdclient.Result{Outcome: etcdclient.Retry, Err: err}
			r.logChange(action, res.Result)
			return res, nil
		}
	}
	w := Writer{Cluster: r.Cluster, Policy: r.Policy, Lock: lock, Check: lists.Unchanged}
	var added uint64
	res.Result = w.Apply(ctx, fresh.Observation, action, &added)
	r.refused(action, res.Result)
	r.logChange(action, res.Result)
	if action.Expired && res.Result.Outcome == etcdclient.Done {
		r.holdBack(action.PeerURL)
	}
	if r.OnChange != nil {
		r.OnChange(action, res.Result) // wakes the new learner's agent
	}
	if added != 0 {
		r.promoteAdded(ctx, w, desired, added, target, fresh.Observation)
	}
	return res, nil
}

// promoteAdded promotes the learner this writer just added, still under
// the lock, as soon as the plan would: its agent was woken and starts it
// at once, and a learner usually catches up within milliseconds. Waiting
// for a later pass to see it started would add a whole observe-and-lock
// round to every join. Each try observes the cluster again and promotes
// only when the plan's next action is this learner's promotion (it runs,
// as the member the list names), never on the word of the add alone; a
// learner that is slower (a static pod the kubelet has yet to start, a
// large snapshot) is left to the next passes, without a word.
func (r *Reconciler) promoteAdded(ctx context.Context, w Writer, desired []identity.Member, id uint64, target Target, before Observation) {
	for range max(1, r.Policy.Attempts) {
		view := r.Observer.Observe(ctx, target)
		if !view.Reached || view.ClusterID != before.ClusterID {
			return
		}
		view.Stale, view.Lists, view.Local = before.Stale, before.Lists, before.Local
		r.age(&view.Observation)
		plan := MakePlan(desired, view.Observation)
		if next := plan.Next; next != nil && next.Kind == ActionPromote && next.MemberID == id {
			result := w.Apply(ctx, view.Observation, *next, nil)
			r.refused(*next, result)
			if result.Outcome == etcdclient.Done {
				r.logChange(*next, result)
				if r.OnChange != nil {
					r.OnChange(*next, result)
				}
			}
			return
		}
		if !plan.WaitsFor(WaitLearnerNotStarted, "") || !r.Policy.Pause(ctx, r.Policy.InitialBackoff) {
			return
		}
	}
}

// leaderLock is the stand-in for the writer lock while the cluster is out
// of space: the leading member's agent acts; any other is busy.
func (r *Reconciler) leaderLock(view View, local uint64, cause error) (etcdclient.Lock, error) {
	m, ok := view.Member(local)
	if local == 0 || view.LeaderID != local || !ok || len(m.ClientURLs) == 0 {
		return nil, etcdclient.ErrLocked
	}
	r.Log.Warn("the writer lock cannot be taken while the cluster takes no writes; the leading member's agent acts alone", "cause", cause)
	return etcdclient.LeaderLock{Cluster: r.Cluster, Endpoint: m.ClientURLs[0], MemberID: local, Hold: r.Policy.AttemptTimeout + time.Second}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// age records when each learner was first seen, marks those unpromoted
// for longer than LearnerTimeout as expired, and carries the addresses
// held back after an expiry. Every agent keeps its own times: the one that
// holds the lock when a learner expires removes it.
func (r *Reconciler) age(obs *Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	seen := map[uint64]learnerSeen{}
	for _, m := range obs.Members {
		if !m.IsLearner {
			continue
		}
		s, ok := r.learners[m.ID]
		if !ok {
			s = learnerSeen{at: now, peerURL: first(m.PeerURLs)}
		}
		if m.InRaft() {
			s.catchingUp = false
		}
		if s.catchingUp {
			obs.CatchingUp = append(obs.CatchingUp, m.ID)
		}
		seen[m.ID] = s
		if r.LearnerTimeout > 0 && now.Sub(s.at) >= r.LearnerTimeout {
			obs.Expired = append(obs.Expired, m.ID)
		}
	}
	r.learners = seen
	for url, until := range r.heldBack {
		if now.Before(until) {
			obs.HeldBack = append(obs.HeldBack, url)
		} else {
			delete(r.heldBack, url)
		}
	}
	slices.Sort(obs.HeldBack)
}

// refused remembers a learner whose promotion etcd refused as not in sync
// (age reports it in Observation.CatchingUp).
func (r *Reconciler) refused(a Action, res etcdclient.Result) {
	if a.Kind != ActionPromote || !etcdclient.LearnerNotReady(res.Err) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.learners[a.MemberID]; ok {
		s.catchingUp = true
		r.learners[a.MemberID] = s
	}
}

func (r *Reconciler) holdBack(peerURL string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.heldBack == nil {
		r.heldBack = map[string]time.Time{}
	}
	r.heldBack[peerURL] = r.now().Add(r.LearnerTimeout)
}

// agreement reads the agents' posts under the lock: this agent's own post
// counts only when the Board has it with the list it plans with (else its
// Since stays 0 and MakePlan makes no change: another agent could not see
// the list it would follow).
func (r *Reconciler) agreement(ctx context.Context, endpoints []string, clusterID uint64, lists ListState) (Agreement, error) {
	posts, err := ReadBoard(ctx, r.Locker, endpoints, clusterID)
	if err != nil {
		return Agreement{}, err
	}
	a := Agreement{Known: true, Own: lists.Own, Removals: posts.Removals, Stable: r.now().Sub(lists.InForce), HoldDown: lists.HoldDown}
	a.Own.Since = 0
	for _, p := range posts.Lists {
		switch {
		case p.Node != lists.Own.Node:
			a.Others = append(a.Others, p)
		case p.Digest() == lists.Own.Digest():
			a.Own = p
		}
	}
	return a, nil
}

// recordRemoval records, before a member that is not listed is removed,
// under which list it goes: an agent holding an older list never adds it
// back (Agreement.removedUnderNewer). Removals for other reasons (a stale
// incarnation, an expired learner) are no verdict of the list.
func (r *Reconciler) recordRemoval(ctx context.Context, endpoints []string, view View, a Action, own PostedList) error {
	if a.Kind != ActionRemove || a.Expired {
		return nil
	}
	m, ok := view.Member(a.MemberID)
	addr := addrOf(m)
	if !ok || addr == "" || own.Has(addr) {
		return nil
	}
	value, err := json.Marshal(Removal{Address: addr, MemberID: IDString(a.MemberID), By: own.Node, Digest: own.Digest(), Since: own.Since, At: r.now().UTC()})
	if err != nil {
		return err
	}
	return r.Locker.Record(ctx, endpoints, view.ClusterID, RemovalKey(view.ClusterID, addr), value)
}

func (r *Reconciler) logChange(a Action, res etcdclient.Result) {
	attrs := []any{"action", string(a.Kind), "member", a.Name, "peerURL", a.PeerURL, "outcome", string(res.Outcome), "attempts", res.Attempts}
	if a.MemberID != 0 {
		attrs = append(attrs, "memberID", IDString(a.MemberID))
	}
	if a.TransfereeID != 0 {
		attrs = append(attrs, "transferee", IDString(a.TransfereeID))
	}
	if a.Alarm != "" {
		attrs = append(attrs, "alarm", a.Alarm)
	}
	switch {
	case errors.Is(res.Err, etcdclient.ErrListChanged):
		r.Log.Info("membership change abandoned: the member list changed since it was planned", append(attrs, "detail", res.Err.Error())...)
	case res.Outcome == etcdclient.Done && res.Err != nil:
		r.Log.Info("membership change already applied", append(attrs, "detail", res.Err.Error())...)
	case res.Outcome == etcdclient.Done:
		r.Log.Info("membership change", append(attrs, "reason", a.Reason)...)
	case res.Outcome == etcdclient.Fatal || !etcdclient.Known(res.Err):
		r.Log.Error("membership change failed", append(attrs, "error", res.Err)...)
	default:
		r.Log.Info("membership change not yet possible; will retry", append(attrs, "error", res.Err)...)
	}
}

// Close releases the writer lock's session, and with it any lock.
func (r *Reconciler) Close() { r.Locker.Close() }

// reachableVoter: a voter in raft with a client URL to send calls to.
func (m Member) reachableVoter() bool {
	return !m.IsLearner && m.InRaft() && len(m.ClientURLs) > 0
}

// LockEndpoints are the voters the writer lock is taken through, and its
// session kept alive through: every voter that can answer, except the
// member a removal is about while another remains. A removed member stops
// answering as the removal applies; a session balanced over it could lose
// its keep-alive, its confirmation and its release with it.
func LockEndpoints(members []Member, removing uint64) []string {
	var eps, all []string
	for _, m := range members {
		if !m.reachableVoter() {
			continue
		}
		all = append(all, m.ClientURLs[0])
		if m.ID != removing {
			eps = append(eps, m.ClientURLs[0])
		}
	}
	if len(eps) == 0 {
		eps = all
	}
	slices.Sort(eps)
	return eps
}
