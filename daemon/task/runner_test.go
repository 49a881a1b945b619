package task

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// memLocker is the cluster-wide lock in memory: pure logic tests of the
// runner; the etcd lock has its own tests against a real etcd.
type memLocker struct {
	mu     sync.Mutex
	holder *etcdclient.LockHolder
	lost   chan struct{}
	err    error // Acquire fails with it (etcd unreachable)
}

func (l *memLocker) Acquire(_ context.Context, h etcdclient.LockHolder) (etcdclient.TaskLock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	if l.holder != nil && l.holder.Task != h.Task {
		return nil, &etcdclient.TaskLockHeldError{By: *l.holder}
	}
	l.holder = &h
	l.lost = make(chan struct{})
	return &memHeld{l: l, lost: l.lost}, nil
}

func (l *memLocker) held() *etcdclient.LockHolder {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}

type memHeld struct {
	l    *memLocker
	lost chan struct{}
}

func (h *memHeld) Lost() <-chan struct{} { return h.lost }
func (h *memHeld) Release(context.Context) error {
	h.l.mu.Lock()
	h.l.holder = nil
	h.l.mu.Unlock()
	return nil
}
func (h *memHeld) Abandon() {}

// scripted is a handler whose steps the test decides.
type scripted struct {
	admit   func(ctx context.Context) Result
	execute func(ctx context.Context, env Env) Result
	cleaned *int
	env     Env
}

func (s *scripted) Admit(ctx context.Context) Result {
	if s.admit == nil {
		return Result{}
	}
	return s.admit(ctx)
}
func (s *scripted) Execute(ctx context.Context) Result { return s.execute(ctx, s.env) }
func (s *scripted) Cleanup(context.Context) Result {
	if s.cleaned != nil {
		*s.cleaned++
	}
	return Result{}
}

type fixture struct {
	runner *Runner
	locker *memLocker
	store  FileStore
	cancel context.CancelFunc
	done   chan struct{}
}

func newFixture(t *testing.T, dir string, h func() *scripted) *fixture {
	t.Helper()
	reg := &Registry{}
	reg.Register(Type{Name: "work", Timeout: time.Minute, New: func(task Task, env Env) (Handler, error) {
		if task.Params["bad"] != "" {
			return nil, errors.New("parameter bad: not allowed")
		}
		s := h()
		s.env = env
		return s, nil
	}})
	f := &fixture{locker: &memLocker{}, store: FileStore{State: state.Store{Dir: dir}}}
	f.runner = &Runner{Registry: reg, Store: f.store, Locker: f.locker, Node: "node-a",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RequeueInterval: 10 * time.Millisecond}
	return f
}

func (f *fixture) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go func() {
		defer close(f.done)
		_ = f.runner.Run(ctx)
	}()
	t.Cleanup(f.stop)
}

func (f *fixture) stop() {
	f.cancel()
	<-f.done
}

func wait(t *testing.T, r *Runner, id string) Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	task, err := r.Wait(ctx, id)
	if err != nil {
		t.Fatalf("task %s did not complete: %v (last: %+v)", id, err, task)
	}
	return task
}

