package task

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

// DefaultRequeueInterval is how long a step that asked to be requeued waits
// (druid's default).
const DefaultRequeueInterval = 15 * time.Second

// ErrUnknownType is returned by Submit for a type not in the registry.
var ErrUnknownType = errors.New("unknown task type")

// MaxTimeout bounds the timeout a request may set.
const MaxTimeout = 24 * time.Hour

// ErrNotFound is returned for an unknown task ID.
var ErrNotFound = errors.New("no such task")

// Runner runs the tasks of this node one at a time, in the order they came.
type Runner struct {
	Registry *Registry
	Store    Store
	Locker   Locker
	// Node names this agent in the lock and in the tasks.
	Node string
	Log  *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// RequeueInterval (DefaultRequeueInterval when 0).
	RequeueInterval time.Duration
	// OnTransition is told of every phase change (metrics, Events); it
	// must not block.
	OnTransition func(t Task, from Phase)

	mu      sync.Mutex
	tasks   []Task
	loaded  bool
	changed chan struct{} // closed and replaced on every change
	wake    chan struct{}
	cancels map[string]context.CancelCauseFunc
	// cancelled are tasks the operator cancelled; current is the task the
	// worker is stepping.
	cancelled map[string]bool
	current   string
	handlers  map[string]Handler
	held      map[string]etcdclient.TaskLock
}

// Load reads the persisted tasks; Run calls it when it was not called.
// Tasks that were running when the agent stopped are resumed by Run.
func (r *Runner) Load() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded {
		return nil
	}
	tasks, err := r.Store.Load()
	if err != nil {
		return err
	}
	r.tasks = tasks
	r.loaded = true
	r.changed = make(chan struct{})
	r.wake = make(chan struct{}, 1)
	r.cancels = map[string]context.CancelCauseFunc{}
	r.cancelled = map[string]bool{}
	r.handlers = map[string]Handler{}
	r.held = map[string]etcdclient.TaskLock{}
	return nil
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

func (r *Runner) requeue() time.Duration {
	if r.RequeueInterval > 0 {
		return r.RequeueInterval
	}
	return DefaultRequeueInterval
}

