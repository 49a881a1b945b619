package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// Defrag task parameters.
const (
	// ParamThreshold is the fraction of a member's backend that must be
	// free (dbSize - dbSizeInUse) for it to be defragmented.
	ParamThreshold = "threshold"
	// ParamAllowUnavailable defragments members whose defragmentation
	// leaves the cluster without quorum (one- and two-member clusters):
	// writes stall while it runs.
	ParamAllowUnavailable = "allowUnavailable"
)

// Codes of the defrag handler's errors.
const (
	CodeNoQuorum        = "ERR_NO_QUORUM"
	CodeDefragment      = "ERR_DEFRAGMENT"
	CodeWouldLoseQuorum = "ERR_WOULD_LOSE_QUORUM"
)

// DefragOptions are the defaults of the defrag task.
type DefragOptions struct {
	Threshold float64
	// CatchUp bounds the wait for a defragmented member to answer and
	// catch up before the next one starts.
	CatchUp time.Duration
}

// MemberOutcome is what the rolling defragmentation did to one member.
type MemberOutcome struct {
	Member string `json:"member"`
	Action string `json:"action"` // defragmented, skipped
	Reason string `json:"reason,omitempty"`
	Before int64  `json:"dbSizeBefore"`
	After  int64  `json:"dbSizeAfter,omitempty"`
}

// defragProgress is checkpointed after every member: a restarted agent
// goes on with the next one.
type defragProgress struct {
	Done []MemberOutcome `json:"done"`
	IDs  []string        `json:"ids"`
}

type defrag struct {
	survey           Surveyor
	etcd             Etcd
	env              task.Env
	threshold        float64
	allowUnavailable bool
	catchUp          time.Duration
	progress         defragProgress
}

// NewDefragType is the rolling defragmentation: one member at a time,
// followers first and the leader last (after handing leadership to a
// follower), each only while the others keep quorum, each skipped when
// less than the threshold of its backend is free; a NOSPACE alarm is
// disarmed once every member has room again.
func NewDefragType(s Surveyor, o DefragOptions, timeout time.Duration) task.Type {
	return task.Type{Name: "defrag", Timeout: timeout,
		Summary: "rolling defragmentation, followers first, the leader last, never below quorum",
		New: func(t task.Task, env task.Env) (task.Handler, error) {
			d := &defrag{survey: s, etcd: s.Etcd, env: env, threshold: o.Threshold, catchUp: o.CatchUp}
			for k, v := range t.Params {
				switch k {
				case ParamThreshold:
					f, err := strconv.ParseFloat(v, 64)
					if err != nil || !(f >= 0 && f <= 1) { // NaN too
						return nil, fmt.Errorf("parameter %s=%q: want a fraction from 0 to 1 (0 defragments every member)", k, v)
					}
					d.threshold = f
				case ParamAllowUnavailable:
					b, err := strconv.ParseBool(v)
					if err != nil {
						return nil, fmt.Errorf("parameter %s=%q: want true or false", k, v)
					}
					d.allowUnavailable = b
				default:
					return nil, fmt.Errorf("unknown parameter %q (defrag takes %s, %s)", k, ParamThreshold, ParamAllowUnavailable)
				}
			}
			if len(env.Progress) > 0 {
				if err := json.Unmarshal(env.Progress, &d.progress); err != nil {
					return nil, fmt.Errorf("read the progress of the earlier run: %w", err)
				}
			}
			return d, nil
		}}
}

func (d *defrag) Admit(ctx context.Context) task.Result {
	sv, err := d.survey.AdmitSurvey(ctx)
	if err != nil {
		return task.Result{Error: err, Code: CodeNoQuorum}
	}
	if err := sv.Observation().HasQuorum(); err != nil {
		return task.Result{Error: err, Code: CodeNoQuorum}
	}
	if !d.allowUnavailable && len(sv.Voters()) < 3 {
		return task.Result{Code: CodeWouldLoseQuorum, Error: fmt.Errorf("a %d-member cluster loses quorum while one member defragments; set %s=true to accept that writes stall meanwhile", len(sv.Voters()), ParamAllowUnavailable)}
	}
	return task.Result{Description: fmt.Sprintf("admitted: %d voters, threshold %.2f", len(sv.Voters()), d.threshold)}
}

