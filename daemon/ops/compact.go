package ops

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdlet/etcdlet/daemon/task"
)

// ParamRetain is the compaction task's parameter: how many revisions
// before the current one stay readable.
const ParamRetain = "retain"

// NewCompactType compacts the keyspace to the current revision less the
// retained window. The Kubernetes API server compacts on its own every 5
// minutes; this is for clusters that no API server compacts, and before a
// defragmentation.
func NewCompactType(s Surveyor, retain int64, timeout time.Duration) task.Type {
	return task.Type{Name: "compact", Timeout: timeout,
		Summary: "compact the keyspace, keeping the last N revisions readable",
		New: func(t task.Task, _ task.Env) (task.Handler, error) {
			c := &compact{survey: s, retain: retain}
			for k, v := range t.Params {
				if k != ParamRetain {
					return nil, fmt.Errorf("unknown parameter %q (compact takes %s)", k, ParamRetain)
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("parameter %s=%q: want a number of revisions, 0 or more", k, v)
				}
				c.retain = n
			}
			return c, nil
		}}
}

type compact struct {
	survey Surveyor
	retain int64
}

// CompactOutcome is the compaction task's output.
type CompactOutcome struct {
	Revision    int64  `json:"revision"`
	CompactedTo int64  `json:"compactedTo,omitempty"`
	Skipped     string `json:"skipped,omitempty"`
}

func (c *compact) Admit(ctx context.Context) task.Result {
	if _, err := c.survey.AdmitSurvey(ctx); err != nil {
		return task.Result{Error: err, Code: CodeNoQuorum}
	}
	return task.Result{}
}

// Execute is idempotent: compacting to a revision already compacted is
// etcd's ErrCompacted, which is success here.
func (c *compact) Execute(ctx context.Context) task.Result {
	sv, err := c.survey.Survey(ctx)
	if err != nil {
		return task.Result{Requeue: true, Error: err, Code: CodeNoQuorum}
	}
	src, err := sv.SnapshotSource()
	if err != nil {
		return task.Result{Requeue: true, Error: err, Code: CodeNoQuorum}
	}
	rev := src.Status.GetHeader().GetRevision()
	target := rev - c.retain
	if target <= 1 {
		out := CompactOutcome{Revision: rev, Skipped: fmt.Sprintf("revision %d keeps fewer than %d revisions", rev, c.retain)}
		return task.Result{Output: out, Description: out.Skipped}
	}
	err = c.survey.Etcd.Compact(ctx, src.ClientURL, target)
	switch {
	case err != nil && errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted):
		out := CompactOutcome{Revision: rev, Skipped: fmt.Sprintf("revision %d is already compacted", target)}
		return task.Result{Output: out, Description: out.Skipped}
	case err != nil:
		return task.Result{Requeue: true, Error: fmt.Errorf("compact to revision %d: %w", target, err)}
	}
	return task.Result{Output: CompactOutcome{Revision: rev, CompactedTo: target}, Description: fmt.Sprintf("compacted to revision %d (current %d)", target, rev)}
}

func (c *compact) Cleanup(context.Context) task.Result { return task.Result{} }
