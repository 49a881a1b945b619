package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// reconcileLocal decides about the local member and carries the decision
// out. It returns how soon the next pass should run.
func (a *Agent) reconcileLocal(ctx context.Context, desired []identity.Member, view membership.View) time.Duration {
	interval := a.cfg.Agent.ReconcileInterval
	rt := a.runtime.Status()
	if rt.Exits != a.seenExits {
		a.seenExits = rt.Exits
		// A member that keeps stopping on its own is restarted with a
		// growing delay; removal is told apart below by the member list.
		a.backOff()
	}
	if rt.MemberID != 0 && a.state.MemberID != membership.IDString(rt.MemberID) {
		a.state.MemberID = membership.IDString(rt.MemberID)
		a.saveState()
	}
	hasData, err := datadir.HasWAL(a.cfg.Etcd.DataDir)
	if err != nil {
		a.logOnce("local", err.Error(), slog.LevelError, "cannot inspect the data dir", "error", err)
		return interval
	}
	localID := a.localMemberID(rt, view)
	a.noteMembership(view, localID, rt.Running)

	d := localmember.Decide(localmember.Inputs{
		Cluster: a.cfg.Cluster.Name, Self: a.self, Desired: desired, InList: contains(desired, a.self),
		Running: rt.Running, HasData: hasData, LocalID: localID,
		KnownClusterID: parseID(a.state.ClusterID), WasMember: a.state.WasMember, View: view,
	})
	a.metrics.LocalDecision.Reset()
	a.metrics.LocalDecision.WithLabelValues(string(d.Kind)).Set(1)
	a.local = d
	a.stale = nil
	if d.Kind != localmember.Keep {
		level := slog.LevelInfo
		if d.Kind == localmember.Refuse {
			level = slog.LevelError
		}
		a.logOnce("local", string(d.Kind)+d.Reason, level, "local member", "decision", string(d.Kind), "reason", d.Reason)
	} else {
		a.logged["local"] = ""
	}

	switch d.Kind {
	case localmember.Keep:
		// Level-triggered: a static pod's manifest is rendered again and
		// rewritten if it was lost or etcdlet's rendering changed.
		spec, _ := SpecFor(a.cfg, a.self, d, a.state)
		a.apply(ctx, spec, false)
	case localmember.Restart, localmember.Bootstrap, localmember.Join:
		// After an exit or a failed start (a port taken, a certificate
		// unreadable), wait out the backoff, whatever is started next. A
		// member stopping because it was removed is no crash: moving its
		// data aside resets the backoff.
		if wait := time.Until(a.restartAfter); wait > 0 {
			a.logOnce("backoff", a.restartAfter.String(), slog.LevelInfo, "delaying the start of the local member after failures",
				"decision", string(d.Kind), "retryIn", wait.Round(time.Millisecond).String())
			return wait
		}
		spec, _ := SpecFor(a.cfg, a.self, d, a.state)
		if d.Kind == localmember.Join {
			a.state.MemberID = membership.IDString(d.JoinID)
		}
		a.state.InitialCluster, a.state.InitialClusterState = spec.InitialCluster, spec.InitialClusterState
		a.saveState()
		a.apply(ctx, spec, true)
		a.settling = 0
		return a.settle()
	case localmember.StopRemoved:
		if err := a.runtime.Stop(ctx); err != nil {
			a.log.Error("stop removed member", "error", err)
			return interval
		}
		return a.moveAside(localID, d.Reason)
	case localmember.MoveAside:
		return a.moveAside(localID, d.Reason)
	case localmember.DeclareStale:
		a.stale = []uint64{d.StaleID}
	case localmember.Wait:
		if view.Reached {
			// Waiting to be added: the writer may add this node any moment,
			// and the learner should start soon after, or promotion waits.
			return a.settle()
		}
		return time.Second
	}
	return interval
}

// apply hands the member's spec to the runtime. starting says the member
// is (re)started now, which is worth a log line; Keep passes are silent.
func (a *Agent) apply(ctx context.Context, spec runtime.Spec, starting bool) {
	if starting {
		if err := os.MkdirAll(filepath.Dir(filepath.Clean(a.cfg.Etcd.DataDir)), 0o700); err != nil {
			a.log.Error("create data dir parent", "error", err)
			return
		}
		a.log.Info("starting local member", "member", spec.Name, "peerURL", spec.AdvertisePeerURL,
			"initialClusterState", spec.InitialClusterState, "initialCluster", spec.InitialCluster)
	}
	if err := a.runtime.Apply(ctx, spec); err != nil {
		a.backOff()
		a.log.Error("run local member", "member", spec.Name, "error", err, "retryIn", time.Until(a.restartAfter).Round(time.Second).String())
		return
	}
	a.applied = true
	if id := a.runtime.Status().MemberID; id != 0 && a.state.MemberID != membership.IDString(id) {
		a.state.MemberID = membership.IDString(id)
		a.saveState()
	}
}

