package membership

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// Writer makes membership actions under a taken writer lock: the one
// writer of the agents (Reconciler) and of `etcdlet member`.
type Writer struct {
	Cluster etcdclient.Cluster
	Policy  etcdclient.Policy
	Lock    etcdclient.Lock
	// Check, when set, must pass right before every attempt: the agents
	// pass their ListState.Unchanged, so that a list that changed since
	// the plan stops the call.
	Check func() error
}

// Apply makes action a on the cluster seen in view, with the policy's
// bounded retries. Every attempt confirms the lock and gets no more time
// than the lock's lease is sure to last (etcdclient.UnderLock): a call
// that outlasted it would run unguarded, as another agent could take the
// lock and act on a view without it. Calls go to the leader when it can
// serve them (no forwarding), else to the other voters in raft in turn,
// and never to the member being removed: it stops as its removal applies,
// and the answer would be lost with it. added, when not nil, receives the
// ID of a learner the call added.
func (w Writer) Apply(ctx context.Context, view Observation, a Action, added *uint64) etcdclient.Result {
	targets := WriteTargets(view, a)
	if len(targets) == 0 {
		return etcdclient.Result{Outcome: etcdclient.Retry, Err: errors.New("no healthy voter to send the change to")}
	}
	attempt := 0
	return etcdclient.Do(ctx, w.Policy, etcdclient.Op(a.Kind), func(ctx context.Context) error {
		if w.Check != nil {
			if err := w.Check(); err != nil {
				return err
			}
		}
		endpoint := targets[attempt%len(targets)]
		attempt++
		return etcdclient.UnderLock(ctx, w.Lock, func(ctx context.Context) error {
			return w.call(ctx, a, endpoint, added)
		})
	})
}

func (w Writer) call(ctx context.Context, a Action, endpoint string, added *uint64) error {
	switch a.Kind {
	case ActionAddLearner:
		resp, err := w.Cluster.MemberAddAsLearner(ctx, endpoint, a.PeerURL)
		if err == nil && added != nil && resp.Member != nil {
			*added = resp.Member.ID
		}
		return err
	case ActionPromote:
		return w.Cluster.MemberPromote(ctx, endpoint, a.MemberID)
	case ActionRemove:
		return w.Cluster.MemberRemove(ctx, endpoint, a.MemberID)
	case ActionMoveLeader:
		return w.Cluster.MoveLeader(ctx, endpoint, a.TransfereeID)
	case ActionDisarm:
		return w.Cluster.AlarmDisarm(ctx, endpoint, a.MemberID, alarmType(a.Alarm))
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// WriteTargets orders the endpoints an action is sent to: the leader
// first, then the other voters in raft; the leader only for MoveLeader,
// which must reach it; never the member a removal is about.
func WriteTargets(view Observation, a Action) []string {
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

// alarmType is etcd's alarm type of a name (NOSPACE, CORRUPT).
func alarmType(name string) pb.AlarmType { return pb.AlarmType(pb.AlarmType_value[name]) }
