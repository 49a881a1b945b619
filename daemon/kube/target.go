package kube

import (
	"sync"
	"time"
)

// Results of one attempt to write to a target, as counted in metrics.
const (
	ResultWritten   = "written"   // the API server stored what was sent
	ResultUnchanged = "unchanged" // nothing to write: the stored object is current
	ResultStandby   = "standby"   // another agent is the writer
	ResultError     = "error"     // the attempt failed; retried with backoff
)

// TargetState is what `etcdlet status` shows about one reporting target.
type TargetState struct {
	// Target names what is written, e.g. "Lease kube-system/etcd-main-192.0.2.1".
	Target string `json:"target"`
	// Detail says what the agent does for the target now ("renewing as
	// Leader", "standby: node-b is the writer").
	Detail string `json:"detail,omitempty"`
	// LastSuccess is when the target was last written or found current.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// LastAttempt is when the agent last tried.
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	// LastError is the error of the latest attempt, empty after a success.
	LastError string `json:"lastError,omitempty"`
	// Failures counts the attempts that failed since the last success.
	Failures int `json:"failures,omitempty"`
}

// Tracker keeps one target's state; safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	st       TargetState
	onResult func(target, result string)
	onChange func()
}

// NewTracker returns a tracker for target. onResult, when set, is called
// with every attempt's result (metrics); onChange after every change of the
// state (persisting it for `etcdlet status`).
func NewTracker(target string, onResult func(target, result string), onChange func()) *Tracker {
	return &Tracker{st: TargetState{Target: target}, onResult: onResult, onChange: onChange}
}

// Rename changes the target's name (a lease name learnt late).
func (t *Tracker) Rename(target string) {
	t.update(func(st *TargetState) { st.Target = target })
}

// Succeeded records an attempt that wrote (ResultWritten), found nothing
// to write (ResultUnchanged) or found another writer (ResultStandby).
func (t *Tracker) Succeeded(now time.Time, result, detail string) {
	t.update(func(st *TargetState) {
		st.LastAttempt, st.LastSuccess = now, now
		st.LastError, st.Failures = "", 0
		st.Detail = detail
	})
	t.result(result)
}

// Failed records an attempt that failed.
func (t *Tracker) Failed(now time.Time, err error) {
	t.update(func(st *TargetState) {
		st.LastAttempt = now
		st.LastError = err.Error()
		st.Failures++
	})
	t.result(ResultError)
}

// Idle records why nothing is attempted (no local member yet, say),
// without counting it as an attempt.
func (t *Tracker) Idle(detail string) {
	t.update(func(st *TargetState) { st.Detail = detail })
}

// State returns a copy of the state.
func (t *Tracker) State() TargetState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st
}

func (t *Tracker) update(f func(*TargetState)) {
	t.mu.Lock()
	before := t.st
	f(&t.st)
	changed := t.st != before
	t.mu.Unlock()
	if changed && t.onChange != nil {
		t.onChange()
	}
}

func (t *Tracker) result(result string) {
	if t.onResult != nil {
		t.onResult(t.State().Target, result)
	}
}
