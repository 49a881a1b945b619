package etcdclient

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Outcome is what an etcd call's result means for the caller.
type Outcome string

const (
	// Done: the change is in place, including when an earlier attempt
	// (maybe one that timed out) already applied it.
	Done Outcome = "done"
	// Retry: transient; the same call may succeed after a backoff.
	Retry Outcome = "retry"
	// Fatal: retrying the same call cannot help; the next reconcile pass
	// re-observes and re-plans, and the error is reported.
	Fatal Outcome = "fatal"
)

// Op names the call being classified; the same error means different
// things for different calls (member-not-found is success for a removal).
type Op string

// Calls with their own rows in the table.
const (
	OpAddLearner Op = "add-learner"
	OpPromote    Op = "promote"
	OpRemove     Op = "remove"
	OpMoveLeader Op = "move-leader"
)

// errorTable is the explicit classification of etcd's errors. Rows name
// the server error; columns override the row's default for specific calls.
// Anything not listed is retried (and logged as unexpected by the caller).
var errorTable = []struct {
	err     error
	def     Outcome
	perCall map[Op]Outcome
	why     string
}{
	{rpctypes.ErrGRPCPeerURLExist, Fatal, map[Op]Outcome{OpAddLearner: Done}, "an earlier add, maybe timed out, already committed"},
	{rpctypes.ErrGRPCMemberExist, Fatal, map[Op]Outcome{OpAddLearner: Done}, "an earlier add already committed"},
	{rpctypes.ErrGRPCMemberNotFound, Retry, map[Op]Outcome{OpRemove: Done}, "removal already applied; for other calls membership changed under us: re-plan"},
	{rpctypes.ErrGRPCMemberNotLearner, Fatal, map[Op]Outcome{OpPromote: Done}, "promotion already applied"},
	{rpctypes.ErrGRPCLearnerNotReady, Retry, nil, "the learner is still catching up with the leader"},
	{rpctypes.ErrGRPCTooManyLearners, Retry, nil, "another learner holds etcd's single learner slot; wait its turn"},
	{rpctypes.ErrGRPCUnhealthy, Retry, nil, "strict reconfig check: a voter has not been connected for 5s"},
	{rpctypes.ErrGRPCMemberNotEnoughStarted, Retry, nil, "the change would leave too few started members"},
	{rpctypes.ErrGRPCNotLeader, Retry, nil, "the call must reach the leader; leadership moved"},
	{rpctypes.ErrGRPCBadLeaderTransferee, Retry, nil, "the transferee is not ready to lead yet"},
	{rpctypes.ErrGRPCNoLeader, Retry, nil, "election in progress"},
	{rpctypes.ErrGRPCLeaderChanged, Retry, nil, "election in progress"},
	{rpctypes.ErrGRPCStopped, Retry, nil, "the endpoint is shutting down; another answers"},
	{rpctypes.ErrGRPCTimeout, Retry, nil, "raft did not commit in time"},
	{rpctypes.ErrGRPCTimeoutDueToLeaderFail, Retry, nil, "raft did not commit in time"},
	{rpctypes.ErrGRPCTimeoutDueToConnectionLost, Retry, nil, "raft did not commit in time"},
	{rpctypes.ErrGRPCTimeoutWaitAppliedIndex, Retry, nil, "the endpoint is behind"},
	{rpctypes.ErrGRPCNotSupportedForLearner, Retry, nil, "the call reached a learner; a voter answers"},
	{rpctypes.ErrGRPCMemberBadURLs, Fatal, nil, "etcd rejects the peer URL"},
	{rpctypes.ErrGRPCClusterIDMismatch, Fatal, nil, "the endpoint belongs to another cluster"},
	{rpctypes.ErrGRPCPermissionDenied, Fatal, nil, "the client certificate is not allowed to do this"},
	{rpctypes.ErrGRPCAuthFailed, Fatal, nil, "authentication failed"},
	{rpctypes.ErrGRPCInvalidAuthToken, Fatal, nil, "authentication failed"},
	{rpctypes.ErrGRPCNotCapable, Fatal, nil, "the cluster version does not support this call"},
	{rpctypes.ErrGRPCCorrupt, Fatal, nil, "the cluster reports data corruption"},
}

// Classify maps the result of an etcd call to an outcome.
func Classify(op Op, err error) Outcome {
	if err == nil {
		return Done
	}
	if errors.Is(err, ErrLockLost) || errors.Is(err, ErrListChanged) {
		// Without the lock no change may be made; the next pass takes it
		// again and re-plans.
		return Fatal
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Retry
	}
	desc := rpctypes.ErrorDesc(err)
	for _, row := range errorTable {
		if desc != rpctypes.ErrorDesc(row.err) {
			continue
		}
		if o, ok := row.perCall[op]; ok {
			return o
		}
		return row.def
	}
	// Transport-level failures (endpoint down, TLS handshake, deadline)
	// are transient from the caller's point of view.
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
		return Retry
	case codes.Unauthenticated, codes.PermissionDenied:
		return Fatal
	}
	return Retry
}

// Known reports whether err has a row in the table or is a transport
// failure; unknown errors are retried but worth an error-level log.
func Known(err error) bool {
	desc := rpctypes.ErrorDesc(err)
	for _, row := range errorTable {
		if desc == rpctypes.ErrorDesc(row.err) {
			return true
		}
	}
	return errors.Is(err, ErrLockLost) || errors.Is(err, ErrListChanged) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.Unknown
}