// Submit records a new task. A type that is not registered, or parameters
// its handler refuses, are errors (nothing is recorded). While another task
// of this node is not completed, the new one is recorded as Rejected with
// ERR_DUPLICATE_TASK and returned with ok false; tasks of other nodes are
// found by the cluster-wide lock at admission.
func (r *Runner) Submit(req Request) (t Task, ok bool, err error) {
	if err := r.Load(); err != nil {
		return Task{}, false, err
	}
	typ, found := r.Registry.Lookup(req.Type)
	if !found {
		return Task{}, false, fmt.Errorf("%w %q (known: %v)", ErrUnknownType, req.Type, r.Registry.Names())
	}
	if req.Timeout < 0 || req.Timeout.D() > MaxTimeout {
		return Task{}, false, fmt.Errorf("task %s: timeout %s: must be between 0 (the type's default) and %s", req.Type, req.Timeout.D(), MaxTimeout)
	}
	now := r.now()
	t = Task{ID: newID(now), Type: req.Type, Params: req.Params, Source: req.Source, Node: r.Node,
		Timeout: req.Timeout, Phase: Pending, CreatedAt: now, LastTransitionTime: now,
		LastOperation: Operation{Type: OpAdmit, State: OpInProgress, Description: "waiting for admission", LastUpdateTime: now}}
	if t.Timeout <= 0 {
		t.Timeout = Duration(typ.Timeout)
	}
	if _, err := typ.New(t, Env{}); err != nil {
		return Task{}, false, fmt.Errorf("task %s: %w", req.Type, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, other := range r.tasks {
		if !other.Phase.Completed() {
			t.Phase = Rejected
			t.LastOperation.State = OpFailed
			t.LastOperation.Description = "rejected: task " + other.String() + " is " + string(other.Phase) + " on this node"
			t.LastErrors = []Error{{Code: CodeDuplicateTask, Description: t.LastOperation.Description, ObservedAt: now}}
			t.Cleaned = true
			break
		}
	}
	r.tasks = trimHistory(append(r.tasks, t))
	if err := r.saveLocked(); err != nil {
		r.tasks = r.tasks[:len(r.tasks)-1]
		return Task{}, false, err
	}
	r.log(t).Info("task submitted", "source", t.Source, "params", t.Params, "state", t.Phase)
	r.transitioned(t, "")
	r.poke()
	return t, t.Phase != Rejected, nil
}

// Get returns a task by ID.
func (r *Runner) Get(id string) (Task, error) {
	if err := r.Load(); err != nil {
		return Task{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := r.indexLocked(id); i >= 0 {
		return r.tasks[i], nil
	}
	return Task{}, fmt.Errorf("%w %q", ErrNotFound, id)
}

// List returns every task, oldest first.
func (r *Runner) List() ([]Task, error) {
	if err := r.Load(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Task(nil), r.tasks...), nil
}

// Cancel stops a task that is not completed: a Pending one is rejected, a
// running one's context is cancelled and it ends Failed with
// ERR_OPERATION_CANCELLED once its handler returns.
func (r *Runner) Cancel(id string) (Task, error) {
	if err := r.Load(); err != nil {
		return Task{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.indexLocked(id)
	if i < 0 {
		return Task{}, fmt.Errorf("%w %q", ErrNotFound, id)
	}
	t := r.tasks[i]
	switch {
	case t.Phase.Completed():
		return t, fmt.Errorf("task %s is already %s", t, t.Phase)
	case t.Phase == Pending && r.current != id:
		r.finishLocked(i, Rejected, OpFailed, "cancelled before admission", &Error{Code: CodeCancelled, Description: "cancelled by the operator"})
	default:
		// The worker has it: its step ends at once, or its next one does
		// not start (a task waiting to be retried).
		r.cancelled[id] = true
		if cancel := r.cancels[id]; cancel != nil {
			cancel(errCancelled)
		}
	}
	return r.tasks[i], nil
}

var errCancelled = errors.New("cancelled by the operator")

// Wait blocks until the task is completed (and cleaned up) or ctx ends,
// and returns its latest state.
func (r *Runner) Wait(ctx context.Context, id string) (Task, error) {
	if err := r.Load(); err != nil {
		return Task{}, err
	}
	for {
		r.mu.Lock()
		i := r.indexLocked(id)
		if i < 0 {
			r.mu.Unlock()
			return Task{}, fmt.Errorf("%w %q", ErrNotFound, id)
		}
		t, changed := r.tasks[i], r.changed
		r.mu.Unlock()
		if t.Phase.Completed() && t.Cleaned {
			return t, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return t, ctx.Err()
		}
	}
}

// Run works through the tasks until ctx ends. A task interrupted by the
// end of ctx stays in its phase (and keeps the cluster-wide lock until its
// lease expires), so the next run of the agent resumes it.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.Load(); err != nil {
		return err
	}
	for {
		t, ok := r.next()
		if !ok {
			select {
			case <-ctx.Done():
				r.abandon()
				return nil
			case <-r.wake:
				continue
			}
		}
		r.mu.Lock()
		r.current = t.ID
		r.mu.Unlock()
		r.step(ctx, t)
		r.mu.Lock()
		r.current = ""
		r.mu.Unlock()
		if ctx.Err() != nil {
			r.abandon()
			return nil
		}
	}
}

// abandon lets go of the locks of tasks interrupted by the agent's stop.
func (r *Runner) abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, h := range r.held {
		h.Abandon()
		delete(r.held, id)
	}
}

// next is the oldest task with work left.
func (r *Runner) next() (Task, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tasks {
		if !t.Phase.Completed() || !t.Cleaned {
			return t, true
		}
	}
	return Task{}, false
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runner) indexLocked(id string) int {
	for i, t := range r.tasks {
		if t.ID == id {
			return i
		}
	}
	return -1
}

// update applies f to the task and persists the result. A failure to
// persist is logged: the step goes on, and the next update tries again.
func (r *Runner) update(id string, f func(t *Task)) Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.indexLocked(id)
	if i < 0 {
		return Task{}
	}
	r.updateLocked(i, f)
	return r.tasks[i]
}

// updateLocked applies f to task i, stamps the change (and the transition,
// when the phase changed), persists the tasks and tells of the transition;
// r.mu is held.
func (r *Runner) updateLocked(i int, f func(t *Task)) {
	t := &r.tasks[i]
	from := t.Phase
	f(t)
	now := r.now()
	t.LastOperation.LastUpdateTime = now
	if t.Phase != from {
		t.LastTransitionTime = now
	}
	if err := r.saveLocked(); err != nil {
		r.log(*t).Error("cannot persist the task's state; a restart would repeat this step", "error", err)
	}
	if t.Phase != from {
		r.transitioned(*t, from)
	}
}

func (r *Runner) saveLocked() error {
	err := r.Store.Save(r.tasks)
	close(r.changed)
	r.changed = make(chan struct{})
	return err
}

func (r *Runner) transitioned(t Task, from Phase) {
	if from != "" {
		r.log(t).Info("task "+string(t.Phase), "from", from, "description", t.LastOperation.Description)
	}
	if r.OnTransition != nil {
		r.OnTransition(t, from)
	}
}

func (r *Runner) log(t Task) *slog.Logger {
	return r.Log.With("task", t.ID, "type", t.Type)
}

// finishLocked completes a task; r.mu is held.
func (r *Runner) finishLocked(i int, p Phase, s OperationState, description string, e *Error) {
	r.updateLocked(i, func(t *Task) {
		t.Phase = p
		t.LastOperation.State = s
		t.LastOperation.Description = description
		if e != nil {
			e.ObservedAt = r.now()
			t.LastErrors = appendError(t.LastErrors, *e)
		}
		if p == Rejected {
			t.Cleaned = true // it never ran: nothing to clean up
		}
	})
}

func appendError(errs []Error, e Error) []Error {
	errs = append(errs, e)
	if len(errs) > MaxLastErrors {
		errs = errs[len(errs)-MaxLastErrors:]
	}
	return errs
}

func newID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func marshalOutput(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