// Execute defragments the members one by one, from a fresh survey before
// each, and checkpoints after each: a restarted agent goes on with the
// next member and never repeats one. A member that cannot go now (it does
// not answer, or the others would not keep quorum without it) is passed
// over for the others; when none can go, the step is requeued with the
// first one's reason.
func (d *defrag) Execute(ctx context.Context) task.Result {
	for {
		sv, err := d.survey.Survey(ctx)
		if err != nil {
			return task.Result{Requeue: true, Error: err, Code: CodeNoQuorum}
		}
		pending := d.pending(sv)
		if len(pending) == 0 {
			return d.finish(ctx, sv)
		}
		var blocked []task.Result
		progressed := false
		for _, m := range pending {
			res, done := d.one(ctx, sv, m)
			if done {
				if res.Error != nil {
					return res
				}
				progressed = true
				break
			}
			if ctx.Err() != nil {
				return res
			}
			blocked = append(blocked, res)
		}
		if !progressed {
			return waiting(blocked)
		}
	}
}

// waiting is the requeue of a step in which no member could go: every
// member's reason, and the quorum rule's code when it held any back.
func waiting(blocked []task.Result) task.Result {
	res := task.Result{Requeue: true, Code: blocked[0].Code}
	var errs []error
	for _, b := range blocked {
		errs = append(errs, b.Error)
		if b.Code == CodeWouldLoseQuorum {
			res.Code = CodeWouldLoseQuorum
		}
	}
	res.Error = fmt.Errorf("no member can be defragmented now: %w", errors.Join(errs...))
	return res
}

// pending are the voters not done yet: followers in ID order, the leader
// last.
func (d *defrag) pending(sv Survey) []Member {
	voters := sv.Voters()
	slices.SortFunc(voters, func(a, b Member) int {
		if (a.ID == sv.Leader) != (b.ID == sv.Leader) {
			if a.ID == sv.Leader {
				return 1
			}
			return -1
		}
		return cmpUint(a.ID, b.ID)
	})
	var todo []Member
	for _, m := range voters {
		if !d.done(m) {
			todo = append(todo, m)
		}
	}
	return todo
}

// done reports whether the member was defragmented or skipped already (in
// this run or one before a restart).
func (d *defrag) done(m Member) bool {
	return slices.Contains(d.progress.IDs, strconv.FormatUint(m.ID, 16))
}

// one defragments (or skips) one member; done is false when the step must
// be retried later (result says why).
func (d *defrag) one(ctx context.Context, sv Survey, m Member) (task.Result, bool) {
	if m.Status == nil {
		return task.Result{Requeue: true, Code: CodeDefragment, Error: fmt.Errorf("member %s does not answer: %w", m, m.StatusErr)}, false
	}
	size, inUse := m.Status.DbSize, m.Status.DbSizeInUse
	free := 0.0
	if size > 0 {
		free = float64(size-inUse) / float64(size)
	}
	if free < d.threshold {
		return d.record(MemberOutcome{Member: m.String(), Action: "skipped", Before: size,
			Reason: fmt.Sprintf("%.0f%% free, below the threshold of %.0f%%", 100*free, 100*d.threshold)}, m), true
	}
	// Safety: the others alone must keep quorum while this one stalls.
	if err := sv.Observation().MayStop(m.ID); err != nil && !d.allowUnavailable {
		return task.Result{Requeue: true, Code: CodeWouldLoseQuorum,
			Error: fmt.Errorf("defragmenting %s now: %w; waiting", m, err)}, false
	}
	if m.ID == sv.Leader && len(sv.Voters()) > 1 {
		if err := d.moveLeader(ctx, sv, m); err != nil {
			return task.Result{Requeue: true, Code: CodeDefragment, Error: err}, false
		}
		// Defragment it as a follower in the next round, from a fresh look.
		return task.Result{}, true
	}
	d.env.Report(fmt.Sprintf("defragmenting %s (%d MiB, %.0f%% free)", m, size>>20, 100*free))
	if err := d.etcd.Defragment(ctx, m.ClientURL); err != nil {
		return task.Result{Requeue: true, Code: CodeDefragment, Error: fmt.Errorf("defragment %s: %w", m, err)}, false
	}
	// Recorded at once: a restart from here on must not defragment this
	// member again. The next member waits for this one to be healthy (the
	// quorum check above), also after a restart.
	if res := d.record(MemberOutcome{Member: m.String(), Action: "defragmented", Before: size}, m); res.Error != nil {
		return res, true
	}
	after, err := d.waitHealthy(ctx, sv.ClusterID, m)
	if err != nil {
		return task.Result{Requeue: true, Code: CodeDefragment, Error: err}, false
	}
	d.progress.Done[len(d.progress.Done)-1].After = after.DbSize
	return task.Result{Error: d.env.Checkpoint(d.progress)}, true
}

