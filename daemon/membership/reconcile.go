package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

// Reconciler executes planned membership changes as the single writer.
//
// Any agent may be the writer; an etcd mutex decides which one acts. The
// lock holder re-observes and re-plans under the lock before it acts, so
// two agents that planned concurrently never both act on a stale view:
// two removals that are each safe alone can never both happen. The lock
// lives in a lease-backed session: a writer killed mid-change releases it
// when its lease expires (agent.lockTTL). Every call stays well inside
// that TTL (agent.callTimeout is at most a third of it).
type Reconciler struct {
	Pool     *etcdclient.Pool
	Observer *Observer
	Log      *slog.Logger
	// LockKey is the etcd key prefix of the writer mutex.
	LockKey string
	LockTTL time.Duration
	Policy  etcdclient.Policy
	// OnChange is called after every membership call with its outcome.
	OnChange func(a Action, r etcdclient.Result)

	mu        sync.Mutex
	client    *clientv3.Client // the lock session's; changes use the pool
	endpoints []string
	session   *concurrency.Session
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
func (r *Reconciler) Step(ctx context.Context, desired []identity.Member, view View, stale []uint64) (StepResult, error) {
	view.Stale = stale
	plan := MakePlan(desired, view.Observation)
	res := StepResult{Plan: plan}
	if plan.Next == nil || !view.Reached {
		return res, nil
	}
	voters := voterEndpoints(view.Members)
	if len(voters) == 0 {
		return res, errors.New("no voter with a client URL to take the writer lock through")
	}
	mutex, err := r.mutex(ctx, voters)
	if err != nil {
		return res, err
	}
	lockCtx, cancel := context.WithTimeout(ctx, r.Policy.AttemptTimeout)
	err = mutex.TryLock(lockCtx)
	cancel()
	if errors.Is(err, concurrency.ErrLocked) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("take writer lock %s: %w", r.LockKey, err)
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.Policy.AttemptTimeout)
		defer cancel()
		if err := mutex.Unlock(unlockCtx); err != nil {
			r.Log.Warn("release writer lock failed; it expires with the session lease", "lock", r.LockKey, "error", err)
		}
	}()

	// Re-observe under the lock: the view the plan came from may predate
	// another writer's change.
	fresh := r.Observer.Observe(ctx, Endpoints(desired, view.Members))
	if !fresh.Reached {
		return res, fmt.Errorf("cluster unreachable after taking the writer lock: %v", fresh.Problems)
	}
	fresh.Stale = stale
	res.Plan = MakePlan(desired, fresh.Observation)
	if res.Plan.Next == nil {
		return res, nil
	}
	action := *res.Plan.Next
	res.Acted = &action
	res.Result = r.execute(ctx, action, fresh)
	r.logChange(action, res.Result)
	if r.OnChange != nil {
		r.OnChange(action, res.Result)
	}
	return res, nil
}

// execute runs one action with bounded retries. Membership calls go to
// the leader when it can serve them (no forwarding), else to the other
// healthy voters in turn, and never to the member being removed: it stops
// as its removal applies, and the answer would be lost with it.
func (r *Reconciler) execute(ctx context.Context, a Action, view View) etcdclient.Result {
	op, call := etcdclient.Op(a.Kind), func(ctx context.Context, e *etcdclient.Endpoint) error {
		switch a.Kind {
		case ActionAddLearner:
			return e.MemberAddAsLearner(ctx, a.PeerURL)
		case ActionPromote:
			return e.MemberPromote(ctx, a.MemberID)
		case ActionRemove:
			return e.MemberRemove(ctx, a.MemberID)
		case ActionMoveLeader:
			return e.MoveLeader(ctx, a.TransfereeID)
		}
		return fmt.Errorf("unknown action %q", a.Kind)
	}
	targets := writeTargets(view, a)
	if len(targets) == 0 {
		return etcdclient.Result{Outcome: etcdclient.Retry, Err: errors.New("no healthy voter to send the change to")}
	}
	attempt := 0
	return etcdclient.Do(ctx, r.Policy, op, func(ctx context.Context) error {
		endpoint, err := r.Pool.Get(targets[attempt%len(targets)])
		attempt++
		if err != nil {
			return err
		}
		return call(ctx, endpoint)
	})
}

// writeTargets orders the endpoints a change is sent to: the leader first
// (MoveLeader must reach it), then the other healthy voters; never the
// member a removal is about.
func writeTargets(view View, a Action) []string {
	var leader, others []string
	for _, m := range view.Members {
		if !m.reachableVoter() || (a.Kind == ActionRemove && m.ID == a.MemberID) {
			continue
		}
		if m.ID == view.LeaderID {
			leader = append(leader, m.ClientURLs[0])
		} else {
			others = append(others, m.ClientURLs[0])
		}
	}
	if a.Kind == ActionMoveLeader {
		return leader
	}
	return append(leader, others...)
}

func (r *Reconciler) logChange(a Action, res etcdclient.Result) {
	attrs := []any{"action", string(a.Kind), "member", a.Name, "peerURL", a.PeerURL, "outcome", string(res.Outcome), "attempts", res.Attempts}
	if a.MemberID != 0 {
		attrs = append(attrs, "memberID", IDString(a.MemberID))
	}
	if a.TransfereeID != 0 {
		attrs = append(attrs, "transferee", IDString(a.TransfereeID))
	}
	switch {
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

// mutex returns the writer mutex on a session whose client balances over
// the current voters; the session is kept across passes and recreated
// when its lease is lost or the voters changed completely.
func (r *Reconciler) mutex(ctx context.Context, voters []string) (*concurrency.Mutex, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil {
		c, err := r.Pool.NewMulti(voters)
		if err != nil {
			return nil, err
		}
		r.client, r.endpoints = c, voters
	} else if !slices.Equal(r.endpoints, voters) {
		r.client.SetEndpoints(voters...)
		r.endpoints = voters
	}
	if r.session != nil {
		select {
		case <-r.session.Done():
			r.session = nil
		default:
		}
	}
	if r.session == nil {
		// Grant the lease with this pass's timeout, then hand it to a
		// session whose keep-alive lives as long as the client: the
		// session's own context would otherwise bound both.
		grantCtx, cancel := context.WithTimeout(ctx, r.Policy.AttemptTimeout)
		defer cancel()
		lease, err := r.client.Grant(grantCtx, int64(r.LockTTL/time.Second))
		if err != nil {
			return nil, fmt.Errorf("grant writer lock lease: %w", err)
		}
		s, err := concurrency.NewSession(r.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(r.LockTTL/time.Second)))
		if err != nil {
			return nil, fmt.Errorf("create writer lock session: %w", err)
		}
		r.session = s
	}
	return concurrency.NewMutex(r.session, r.LockKey), nil
}

// Close releases the session (and with it any lock) and the client.
func (r *Reconciler) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.session != nil {
		_ = r.session.Close()
		r.session = nil
	}
	if r.client != nil {
		_ = r.client.Close()
		r.client = nil
	}
}

// reachableVoter: a healthy voter with a client URL to send calls to.
func (m Member) reachableVoter() bool {
	return !m.IsLearner && m.Healthy() && len(m.ClientURLs) > 0
}

func voterEndpoints(members []Member) []string {
	var eps []string
	for _, m := range members {
		if m.reachableVoter() {
			eps = append(eps, m.ClientURLs[0])
		}
	}
	slices.Sort(eps)
	return eps
}
