package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// step moves one task forward: admission, execution (until it succeeds,
// fails, times out or is cancelled), then cleanup. It returns early, with
// the task in its phase, when ctx ends.
func (r *Runner) step(ctx context.Context, t Task) {
	switch {
	case t.Phase.Completed():
		r.cleanup(ctx, t)
	case t.Phase == Pending:
		if r.admit(ctx, t) {
			if t, err := r.Get(t.ID); err == nil {
				r.execute(ctx, t)
			}
		}
	default:
		r.execute(ctx, t)
	}
}

// handler returns the task's handler, built once per agent run: a
// restarted agent builds it again from the task's parameters and progress.
func (r *Runner) handler(t Task) (Handler, error) {
	r.mu.Lock()
	h := r.handlers[t.ID]
	r.mu.Unlock()
	if h != nil {
		return h, nil
	}
	typ, ok := r.Registry.Lookup(t.Type)
	if !ok {
		return nil, fmt.Errorf("%w %q: this agent does not know it (a downgrade?)", ErrUnknownType, t.Type)
	}
	env := Env{
		Progress: t.Progress,
		Checkpoint: func(v any) error {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			r.update(t.ID, func(t *Task) { t.Progress = b })
			return nil
		},
		Report: func(d string) { r.update(t.ID, func(t *Task) { t.LastOperation.Description = d }) },
	}
	h, err := typ.New(t, env)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.handlers[t.ID] = h
	r.mu.Unlock()
	return h, nil
}

// run calls one handler step with the task's deadline, the operator's
// cancellation and the lock's loss all ending its context; the cause says
// which. The time left is read on the runner's clock, as every other
// check of the deadline is.
func (r *Runner) run(ctx context.Context, t Task, lost <-chan struct{}, f func(context.Context) Result) (Result, error) {
	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stepCtx, cancelDeadline := context.WithTimeoutCause(stepCtx, t.Deadline().Sub(r.now()), errTimeout)
	defer cancelDeadline()
	r.mu.Lock()
	r.cancels[t.ID] = cancel
	if r.cancelled[t.ID] {
		cancel(errCancelled)
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.cancels, t.ID)
		r.mu.Unlock()
	}()
	if lost != nil {
		go func() {
			select {
			case <-lost:
				cancel(errLockLost)
			case <-stepCtx.Done():
			}
		}()
	}
	res := f(stepCtx)
	return res, context.Cause(stepCtx)
}

var (
	errTimeout  = errors.New("the task's timeout passed")
	errLockLost = errors.New("the cluster-wide task lock was lost (its lease expired: etcd unreachable from this node?)")
)

// interrupted turns the cause that ended a step's context into the task's
// end; ok is false when the step was not interrupted (or only because the
// agent stops, which leaves the task to resume).
func interrupted(cause error) (code, description string, ok bool) {
	switch {
	case errors.Is(cause, errCancelled):
		return CodeCancelled, "cancelled by the operator", true
	case errors.Is(cause, errTimeout):
		return CodeTimeout, errTimeout.Error(), true
	case errors.Is(cause, errLockLost):
		return CodeLock, errLockLost.Error(), true
	}
	return "", "", false
}

