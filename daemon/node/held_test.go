package node

import (
	"errors"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// restartingRuntime is a runtime whose Apply would or would not restart
// the running member (the static pod's manifest differs or not).
type restartingRuntime struct {
	runtime.Runtime
	restarts bool
	err      error
}

func (r restartingRuntime) WouldRestart(runtime.Spec) (bool, error) { return r.restarts, r.err }

// A change that restarts the running member is held for a member-restart
// task only where the restart could cost something: the member serves in
// a cluster of three voters or more. A member that does not serve, and a
// cluster of one or two voters (no restart keeps quorum there), take it
// at once, as does a runtime that restarts nothing on a change.
func TestHeldChange(t *testing.T) {
	v36, v37 := etcdversion.Minor{Major: 3, Minor: 6}, etcdversion.Minor{Major: 3, Minor: 7}
	self := identity.Member{Name: "etcd-main-192.0.2.1", PeerURL: "https://192.0.2.1:2380"}
	cluster := func(reached, selfServes bool, voters int) membership.View {
		v := membership.View{Reached: reached}
		for i := range voters {
			m := membership.Member{ID: uint64(i + 1), Health: membership.Health{Reachable: true}, PeerURLs: []string{"https://192.0.2.9" + string(rune('0'+i)) + ":2380"}}
			if i == 0 {
				m.PeerURLs = []string{self.PeerURL}
				if !selfServes {
					m.Health = membership.Health{Problem: "unreachable"}
				}
			}
			v.Members = append(v.Members, m)
		}
		return v
	}
	restarts := restartingRuntime{restarts: true}
	tests := []struct {
		name       string
		rt         runtime.Runtime
		want, runs etcdversion.Minor
		decision   localmember.Kind
		view       membership.View
		held       *HeldChange
	}{
		{name: "a new image in a cluster of three", rt: restarts, want: v37, runs: v36, decision: localmember.Keep, view: cluster(true, true, 3),
			held: &HeldChange{Reason: "etcd 3.6 to 3.7", Version: v37}},
		{name: "another manifest on the same version", rt: restarts, want: v36, runs: v36, decision: localmember.Keep, view: cluster(true, true, 5),
			held: &HeldChange{Reason: "its manifest"}},
		{name: "what runs is not known", rt: restarts, want: v37, decision: localmember.Keep, view: cluster(true, true, 3),
			held: &HeldChange{Reason: "its manifest"}},
		{name: "nothing that restarts", rt: restartingRuntime{}, want: v37, runs: v37, decision: localmember.Keep, view: cluster(true, true, 3)},
		{name: "the manifest cannot be read (Apply says why)", rt: restartingRuntime{restarts: true, err: errors.New("permission denied")}, want: v37, runs: v36,
			decision: localmember.Keep, view: cluster(true, true, 3)},
		{name: "a runtime that restarts nothing on a change", rt: runtime.Runtime(nil), want: v37, runs: v36, decision: localmember.Keep, view: cluster(true, true, 3)},
		{name: "two voters", rt: restarts, want: v37, runs: v36, decision: localmember.Keep, view: cluster(true, true, 2)},
		{name: "one voter", rt: restarts, want: v37, runs: v36, decision: localmember.Keep, view: cluster(true, true, 1)},
		{name: "the local member does not serve", rt: restarts, want: v37, runs: v36, decision: localmember.Keep, view: cluster(true, false, 3)},
		{name: "the cluster has no quorum", rt: restarts, want: v37, runs: v36, decision: localmember.Keep, view: cluster(false, true, 3)},
		{name: "a refused change runs nothing", rt: restarts, want: v37, runs: v36, decision: localmember.Refuse, view: cluster(true, true, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &Node{Deps: Deps{Settings: Settings{EtcdVersion: tt.want}, Runtime: tt.rt}}
			s := &Snapshot{Self: self, View: tt.view, Runtime: runtime.Status{Running: true, Version: tt.runs}, Decision: localmember.Decision{Kind: tt.decision}}
			got := n.heldChange(s)
			switch {
			case (got == nil) != (tt.held == nil):
				t.Fatalf("held %+v, want %+v", got, tt.held)
			case got != nil && *got != *tt.held:
				t.Fatalf("held %+v, want %+v", *got, *tt.held)
			}
		})
	}
}
