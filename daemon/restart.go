package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/memberrestart"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// restartMember runs in the agent's loop between two passes, so that no
// pass races it. It looks at the cluster afresh and answers whether the
// member is caught up (memberrestart.CaughtUp), or may restart
// (memberrestart.Allowed), or restarts it: it stops the member through the
// runtime and waits until it let go of its data dir. The pass that
// follows at once finds the member stopped on its data and starts it
// again with the spec in force (decision restart), exactly as after a
// crash: the same spec after a renewal, the new one after a change the
// node held.
func (a *Agent) restartMember(ctx context.Context, req memberrestart.Request) {
	snap := a.node.Look(ctx)
	if req.Ask == memberrestart.AskCaughtUp {
		req.Answer(memberrestart.CaughtUp(snap))
		return
	}
	id, err := memberrestart.Allowed(snap)
	if err != nil || req.Ask == memberrestart.AskAllowed {
		req.Answer(id, err)
		return
	}
	log := a.log.With("memberID", membership.IDString(id))
	log.Info("restarting the local member ("+memberrestart.TaskType+" task)", "reason", req.Reason)
	if err := a.runtime.Stop(ctx); err != nil {
		req.Answer(id, fmt.Errorf("stop the local member: %w", err))
		return
	}
	err = a.waitReleased(ctx)
	if err != nil {
		log.Error("the local member did not stop in time; starting it again all the same", "error", err)
	}
	a.node.Progress()
	req.Answer(id, err)
}

// waitReleased waits until no etcd holds the data dir, keeping the
// systemd watchdog fed meanwhile: the loop is busy, not stuck.
func (a *Agent) waitReleased(ctx context.Context) error {
	deadline := time.Now().Add(memberrestart.ReleaseTimeout)
	for {
		inUse, err := datadir.InUse(a.cfg.Etcd.DataDir)
		switch {
		case err != nil:
			return err
		case !inUse:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("etcd still holds %s %s after the stop", a.cfg.Etcd.DataDir, memberrestart.ReleaseTimeout)
		}
		a.beat.progressed(time.Now())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