func submit(t *testing.T, r *Runner, params map[string]string) Task {
	t.Helper()
	task, _, err := r.Submit(Request{Type: "work", Params: params, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestTaskOutcomes(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name      string
		admit     func(context.Context) Result
		execute   func(context.Context, Env) Result
		timeout   time.Duration
		wantPhase Phase
		wantCode  string
		cleaned   int
	}{
		{name: "success", execute: func(context.Context, Env) Result {
			return Result{Description: "did it", Output: map[string]int{"n": 1}}
		},
			wantPhase: Succeeded, cleaned: 1},
		{name: "admit refuses", admit: func(context.Context) Result { return Result{Error: boom, Code: "ERR_NOT_READY"} },
			execute: func(context.Context, Env) Result { panic("must not execute") }, wantPhase: Rejected, wantCode: "ERR_NOT_READY"},
		{name: "execute fails", execute: func(context.Context, Env) Result { return Result{Error: boom} },
			wantPhase: Failed, wantCode: CodeExecute, cleaned: 1},
		{name: "requeued then done", execute: requeueTimes(2), wantPhase: Succeeded, cleaned: 1},
		{name: "times out while it runs", timeout: time.Hour,
			execute:   func(ctx context.Context, _ Env) Result { <-ctx.Done(); return Result{Error: ctx.Err()} },
			wantPhase: Failed, wantCode: CodeTimeout, cleaned: 1},
		{name: "times out while requeued", timeout: time.Hour,
			execute:   func(context.Context, Env) Result { return Result{Requeue: true, Error: boom} },
			wantPhase: Failed, wantCode: CodeTimeout, cleaned: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cleaned := 0
			// A timeout passes when the case says, not when a busy
			// machine lets it: the runner's clock jumps two hours ahead
			// as the task is admitted (an hour's timeout counts from the
			// submission, so it cannot pass before that).
			clock := &jumpAtAdmission{}
			admit := func(ctx context.Context) Result {
				if c.timeout > 0 {
					clock.jumped.Store(true)
				}
				if c.admit == nil {
					return Result{}
				}
				return c.admit(ctx)
			}
			f := newFixture(t, t.TempDir(), func() *scripted { return &scripted{admit: admit, execute: c.execute, cleaned: &cleaned} })
			f.runner.Now = clock.now
			f.start(t)
			req := Request{Type: "work", Source: "test", Timeout: Duration(c.timeout)}
			task, _, err := f.runner.Submit(req)
			if err != nil {
				t.Fatal(err)
			}
			got := wait(t, f.runner, task.ID)
			if got.Phase != c.wantPhase {
				t.Fatalf("phase %s, want %s (%+v)", got.Phase, c.wantPhase, got)
			}
			if c.wantCode != "" && (len(got.LastErrors) == 0 || got.LastErrors[len(got.LastErrors)-1].Code != c.wantCode) {
				t.Errorf("last errors %+v, want the last with code %s", got.LastErrors, c.wantCode)
			}
			if cleaned != c.cleaned {
				t.Errorf("cleanup ran %d times, want %d", cleaned, c.cleaned)
			}
			if h := f.locker.held(); h != nil {
				t.Errorf("the cluster-wide lock is still held by %s after the task ended", h.TaskName())
			}
			// What the API shows is what a restarted agent reads.
			stored, err := f.store.Load()
			if err != nil || len(stored) != 1 || stored[0].Phase != c.wantPhase {
				t.Errorf("persisted %+v (%v), want one task %s", stored, err, c.wantPhase)
			}
		})
	}
}

// jumpAtAdmission is the real clock, two hours ahead once jumped.
type jumpAtAdmission struct{ jumped atomic.Bool }

func (c *jumpAtAdmission) now() time.Time {
	if c.jumped.Load() {
		return time.Now().Add(2 * time.Hour)
	}
	return time.Now()
}

func requeueTimes(n int) func(context.Context, Env) Result {
	calls := 0
	return func(context.Context, Env) Result {
		calls++
		if calls <= n {
			return Result{Requeue: true, Error: errors.New("not yet")}
		}
		return Result{}
	}
}

func TestLastErrorsKeepsTheNewestThree(t *testing.T) {
	f := newFixture(t, t.TempDir(), func() *scripted { return &scripted{execute: requeueTimes(5)} })
	f.start(t)
	got := wait(t, f.runner, submit(t, f.runner, nil).ID)
	if got.Phase != Succeeded || len(got.LastErrors) != MaxLastErrors || got.Attempts != 6 {
		t.Fatalf("phase %s, %d errors, %d attempts; want Succeeded, %d errors, 6 attempts", got.Phase, len(got.LastErrors), got.Attempts, MaxLastErrors)
	}
}

func TestBadRequestsRecordNothing(t *testing.T) {
	f := newFixture(t, t.TempDir(), func() *scripted { return &scripted{} })
	if _, _, err := f.runner.Submit(Request{Type: "nope"}); !errors.Is(err, ErrUnknownType) || !strings.Contains(err.Error(), "work") {
		t.Errorf("unknown type: %v, want ErrUnknownType naming the known types", err)
	}
	if _, _, err := f.runner.Submit(Request{Type: "work", Params: map[string]string{"bad": "1"}}); err == nil || !strings.Contains(err.Error(), "parameter bad") {
		t.Errorf("bad parameter: %v, want the handler's refusal", err)
	}
	if _, _, err := f.runner.Submit(Request{Type: "work", Timeout: Duration(25 * time.Hour)}); err == nil || !strings.Contains(err.Error(), "timeout 25h0m0s") {
		t.Errorf("a timeout beyond a day: %v, want a refusal naming it", err)
	}
	if tasks, _ := f.runner.List(); len(tasks) != 0 {
		t.Errorf("recorded %+v", tasks)
	}
}

func TestOneTaskAtATime(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, t.TempDir(), func() *scripted {
		return &scripted{execute: func(ctx context.Context, _ Env) Result { <-release; return Result{} }}
	})
	f.start(t)
	first := submit(t, f.runner, nil)
	eventually.True(t, 10*time.Second, "the task to run", func() bool { task, _ := f.runner.Get(first.ID); return task.Phase == InProgress })

	t.Run("a second task on the same node is rejected, naming the first", func(t *testing.T) {
		second, ok, err := f.runner.Submit(Request{Type: "work"})
		if err != nil || ok || second.Phase != Rejected || second.LastErrors[0].Code != CodeDuplicateTask || !strings.Contains(second.LastErrors[0].Description, first.ID) {
			t.Fatalf("second: ok %v err %v %+v", ok, err, second)
		}
	})
	close(release)
	wait(t, f.runner, first.ID)

	t.Run("a task of another node holding the cluster lock rejects this one", func(t *testing.T) {
		f.locker.mu.Lock()
		f.locker.holder = &etcdclient.LockHolder{Task: "other", Type: "snapshot", Host: "node-b", Acquired: time.Now()}
		f.locker.mu.Unlock()
		got := wait(t, f.runner, submit(t, f.runner, nil).ID)
		if got.Phase != Rejected || got.LastErrors[0].Code != CodeDuplicateTask || !strings.Contains(got.LastErrors[0].Description, "node-b") {
			t.Fatalf("phase %s, errors %+v", got.Phase, got.LastErrors)
		}
	})
}