// admit takes the cluster-wide lock and asks the handler's Admit. It
// returns true when the task is now InProgress (holding the lock).
func (r *Runner) admit(ctx context.Context, t Task) bool {
	for {
		t = r.update(t.ID, func(t *Task) {
			t.LastOperation = Operation{Type: OpAdmit, State: OpInProgress, Description: "admitting", RunID: newRunID()}
		})
		if r.now().After(t.Deadline()) {
			r.finish(t.ID, Rejected, "not admitted before its timeout", &Error{Code: CodeTimeout, Description: "not admitted within " + t.Timeout.D().String()})
			return false
		}
		held, err := r.Locker.Acquire(ctx, r.holder(t))
		var busy *etcdclient.TaskLockHeldError
		switch {
		case errors.As(err, &busy):
			r.finish(t.ID, Rejected, "rejected: "+busy.Error(), &Error{Code: CodeDuplicateTask, Description: busy.Error()})
			return false
		case err != nil:
			if ctx.Err() != nil {
				return false
			}
			r.recordRetry(t.ID, CodeLock, fmt.Errorf("take the cluster-wide task lock: %w", err))
			if !r.sleep(ctx, t) {
				return false
			}
			continue
		}
		r.setHeld(t.ID, held)
		h, err := r.handler(t)
		if err != nil {
			r.release(t.ID)
			r.finish(t.ID, Rejected, "rejected: "+err.Error(), &Error{Code: CodeUnknownType, Description: err.Error()})
			return false
		}
		res, cause := r.run(ctx, t, held.Lost(), h.Admit)
		if code, why, ok := interrupted(cause); ok {
			r.release(t.ID)
			r.finish(t.ID, Rejected, "rejected: "+why, &Error{Code: code, Description: why})
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		switch {
		case res.Requeue:
			r.release(t.ID)
			r.recordRetry(t.ID, codeOr(res.Code, CodeAdmit), res.Error)
			if !r.sleep(ctx, t) {
				return false
			}
			continue
		case res.Error != nil:
			r.release(t.ID)
			r.finish(t.ID, Rejected, "rejected: "+res.Error.Error(), &Error{Code: codeOr(res.Code, CodeAdmit), Description: res.Error.Error()})
			return false
		}
		now := r.now()
		r.update(t.ID, func(t *Task) {
			t.Phase = InProgress
			t.StartedAt = &now
			t.LastOperation.State = OpCompleted
			t.LastOperation.Description = orDefault(res.Description, "admitted")
		})
		return true
	}
}

// execute runs the handler's Execute until the task completes, then its
// Cleanup.
func (r *Runner) execute(ctx context.Context, t Task) {
	for {
		if r.heldFor(t.ID) == nil {
			held, err := r.Locker.Acquire(ctx, r.holder(t))
			var busy *etcdclient.TaskLockHeldError
			switch {
			case errors.As(err, &busy):
				// Another task took the lock while this agent was away (its
				// lease expired): running this one too would break the
				// one-task rule.
				r.finish(t.ID, Failed, "the cluster-wide task lock passed to another task while this agent was down", &Error{Code: CodeLock, Description: busy.Error()})
				r.cleanupByID(ctx, t.ID)
				return
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				r.recordRetry(t.ID, CodeLock, fmt.Errorf("take the cluster-wide task lock: %w", err))
				if !r.sleep(ctx, t) {
					r.timeOutIfDue(ctx, t.ID)
					return
				}
				continue
			}
			r.setHeld(t.ID, held)
		}
		h, err := r.handler(t)
		if err != nil {
			r.finish(t.ID, Failed, err.Error(), &Error{Code: CodeUnknownType, Description: err.Error()})
			r.cleanupByID(ctx, t.ID)
			return
		}
		t = r.update(t.ID, func(t *Task) {
			t.Attempts++
			t.LastOperation = Operation{Type: OpExecution, State: OpInProgress, Description: fmt.Sprintf("executing (attempt %d)", t.Attempts), RunID: newRunID()}
		})
		res, cause := r.run(ctx, t, r.heldFor(t.ID).Lost(), h.Execute)
		if code, why, ok := interrupted(cause); ok {
			if res.Error != nil {
				why += ": " + res.Error.Error()
			}
			r.finish(t.ID, Failed, why, &Error{Code: code, Description: why})
			r.cleanupByID(ctx, t.ID)
			return
		}
		if ctx.Err() != nil {
			return
		}
		switch {
		case res.Requeue:
			r.recordRetry(t.ID, codeOr(res.Code, CodeExecute), res.Error)
			if r.cancelledWhileWaiting(ctx, t.ID) {
				return
			}
			if !r.sleep(ctx, t) {
				r.timeOutIfDue(ctx, t.ID)
				return
			}
			continue
		case res.Error != nil:
			r.finish(t.ID, Failed, res.Error.Error(), &Error{Code: codeOr(res.Code, CodeExecute), Description: res.Error.Error()})
		default:
			r.update(t.ID, func(t *Task) {
				t.Phase = Succeeded
				t.Output = marshalOutput(res.Output)
				t.LastOperation.State = OpCompleted
				t.LastOperation.Description = orDefault(res.Description, "done")
			})
		}
		r.cleanupByID(ctx, t.ID)
		return
	}
}

// timeOutIfDue fails a task whose timeout passed while it waited to be
// retried.
func (r *Runner) timeOutIfDue(ctx context.Context, id string) {
	t, err := r.Get(id)
	if err != nil || ctx.Err() != nil || !r.now().After(t.Deadline()) {
		return
	}
	r.finish(id, Failed, errTimeout.Error(), &Error{Code: CodeTimeout, Description: errTimeout.Error()})
	r.cleanupByID(ctx, id)
}

func (r *Runner) cleanupByID(ctx context.Context, id string) {
	if t, err := r.Get(id); err == nil {
		r.cleanup(ctx, t)
	}
}

// cleanup runs the handler's Cleanup once for a completed task and then
// gives the lock up. Rejected tasks never ran, so they have nothing to
// clean.
func (r *Runner) cleanup(ctx context.Context, t Task) {
	if t.Cleaned {
		r.release(t.ID)
		return
	}
	if h, err := r.handler(t); err == nil {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		res := h.Cleanup(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if res.Error != nil {
			r.log(t).Warn("task cleanup failed", "error", res.Error)
			r.update(t.ID, func(t *Task) {
				t.LastErrors = appendError(t.LastErrors, Error{Code: codeOr(res.Code, CodeCleanup), Description: res.Error.Error(), ObservedAt: r.now()})
			})
		}
	}
	// The lock goes before the task reads as finished, so that whoever
	// waited for it can start the next one at once.
	r.release(t.ID)
	// Finished, and the history trimmed, in one change: whoever waited for
	// the task sees both at once.
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := r.indexLocked(t.ID); i >= 0 {
		r.tasks[i].Cleaned = true
		r.tasks[i].LastOperation.LastUpdateTime = r.now()
	}
	delete(r.handlers, t.ID)
	delete(r.cancelled, t.ID)
	r.tasks = trimHistory(r.tasks)
	if err := r.saveLocked(); err != nil {
		r.log(t).Error("cannot persist the task's state", "error", err)
	}
}

func (r *Runner) finish(id string, p Phase, description string, e *Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := r.indexLocked(id); i >= 0 && !r.tasks[i].Phase.Completed() {
		state := OpFailed
		if p == Succeeded {
			state = OpCompleted
		}
		r.finishLocked(i, p, state, description, e)
	}
}

func (r *Runner) recordRetry(id, code string, err error) {
	if err == nil {
		return
	}
	r.update(id, func(t *Task) {
		t.LastOperation.Description = "will retry: " + err.Error()
		t.LastErrors = appendError(t.LastErrors, Error{Code: code, Description: err.Error(), ObservedAt: r.now()})
	})
	r.Log.Warn("task step will be retried", "task", id, "error", err, "in", r.requeue())
}

// sleep waits the requeue interval, cut short by the task's deadline; false
// when ctx ended or the deadline passed.
func (r *Runner) sleep(ctx context.Context, t Task) bool {
	wait := r.requeue()
	left := t.Deadline().Sub(r.now())
	if left <= 0 {
		return false
	}
	timer := time.NewTimer(min(wait, left))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return wait < left
	}
}

// cancelledWhileWaiting ends a task the operator cancelled between two
// attempts.
func (r *Runner) cancelledWhileWaiting(ctx context.Context, id string) bool {
	r.mu.Lock()
	cancelled := r.cancelled[id]
	r.mu.Unlock()
	if !cancelled {
		return false
	}
	r.finish(id, Failed, "cancelled by the operator", &Error{Code: CodeCancelled, Description: "cancelled by the operator"})
	r.cleanupByID(ctx, id)
	return true
}

func (r *Runner) setHeld(id string, h etcdclient.TaskLock) {
	r.mu.Lock()
	r.held[id] = h
	r.mu.Unlock()
}

func (r *Runner) heldFor(id string) etcdclient.TaskLock {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[id]
}

func (r *Runner) release(id string) {
	r.mu.Lock()
	h := r.held[id]
	delete(r.held, id)
	r.mu.Unlock()
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Release(ctx); err != nil {
		r.Log.Warn("could not release the cluster-wide task lock; it frees itself when its lease expires", "task", id, "error", err)
	}
}

func codeOr(code, fallback string) string {
	if code != "" {
		return code
	}
	return fallback
}

func orDefault(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}

func newRunID() string { return newID(time.Now().UTC()) }
