package node

import (
	"fmt"
	"log/slog"

	"github.com/etcdlet/etcdlet/daemon/localmember"
)

// walReserve is the space etcd takes for the first file of a new
// member's write-ahead log, which it preallocates whole
// (wal.SegmentSizeBytes, 64 MB).
const walReserve = 64 * 1000 * 1000

// joinSpaceProblem says that the data dir's filesystem cannot take what a
// joining member receives: the leader's backend, copied whole, and its
// first write-ahead log file. A learner that runs out of space on the
// copy fails it and asks again, every second, while the agents see no
// more than a learner catching up (etcd logs "failed to save incoming
// database snapshot" on that host only), until it expires unpromoted.
// Refusing instead names the shortfall where the operator looks, and no
// writer adds a learner for the node until the space is there. Only a
// node without member data, about to join a cluster that answers, is
// looked at; an unknown size or free space blocks nothing.
func (n *Node) joinSpaceProblem(s *Snapshot, inList bool) localmember.Problem {
	if !inList || s.Data.HasData() || !s.View.Reached {
		return localmember.Problem{}
	}
	backend := int64(0)
	for _, m := range s.View.Members {
		backend = max(backend, m.Health.DBSize)
	}
	if l, ok := s.View.Member(s.View.LeaderID); ok && l.Health.DBSize > 0 {
		backend = l.Health.DBSize // the leader sends the copy
	}
	if backend <= 0 {
		return localmember.Problem{}
	}
	free, err := n.DataDir.FreeBytes()
	if err != nil {
		n.logOnce("freeSpace", err.Error(), slog.LevelWarn, "cannot tell the free space of the data dir's filesystem", "error", err)
		return localmember.Problem{}
	}
	need := uint64(backend) + walReserve
	if free >= need {
		return localmember.Problem{}
	}
	return localmember.Problem{Refusal: localmember.RefuseDiskSpace,
		Reason: fmt.Sprintf("the filesystem of the data dir %s has %s free, and a joining member needs %s: a copy of the leader's backend (%s) and its first write-ahead log file (%s); not joining until there is room (free space there, or give etcd.dataDir a larger disk)",
			n.Settings.DataDir, bytesText(free), bytesText(need), bytesText(uint64(backend)), bytesText(walReserve))}
}

// bytesText renders a size in MiB, or GiB from 10 GiB on.
func bytesText(b uint64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