func TestCancel(t *testing.T) {
	f := newFixture(t, t.TempDir(), func() *scripted {
		return &scripted{execute: func(ctx context.Context, _ Env) Result { <-ctx.Done(); return Result{Error: ctx.Err()} }}
	})
	f.start(t)
	task := submit(t, f.runner, nil)
	eventually.True(t, 10*time.Second, "the task to run", func() bool { got, _ := f.runner.Get(task.ID); return got.Phase == InProgress })
	if _, err := f.runner.Cancel(task.ID); err != nil {
		t.Fatal(err)
	}
	got := wait(t, f.runner, task.ID)
	if got.Phase != Failed || got.LastErrors[len(got.LastErrors)-1].Code != CodeCancelled {
		t.Fatalf("phase %s, errors %+v", got.Phase, got.LastErrors)
	}
	if _, err := f.runner.Cancel(task.ID); err == nil {
		t.Error("cancelling a completed task must fail")
	}
}

// An agent stopped in the middle of Execute leaves the task InProgress;
// the next agent on the same state dir executes it again, with the
// progress the first checkpointed, and finishes it.
func TestResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	entered := make(chan struct{})
	first := newFixture(t, dir, func() *scripted {
		return &scripted{execute: func(ctx context.Context, env Env) Result {
			if err := env.Checkpoint([]string{"member-1"}); err != nil {
				return Result{Error: err}
			}
			close(entered)
			<-ctx.Done()
			return Result{Error: ctx.Err()}
		}}
	})
	first.start(t)
	task := submit(t, first.runner, nil)
	<-entered
	first.stop()
	if got, _ := first.store.Load(); got[0].Phase != InProgress {
		t.Fatalf("after the stop the task is %s, want it left InProgress", got[0].Phase)
	}

	var resumedWith []string
	second := newFixture(t, dir, func() *scripted {
		return &scripted{execute: func(_ context.Context, env Env) Result {
			_ = json.Unmarshal(env.Progress, &resumedWith)
			return Result{Description: "resumed"}
		}}
	})
	second.start(t)
	got := wait(t, second.runner, task.ID)
	if got.Phase != Succeeded || got.Attempts != 2 || len(resumedWith) != 1 || resumedWith[0] != "member-1" {
		t.Fatalf("phase %s attempts %d progress %v; want Succeeded, 2 attempts, [member-1]", got.Phase, got.Attempts, resumedWith)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	f := newFixture(t, t.TempDir(), func() *scripted {
		return &scripted{execute: func(context.Context, Env) Result { return Result{} }}
	})
	f.start(t)
	for range MaxHistory + 5 {
		wait(t, f.runner, submit(t, f.runner, nil).ID)
	}
	if tasks, _ := f.runner.List(); len(tasks) != MaxHistory {
		t.Errorf("%d tasks kept, want %d", len(tasks), MaxHistory)
	}
}
