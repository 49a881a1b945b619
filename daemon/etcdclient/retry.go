package etcdclient

import (
	"context"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Policy bounds a retried call: attempts, backoff and the timeout of each
// attempt. A per-attempt timeout matters because etcd's client waits for a
// ready connection by default; without one a dead endpoint eats the whole
// budget.
type Policy struct {
	Attempts       int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Jitter is the fraction (0..1) by which each backoff is randomly
	// shortened, so agents that failed together do not retry in lockstep.
	Jitter         float64
	AttemptTimeout time.Duration
	// Sleep waits out a backoff, or returns false when ctx ends first; a
	// real timer when nil (the simulator passes one that moves its clock).
	Sleep func(ctx context.Context, d time.Duration) bool
	// Failed, when set, hears of every attempt that returned an error,
	// with the outcome Classify gave it (done: already applied), for
	// metrics.
	Failed func(op Op, outcome Outcome)
}

// Pause waits d as the policy waits between attempts (the simulator's
// clock moves), or returns false when ctx ends first.
func (p Policy) Pause(ctx context.Context, d time.Duration) bool { return p.sleep(ctx, d) }

func (p Policy) sleep(ctx context.Context, d time.Duration) bool {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Result is what a retried call came to.
type Result struct {
	Outcome  Outcome
	Err      error // the last error; nil when Done without error
	Attempts int
}

// Do runs call until it is Done or Fatal, the attempts are used up, or ctx
// ends. Each attempt gets its own context with AttemptTimeout.
func Do(ctx context.Context, p Policy, op Op, call func(ctx context.Context) error) Result {
	backoff := p.InitialBackoff
	var res Result
	for res.Attempts < max(1, p.Attempts) {
		res.Attempts++
		attemptCtx, cancel := context.WithTimeout(ctx, p.AttemptTimeout)
		res.Err = call(attemptCtx)
		cancel()
		res.Outcome = Classify(op, res.Err)
		if res.Err != nil && p.Failed != nil {
			p.Failed(op, res.Outcome)
		}
		if res.Outcome != Retry || res.Attempts == p.Attempts {
			return res
		}
		wait := backoff - time.Duration(rand.Float64()*p.Jitter*float64(backoff)) //nolint:gosec // G404: jitter, not a secret
		if !p.sleep(ctx, wait) {
			return res
		}
		if !LearnerNotReady(res.Err) {
			backoff = min(backoff*2, p.MaxBackoff)
		}
	}
	return res
}

// LearnerNotReady reports etcd's refusal to promote a learner that is
// not in sync with the leader yet, a promotion etcd allows the moment it
// is. A learner usually is within milliseconds of its start, so its
// promotion is retried at the same short interval rather than at a
// growing one (which would add tens of milliseconds to every join). A
// learner that needs longer (a large keyspace to copy) uses up the
// attempts; the node's next pass comes soon and tries again.
func LearnerNotReady(err error) bool {
	return err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCLearnerNotReady)
}
