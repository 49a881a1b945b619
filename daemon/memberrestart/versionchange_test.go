package memberrestart

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// The task's parameters are checked before it is recorded: a version
// must be an etcd minor, and nothing else is taken.
func TestParameters(t *testing.T) {
	for _, tt := range []struct {
		params map[string]string
		want   string // a substring of the error; empty: accepted
	}{
		{nil, ""},
		{map[string]string{ParamReason: "etcd 3.6 to 3.7", ParamVersion: "3.7"}, ""},
		{map[string]string{ParamVersion: "latest"}, `parameter version="latest": want an etcd version such as 3.7`},
		{map[string]string{"image": "registry.k8s.io/etcd:3.7.0-0"}, `unknown parameter "image" (member-restart takes reason and version)`},
	} {
		_, err := Type(Deps{}).New(task.Task{Params: tt.params}, task.Env{})
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("params %v: error %v, want %q", tt.params, err, tt.want)
		}
	}
}

// The next host's restart may take the lock once this member is a voter
// caught up with the leader, as membership's MayLead says.
func TestCaughtUp(t *testing.T) {
	self := identity.Member{PeerURL: "https://10.0.0.1:2380"}
	member := func(id uint64, applied uint64, mods ...func(*membership.Member)) membership.Member {
		m := membership.Member{ID: id, PeerURLs: []string{"https://10.0.0." + string(rune('0'+id)) + ":2380"},
			Health: membership.Health{Reachable: true, Leader: 2, RaftAppliedIndex: applied}}
		for _, f := range mods {
			f(&m)
		}
		return m
	}
	view := func(reached bool, members ...membership.Member) node.Snapshot {
		s := node.Snapshot{Self: self}
		s.View.Reached, s.View.Members, s.View.LeaderID = reached, members, 2
		return s
	}
	down := func(m *membership.Member) { m.Health = membership.Health{Problem: "unreachable"} }
	learner := func(m *membership.Member) { m.IsLearner = true }
	for _, tt := range []struct {
		name string
		snap node.Snapshot
		want string
	}{
		{"caught up", view(true, member(1, 5000), member(2, 5100), member(3, 5100)), ""},
		{"far behind the leader", view(true, member(1, 2000), member(2, 5100), member(3, 5100)), "applied entries behind the leader"},
		{"not back yet", view(true, member(1, 0, down), member(2, 5100), member(3, 5100)), "it is no caught-up voter yet"},
		{"a learner", view(true, member(1, 5100, learner), member(2, 5100), member(3, 5100)), "a learner cannot lead"},
		{"no quorum", view(false, member(1, 5100), member(2, 5100), member(3, 5100)), "no quorum"},
		{"not a member", view(true, member(2, 5100), member(3, 5100), member(4, 5100)), "no member with this node's peer URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CaughtUp(tt.snap)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// fakeLoop answers the handler's asks as the agent's loop would, and
// the member's Status as etcd would: the old version until the restart,
// the new one after, caught up only after a few asks.
type fakeLoop struct {
	mu       sync.Mutex
	steps    []string
	restarts int
	lagging  int // CaughtUp asks answered "behind" before it is caught up
}

func (f *fakeLoop) step(s string) { f.mu.Lock(); f.steps = append(f.steps, s); f.mu.Unlock() }

func (f *fakeLoop) serve(ctx context.Context, r *Requests) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-r.C():
			switch req.Ask {
			case AskAllowed:
				req.Answer(1, nil)
			case AskRestart:
				f.mu.Lock()
				f.restarts++
				f.mu.Unlock()
				f.step("restart: " + req.Reason)
				req.Answer(1, nil)
			case AskCaughtUp:
				f.mu.Lock()
				f.lagging--
				behind := f.lagging >= 0
				f.mu.Unlock()
				if behind {
					req.Answer(1, errors.New("it is 5000 applied entries behind the leader"))
				} else {
					req.Answer(1, nil)
				}
			}
		}
	}
}

func (f *fakeLoop) status(context.Context, string) (*pb.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	version := "3.6.16"
	if f.restarts > 0 {
		version = "3.7.0"
	}
	return &pb.StatusResponse{Header: &pb.ResponseHeader{MemberId: 1}, Leader: 2, Version: version}, nil
}

// A version change saves the database before the member stops, restarts
// it once, and ends only when the member reports the new version and is
// a caught-up voter; a handler built again from the checkpoint (an agent
// killed after the stop) neither saves nor restarts a second time.
func TestVersionChangeSavesFirstAndWaitsForTheVersion(t *testing.T) {
	ctx := t.Context()
	loop := &fakeLoop{lagging: 2}
	reqs := NewRequests()
	go loop.serve(ctx, reqs)
	d := Deps{Requests: reqs, Status: loop.status, CallTimeout: time.Second,
		Self: func() identity.Member {
			return identity.Member{IP: netip.MustParseAddr("10.0.0.1"), ClientURL: "https://10.0.0.1:2379", PeerURL: "https://10.0.0.1:2380"}
		},
		Save: func(_ context.Context, name string) (string, error) {
			loop.step("save " + strings.SplitN(name, "-2", 2)[0])
			return "/var/lib/etcdlet/version-changes/" + name, nil
		}}
	var progress json.RawMessage
	env := task.Env{Report: func(string) {},
		Checkpoint: func(v any) error { var err error; progress, err = json.Marshal(v); return err }}
	params := map[string]string{ParamReason: "etcd 3.6 to 3.7", ParamVersion: "3.7"}
	h, err := Type(d).New(task.Task{Params: params}, env)
	if err != nil {
		t.Fatal(err)
	}
	res := h.Execute(ctx)
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	out := res.Output.(RestartOutput)
	if want := []string{"save before-etcd-3.7", "restart: etcd 3.6 to 3.7"}; !slices.Equal(loop.steps, want) {
		t.Errorf("steps %q, want %q", loop.steps, want)
	}
	if out.Version != "3.7.0" || !strings.HasPrefix(filepath.Base(out.Saved), "before-etcd-3.7-") || loop.lagging >= 0 {
		t.Errorf("output %+v (lagging asks left %d): want version 3.7.0, the saved database, and the wait until caught up", out, loop.lagging)
	}

	env.Progress = progress
	again, err := Type(d).New(task.Task{Params: params}, env)
	if err != nil {
		t.Fatal(err)
	}
	if res := again.Execute(ctx); res.Error != nil {
		t.Fatal(res.Error)
	}
	if len(loop.steps) != 2 {
		t.Errorf("a resumed task did %q again", loop.steps[2:])
	}
}

// Backups keeps the newest BackupsKept databases and drops what a killed
// save left behind.
func TestBackupsKeepTheNewest(t *testing.T) {
	dir := t.TempDir()
	b := Backups{Dir: dir, Keep: BackupsKept}
	now := time.Now()
	for i, name := range []string{"before-etcd-3.6-a.db", "before-etcd-3.7-b.db", "before-etcd-3.6-c.db", ".before-etcd-3.7-d.db.partial-1", "notes.txt"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		at := now.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.prune(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"before-etcd-3.6-c.db", "before-etcd-3.7-b.db", "notes.txt"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}
