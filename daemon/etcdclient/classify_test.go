package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		op   Op
		err  error
		want Outcome
	}{
		{OpAddLearner, nil, Done},
		// Already applied counts as success (a timed-out call may have committed).
		{OpAddLearner, rpctypes.ErrPeerURLExist, Done},
		{OpAddLearner, rpctypes.ErrGRPCPeerURLExist, Done}, // raw gRPC form, as the fail-fast endpoints return it
		{OpAddLearner, rpctypes.ErrMemberExist, Done},
		{OpRemove, rpctypes.ErrMemberNotFound, Done},
		{OpPromote, rpctypes.ErrMemberNotLearner, Done},
		// The same error means something else for another call.
		{OpPromote, rpctypes.ErrMemberNotFound, Retry},
		{OpPromote, rpctypes.ErrPeerURLExist, Fatal},
		// Waiting states.
		{OpPromote, rpctypes.ErrMemberLearnerNotReady, Retry},
		{OpAddLearner, rpctypes.ErrTooManyLearners, Retry},
		{OpAddLearner, rpctypes.ErrUnhealthy, Retry},
		{OpRemove, rpctypes.ErrGRPCMemberNotEnoughStarted, Retry},
		{OpMoveLeader, rpctypes.ErrNotLeader, Retry},
		{OpMoveLeader, rpctypes.ErrBadLeaderTransferee, Retry},
		{OpPromote, rpctypes.ErrGRPCNotSupportedForLearner, Retry},
		{OpPromote, rpctypes.ErrNoLeader, Retry},
		{OpPromote, rpctypes.ErrTimeout, Retry},
		{OpPromote, context.DeadlineExceeded, Retry},
		{OpPromote, fmt.Errorf("call: %w", context.Canceled), Retry},
		{OpPromote, status.Error(codes.Unavailable, "connection refused"), Retry},
		// Retrying cannot help.
		{OpAddLearner, rpctypes.ErrGRPCMemberBadURLs, Fatal},
		{OpPromote, rpctypes.ErrGRPCPermissionDenied, Fatal},
		{OpPromote, rpctypes.ErrGRPCInvalidAuthToken, Fatal},
		{OpPromote, status.Error(codes.Unauthenticated, "bad certificate"), Fatal},
		{OpPromote, rpctypes.ErrGRPCClusterIDMismatch, Fatal},
		// Unknown errors are retried (and logged as unexpected).
		{OpPromote, errors.New("something new"), Retry},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.op, tt.err), func(t *testing.T) {
			if got := Classify(tt.op, tt.err); got != tt.want {
				t.Errorf("Classify(%s, %v) = %s, want %s", tt.op, tt.err, got, tt.want)
			}
		})
	}
	if Known(errors.New("something new")) || !Known(rpctypes.ErrMemberLearnerNotReady) {
		t.Error("Known misclassifies")
	}
}

func TestDoStopsOnDoneAndFatalAndBoundsAttempts(t *testing.T) {
	p := Policy{Attempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Jitter: 0.5, AttemptTimeout: 50 * time.Millisecond}
	calls := 0
	r := Do(context.Background(), p, OpPromote, func(context.Context) error {
		calls++
		if calls < 3 {
			return rpctypes.ErrMemberLearnerNotReady
		}
		return nil
	})
	if r.Outcome != Done || r.Attempts != 3 || calls != 3 {
		t.Errorf("retry until done: %+v after %d calls", r, calls)
	}
	calls = 0
	r = Do(context.Background(), p, OpAddLearner, func(context.Context) error { calls++; return rpctypes.ErrGRPCMemberBadURLs })
	if r.Outcome != Fatal || calls != 1 {
		t.Errorf("fatal must not be retried: %+v after %d calls", r, calls)
	}
	calls = 0
	r = Do(context.Background(), p, OpPromote, func(context.Context) error { calls++; return rpctypes.ErrMemberLearnerNotReady })
	if r.Outcome != Retry || calls != 4 || !errors.Is(r.Err, rpctypes.ErrMemberLearnerNotReady) {
		t.Errorf("attempts must be bounded: %+v after %d calls", r, calls)
	}
	// Each attempt has its own deadline.
	r = Do(context.Background(), p, OpPromote, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no per-attempt deadline")
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if r.Attempts != 4 || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Errorf("per-attempt timeout: %+v", r)
	}
}

// A learner that is catching up is retried at the initial interval, as
// it is usually in sync within milliseconds; other retries back off.
func TestDoRetriesACatchingUpLearnerAtAShortInterval(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want []time.Duration
	}{
		{"learner not in sync", rpctypes.ErrMemberLearnerNotReady, []time.Duration{10, 10, 10, 10}},
		{"no leader", rpctypes.ErrNoLeader, []time.Duration{10, 20, 40, 40}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var waits []time.Duration
			p := Policy{Attempts: 5, InitialBackoff: 10, MaxBackoff: 40, AttemptTimeout: time.Second,
				Sleep: func(_ context.Context, d time.Duration) bool { waits = append(waits, d); return true }}
			Do(context.Background(), p, OpPromote, func(context.Context) error { return tt.err })
			if !slices.Equal(waits, tt.want) {
				t.Errorf("waits %v, want %v", waits, tt.want)
			}
		})
	}
}

// Every attempt that returns an error is reported with its outcome (for
// etcdlet_etcd_call_errors_total), an error that means "already applied"
// too; a success is not.
func TestDoReportsEveryFailedAttempt(t *testing.T) {
	var got []string
	p := Policy{Attempts: 4, AttemptTimeout: time.Second,
		Sleep:  func(context.Context, time.Duration) bool { return true },
		Failed: func(op Op, o Outcome) { got = append(got, string(op)+":"+string(o)) }}
	errs := []error{rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrGRPCNoLeader, nil}
	Do(context.Background(), p, OpPromote, func(context.Context) error { e := errs[0]; errs = errs[1:]; return e })
	Do(context.Background(), p, OpRemove, func(context.Context) error { return rpctypes.ErrGRPCMemberNotFound })
	Do(context.Background(), p, OpAddLearner, func(context.Context) error { return rpctypes.ErrGRPCMemberBadURLs })
	want := []string{"promote:retry", "promote:retry", "remove:done", "add-learner:fatal"}
	if !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
}

// LearnerNotReady knows etcd's refusal in the forms the client returns it
// (the client's error, the server's gRPC status) and nothing else: the
// node tries such a promotion again soon instead of backing off.
func TestLearnerNotReady(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrMemberLearnerNotReady, true},
		{rpctypes.ErrGRPCLearnerNotReady, true},
		{nil, false},
		{rpctypes.ErrGRPCTooManyLearners, false},
		{rpctypes.ErrGRPCMemberNotLearner, false},
		{status.Error(codes.Unavailable, "connection refused"), false},
		{errors.New("can only promote a learner member"), false},
	} {
		if got := LearnerNotReady(tt.err); got != tt.want {
			t.Errorf("LearnerNotReady(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