func (d *defrag) record(o MemberOutcome, m Member) task.Result {
	d.progress.Done = append(d.progress.Done, o)
	d.progress.IDs = append(d.progress.IDs, strconv.FormatUint(m.ID, 16))
	if err := d.env.Checkpoint(d.progress); err != nil {
		return task.Result{Error: err}
	}
	return task.Result{}
}

// moveLeader hands leadership to the follower the rule book picks,
// preferring one already defragmented (it will not stall again in this
// task).
func (d *defrag) moveLeader(ctx context.Context, sv Survey, leader Member) error {
	t, ok := sv.Observation().Transferee(leader.ID, nil, func(m membership.Member) bool { return d.done(Member{ID: m.ID}) })
	if !ok {
		return fmt.Errorf("no follower can take leadership from %s", leader)
	}
	to, _ := sv.Member(t.ID)
	d.env.Report(fmt.Sprintf("moving leadership from %s to %s before defragmenting it", leader, to))
	cctx, cancel := context.WithTimeout(ctx, d.survey.CallTimeout*5)
	defer cancel()
	if err := d.etcd.MoveLeader(cctx, leader.ClientURL, to.ID); err != nil {
		return fmt.Errorf("move leadership from %s to %s: %w", leader, to, err)
	}
	return nil
}

// waitHealthy waits until the member answers again, in raft as itself, and
// has applied what it committed (within a small slack): it caught up with
// what the cluster did while it stalled.
func (d *defrag) waitHealthy(ctx context.Context, clusterID uint64, m Member) (*pb.StatusResponse, error) {
	deadline := time.Now().Add(d.catchUp)
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, d.survey.CallTimeout)
		st, err := d.etcd.Status(cctx, m.ClientURL)
		cancel()
		if err == nil && membership.StatusHealth(st, clusterID, m.ID, m.ClientURL).Problem == "" && st.RaftAppliedIndex+1000 >= st.RaftIndex {
			return st, nil
		}
		last = errors.Join(err, fmt.Errorf("errors %v, applied %d of %d", st.GetErrors(), st.GetRaftAppliedIndex(), st.GetRaftIndex()))
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("member %s did not catch up within %s after its defragmentation: %w", m, d.catchUp, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// finish disarms NOSPACE alarms of members that have room again: the
// defragmentation gave the space back, and a raised NOSPACE alarm keeps
// the whole cluster read-only until someone disarms it.
func (d *defrag) finish(ctx context.Context, sv Survey) task.Result {
	var disarmed []string
	for _, v := range sv.Voters() {
		if v.Status == nil {
			continue
		}
		alarms, err := d.etcd.AlarmList(ctx, v.ClientURL)
		if err != nil {
			return task.Result{Requeue: true, Error: fmt.Errorf("list alarms: %w", err)}
		}
		for _, a := range alarms {
			m, ok := sv.Member(a.MemberID)
			if a.Alarm != pb.AlarmType_NOSPACE || !ok || m.Status == nil {
				continue
			}
			if quota := m.Status.DbSizeQuota; quota > 0 && m.Status.DbSize >= quota*9/10 {
				continue // still full: disarming would only raise it again
			}
			if err := d.etcd.AlarmDisarm(ctx, v.ClientURL, a.MemberID, pb.AlarmType_NOSPACE); err != nil {
				return task.Result{Requeue: true, Error: fmt.Errorf("disarm the NOSPACE alarm of %s: %w", m, err)}
			}
			disarmed = append(disarmed, m.String())
		}
		break
	}
	out := struct {
		Members  []MemberOutcome `json:"members"`
		Disarmed []string        `json:"disarmedNoSpace,omitempty"`
	}{d.progress.Done, disarmed}
	n := 0
	for _, o := range d.progress.Done {
		if o.Action == "defragmented" {
			n++
		}
	}
	return task.Result{Output: out, Description: fmt.Sprintf("%d of %d members defragmented", n, len(d.progress.Done))}
}

func (d *defrag) Cleanup(context.Context) task.Result { return task.Result{} }

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