// backOff counts a failed start or an exit of the local member and sets
// the earliest next start: 1s, doubling up to a minute.
func (a *Agent) backOff() {
	a.exits++
	a.restartAfter = time.Now().Add(min(time.Second<<min(a.exits-1, 6), time.Minute))
}

// localMemberID is the local member's ID: what the runtime knows, else what
// was recorded, else (a static pod's etcd, which only the cluster can tell
// about) the member with this node's peer URL whose own endpoint answered
// Status as that member.
func (a *Agent) localMemberID(rt runtime.Status, view membership.View) uint64 {
	if rt.MemberID != 0 {
		return rt.MemberID
	}
	if id := parseID(a.state.MemberID); id != 0 {
		return id
	}
	if !rt.Running {
		return 0
	}
	if m, ok := view.Answering(a.self.PeerURL); ok {
		a.state.MemberID = membership.IDString(m.ID)
		a.saveState()
		return m.ID
	}
	return 0
}

// moveAside moves the data dir aside (never deleting it) and forgets the
// local member ID and start parameters, keeping WasMember: a node that was
// a member never bootstraps a new cluster. It waits while an etcd process
// still holds the data (a static pod the kubelet is still stopping).
func (a *Agent) moveAside(memberID uint64, reason string) time.Duration {
	inUse, err := datadir.InUse(a.cfg.Etcd.DataDir)
	if err != nil {
		a.log.Error("move data dir aside", "dataDir", a.cfg.Etcd.DataDir, "error", err)
		return a.cfg.Agent.ReconcileInterval
	}
	if inUse {
		a.logOnce("local", "in-use", slog.LevelInfo, "waiting for etcd to release the data dir before moving it aside", "dataDir", a.cfg.Etcd.DataDir)
		return a.settle()
	}
	to, err := datadir.MoveAside(a.cfg.Etcd.DataDir, time.Now())
	if err != nil {
		a.log.Error("move data dir aside", "dataDir", a.cfg.Etcd.DataDir, "error", err)
		return a.cfg.Agent.ReconcileInterval
	}
	if to != "" {
		a.metrics.DataDirsMoved.Inc()
		a.log.Warn("moved data dir aside; it is kept, not deleted", "from", a.cfg.Etcd.DataDir, "to", to, "reason", reason)
		a.state.Tombstones = append(a.state.Tombstones, state.Tombstone{Time: time.Now().UTC(), MemberID: membership.IDString(memberID),
			From: a.cfg.Etcd.DataDir, To: to, Reason: reason})
	}
	a.state.MemberID, a.state.InitialCluster, a.state.InitialClusterState = "", "", ""
	// A fresh start: the member's exits so far (its stop on removal among
	// them) are no crash loop and must not delay the rejoin.
	a.exits, a.restartAfter, a.settling = 0, time.Time{}, 0
	a.seenExits = a.runtime.Status().Exits
	a.saveState()
	return 100 * time.Millisecond
}

// noteMembership records that the local member is part of a cluster with
// quorum: from then on this node never bootstraps a new cluster.
func (a *Agent) noteMembership(view membership.View, localID uint64, running bool) {
	if !view.Reached || localID == 0 || !running {
		return
	}
	m, ok := view.Member(localID)
	if !ok || !m.Started() {
		return
	}
	a.exits = 0
	clusterID := membership.IDString(view.ClusterID)
	if !a.state.WasMember || a.state.ClusterID != clusterID {
		a.state.WasMember, a.state.ClusterID = true, clusterID
		a.saveState()
		a.log.Info("local member is part of the cluster", "memberID", membership.IDString(localID), "clusterID", clusterID, "learner", m.IsLearner)
	}
}

func contains(desired []identity.Member, self identity.Member) bool {
	for _, d := range desired {
		if d.IP == self.IP {
			return true
		}
	}
	return false
}

func parseID(hex string) uint64 {
	id, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0
	}
	return id
}
