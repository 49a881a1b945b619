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
	client    *clientv3.Client
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

// execute runs one action with bounded retries.
func (r *Reconciler) execute(ctx context.Context, a Action, view View) etcdclient.Result {
	r.mu.Lock()
	c := r.client
	r.mu.Unlock()
	switch a.Kind {
	case ActionAddLearner:
		return etcdclient.Do(ctx, r.Policy, etcdclient.OpAddLearner, func(ctx context.Context) error {
			_, err := c.MemberAddAsLearner(ctx, []string{a.PeerURL})
			return err
		})
	case ActionPromote:
		return etcdclient.Do(ctx, r.Policy, etcdclient.OpPromote, func(ctx context.Context) error {
			_, err := c.MemberPromote(ctx, a.MemberID)
			return err
		})
	case ActionRemove:
		return etcdclient.Do(ctx, r.Policy, etcdclient.OpRemove, func(ctx context.Context) error {
			_, err := c.MemberRemove(ctx, a.MemberID)
			return err
		})
	case ActionMoveLeader:
		// MoveLeader must be served by the current leader itself.
		leader, ok := view.Member(a.MemberID)
		if !ok || len(leader.ClientURLs) == 0 {
			return etcdclient.Result{Outcome: etcdclient.Retry, Err: fmt.Errorf("leader %s has no client URL", IDString(a.MemberID))}
		}
		endpoint, err := r.Pool.Get(leader.ClientURLs[0])
		if err != nil {
			return etcdclient.Result{Outcome: etcdclient.Fatal, Err: err}
		}
		return etcdclient.Do(ctx, r.Policy, etcdclient.OpMoveLeader, func(ctx context.Context) error {
			return endpoint.MoveLeader(ctx, a.TransfereeID)
		})
	}
	return etcdclient.Result{Outcome: etcdclient.Fatal, Err: fmt.Errorf("unknown action %q", a.Kind)}
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

func voterEndpoints(members []Member) []string {
	var eps []string
	for _, m := range members {
		if !m.IsLearner && m.Healthy() && len(m.ClientURLs) > 0 {
			eps = append(eps, m.ClientURLs[0])
		}
	}
	slices.Sort(eps)
	return eps
}
