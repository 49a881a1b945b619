// Package task runs ops tasks (snapshots, defragmentation, compaction) on
// the node with etcd-druid's EtcdOpsTask pattern: a handler per task type
// with Admit, Execute and Cleanup, a registry keyed by type, and the states
// Pending → InProgress → Succeeded | Failed, or Pending → Rejected.
//
// Every transition is written to the state dir before the next step
// starts, so an agent killed at any moment resumes the same task in the same
// phase: a Pending task is admitted again, an InProgress one executed again
// (handlers make Execute idempotent). One task runs at a time per cluster,
// across all agents: the runner holds a lease-backed key in etcd while a
// task is admitted or runs, and a second task is rejected with the holder
// named.
package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Phase is a task's state (EtcdOpsTask's status.state).
type Phase string

// Phases; transitions are irreversible.
const (
	Pending    Phase = "Pending"
	InProgress Phase = "InProgress"
	Succeeded  Phase = "Succeeded"
	Failed     Phase = "Failed"
	Rejected   Phase = "Rejected"
)

// Completed reports whether the phase is final.
func (p Phase) Completed() bool { return p == Succeeded || p == Failed || p == Rejected }

// OperationType is the step a task is in (status.lastOperation.type).
type OperationType string

// Operation types.
const (
	OpAdmit     OperationType = "Admit"
	OpExecution OperationType = "Execution"
	OpCleanup   OperationType = "Cleanup"
)

// OperationState is how that step stands.
type OperationState string

// Operation states.
const (
	OpInProgress OperationState = "InProgress"
	OpCompleted  OperationState = "Completed"
	OpFailed     OperationState = "Failed"
)

// Error codes recorded in LastErrors, beside the handlers' own.
const (
	CodeDuplicateTask = "ERR_DUPLICATE_TASK"
	CodeUnknownType   = "ERR_UNKNOWN_TASK_TYPE"
	CodeLock          = "ERR_TASK_LOCK"
	CodeTimeout       = "ERR_TASK_TIMEOUT"
	CodeCancelled     = "ERR_OPERATION_CANCELLED"
	CodeAdmit         = "ERR_ADMIT"
	CodeExecute       = "ERR_EXECUTE"
	CodeCleanup       = "ERR_CLEANUP"
	CodeAgentRestart  = "ERR_AGENT_RESTARTED"
)

// MaxLastErrors is how many errors a task keeps, the newest last: druid's
// controller keeps 3 (its API allows 10); so does etcdlet.
const MaxLastErrors = 3

// Result is what a handler step returns (druid's handler.Result). With
// Requeue the step is retried after the runner's requeue interval, within
// the task's timeout; Error is recorded either way. Without Requeue, an
// Error fails the step and a nil Error completes it.
type Result struct {
	Description string
	Error       error
	Requeue     bool
	// Code classifies Error for LastErrors; CodeAdmit/CodeExecute when
	// empty.
	Code string
	// Output is the step's product (a snapshot's description), kept in the
	// task for its callers.
	Output any
}

// Handler carries out one task. Execute must be idempotent: a restarted
// agent calls it again for a task that was in progress, and Progress (see
// Env) is what it may rely on from the earlier attempt.
type Handler interface {
	// Admit is the one-time gate: preconditions that make the task
	// pointless or unsafe reject it.
	Admit(ctx context.Context) Result
	// Execute does the work; retried while it asks to be requeued.
	Execute(ctx context.Context) Result
	// Cleanup runs once the task is completed (also after a failure):
	// temporary files, half-done uploads. Its errors are logged and
	// recorded, never change the outcome.
	Cleanup(ctx context.Context) Result
}

// Env is what a handler gets besides its parameters.
type Env struct {
	// Progress is what Checkpoint last stored for this task (nil at first).
	Progress json.RawMessage
	// Checkpoint persists progress before the handler goes on, so a
	// restarted agent resumes instead of repeating (a rolling defrag
	// records the members it finished).
	Checkpoint func(v any) error
	// Report shows what the handler is doing now (task status, the CLI's
	// progress line); not persisted on every call.
	Report func(description string)
}

// Factory builds a handler for a task; it checks the parameters and
// returns an error naming the bad one.
type Factory func(t Task, env Env) (Handler, error)

// Type is a registered task type.
type Type struct {
	Name string
	// Summary is one line for `etcdlet task run --help`.
	Summary string
	// Timeout bounds the task from admission to completion, unless the
	// request sets its own.
	Timeout time.Duration
	New     Factory
}

// Registry holds the task types by name.
type Registry struct{ types map[string]Type }

// Register adds a type; a second registration of a name is a programming
// error.
func (r *Registry) Register(t Type) {
	if r.types == nil {
		r.types = map[string]Type{}
	}
	if _, dup := r.types[t.Name]; dup {
		panic("task type registered twice: " + t.Name)
	}
	r.types[t.Name] = t
}

// Lookup returns a type by name.
func (r *Registry) Lookup(name string) (Type, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names lists the registered types.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.types))
	for n := range r.types {
		names = append(names, n)
	}
	return sortedStrings(names)
}

// Operation is the step a task is in (status.lastOperation).
type Operation struct {
	Type           OperationType  `json:"type"`
	State          OperationState `json:"state"`
	Description    string         `json:"description,omitempty"`
	RunID          string         `json:"runID"`
	LastUpdateTime time.Time      `json:"lastUpdateTime"`
}

// Error is one entry of LastErrors.
type Error struct {
	Code        string    `json:"code"`
	Description string    `json:"description"`
	ObservedAt  time.Time `json:"observedAt"`
}

// Request asks for a task.
type Request struct {
	Type   string            `json:"type"`
	Params map[string]string `json:"params,omitempty"`
	// Timeout overrides the type's default when set.
	Timeout Duration `json:"timeout,omitempty"`
	// Source says who asked: cli, http (the backup-restore API), schedule.
	Source string `json:"source,omitempty"`
}

// Task is a task and its status, as persisted and as the API shows it.
type Task struct {
	ID                 string            `json:"id"`
	Type               string            `json:"type"`
	Params             map[string]string `json:"params,omitempty"`
	Source             string            `json:"source,omitempty"`
	Node               string            `json:"node,omitempty"`
	Timeout            Duration          `json:"timeout"`
	Phase              Phase             `json:"state"`
	LastOperation      Operation         `json:"lastOperation"`
	LastErrors         []Error           `json:"lastErrors,omitempty"`
	CreatedAt          time.Time         `json:"createdAt"`
	StartedAt          *time.Time        `json:"startedAt,omitempty"`
	LastTransitionTime time.Time         `json:"lastTransitionTime"`
	// Attempts counts Execute calls, across restarts.
	Attempts int             `json:"attempts,omitempty"`
	Progress json.RawMessage `json:"progress,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	// Cleaned is set once Cleanup ran for a completed task.
	Cleaned bool `json:"cleaned,omitempty"`
}

// Deadline is when the task times out: its timeout after it was created
// (a Pending task's wait for admission counts).
func (t Task) Deadline() time.Time { return t.CreatedAt.Add(t.Timeout.D()) }

func (t Task) String() string { return fmt.Sprintf("%s (%s)", t.ID, t.Type) }

// Duration is a time.Duration that reads and writes as "1m30s" in JSON.
type Duration time.Duration

// D is the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as Go's duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string ("90s", "15m").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"15m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}
