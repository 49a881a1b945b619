package restore

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// Recovery is what a recovery from this node's member data will do: a
// new cluster from the data that survived here, when no snapshot holds
// the writes since the last one.
type Recovery struct {
	Self identity.Member
	// Data is this node's member data.
	Data consent.DataReport
	// Ahead are the nodes whose data goes further than this node's: only
	// with Reason does the recovery go on without the writes only they
	// hold.
	Ahead  []consent.DataReport
	Reason string
	// Gone are the listed nodes the operator named gone for good.
	Gone []consent.DataReport
	// Survivors are the other nodes that hold data of the cluster: each
	// must promise not to start its member again (consent.RetireRequest)
	// before the recovery starts.
	Survivors []string
	// Highest is the highest revision any node of the cluster reported.
	Highest int64
	DataDir string
	Bump    int64
}

// AboveCommit is how many entries of this node's log are above the commit
// index it recorded: the recovery keeps them (datadir.CommitLog).
func (r Recovery) AboveCommit() uint64 {
	if r.Data.LastIndex > r.Data.Commit {
		return r.Data.LastIndex - r.Data.Commit
	}
	return 0
}

// RecoveryRequest is what the operator asks of a recovery and what the
// listed nodes said.
type RecoveryRequest struct {
	// Reports are every listed node's data (Inspector.ListedData); Quorum
	// names the members that answer with quorum, if any.
	Reports []consent.DataReport
	Quorum  []string
	// Foreign describe the members of other clusters that answer at
	// listed addresses (membership.Foreign).
	Foreign []string
	// Gone are the listed nodes the operator says are gone for good: a
	// node that does not answer is waited for unless it is named here.
	Gone []string
	// Reason says why to recover here although another node's log goes
	// further.
	Reason string
	Bump   int64
}

// PrepareRecovery checks that a recovery may run on this node and what it
// starts from. It refuses while a quorum answers, while this node's data
// dir is in use or holds no member data, while a listed node that is not
// named gone does not answer (its log may go further), when a node named
// gone answers, while another cluster answers or is held at a listed node
// (a recovery that ran already: a second would start a third cluster),
// and, without a reason, when another node's log goes further than this
// node's.
func PrepareRecovery(s Settings, self identity.Member, req RecoveryRequest) (Recovery, error) {
	if req.Bump < 0 {
		return Recovery{}, fmt.Errorf("--bump-revision %d: must be 0 or more", req.Bump)
	}
	if len(req.Quorum) > 0 {
		return Recovery{}, fmt.Errorf("a cluster answers with quorum (%s): it needs no recovery, and one now would split it in two", strings.Join(req.Quorum, ", "))
	}
	if len(req.Foreign) > 0 {
		return Recovery{}, fmt.Errorf("another cluster answers at listed addresses (%s): if a recovery or restore already ran there, this node joins it "+
			"(etcdlet restore --rejoin) instead of starting a third", strings.Join(req.Foreign, "; "))
	}
	goneNodes := make([]string, 0, len(req.Gone))
	for _, g := range req.Gone {
		ip, err := netip.ParseAddr(strings.TrimSpace(g))
		if err != nil {
			return Recovery{}, fmt.Errorf("--gone %q: not an IP address", g)
		}
		if !slices.ContainsFunc(req.Reports, func(d consent.DataReport) bool { return d.Node == ip.String() }) {
			return Recovery{}, fmt.Errorf("--gone %s: not a node of the member list in force", ip)
		}
		goneNodes = append(goneNodes, ip.String())
	}
	r := Recovery{Self: self, Reason: strings.TrimSpace(req.Reason), DataDir: s.DataDir, Bump: req.Bump}
	i := slices.IndexFunc(req.Reports, func(d consent.DataReport) bool { return d.Node == self.IP.String() })
	if i < 0 {
		return Recovery{}, fmt.Errorf("this node (%s) is not in the member list in force: recover on a listed node", self.IP)
	}
	r.Data = req.Reports[i]
	switch {
	case r.Data.Error != "":
		return Recovery{}, fmt.Errorf("the member data in %s cannot be read: %s", s.DataDir, r.Data.Error)
	case !r.Data.HasData():
		return Recovery{}, fmt.Errorf("%s holds no member data: recover on a node that does (etcdlet status lists them), or restore a snapshot (etcdlet restore)", s.DataDir)
	case slices.Contains(goneNodes, r.Data.Node):
		return Recovery{}, fmt.Errorf("--gone %s names this node", r.Data.Node)
	case r.Data.RetiredFor != "" && !slices.Contains(goneNodes, r.Data.RetiredFor):
		return Recovery{}, fmt.Errorf("this node promised %s not to start its member of cluster %s again: %[1]s recovers the cluster from its data; start etcdlet there, "+
			"or, if %[1]s is gone for good, name it: --gone %[1]s", r.Data.RetiredFor, r.Data.ClusterID)
	}
	var silent []string
	for _, d := range req.Reports {
		gone := slices.Contains(goneNodes, d.Node)
		switch {
		case d.Node == r.Data.Node:
		case gone && d.Error == "":
			return Recovery{}, fmt.Errorf("--gone %s: its agent answers (%s): that node is not gone; leave it running, it reports its data", d.Node, describeData(d))
		case gone:
			r.Gone = append(r.Gone, d)
		case d.Error != "":
			silent = append(silent, d.Node)
		case !d.HasData():
			// No data at all: a fresh or cleared node, nothing to lose.
		case d.ClusterID != r.Data.ClusterID:
			return Recovery{}, fmt.Errorf("%s holds data of cluster %s, not of this node's %s: if a recovery or restore already ran there, "+
				"this node joins it (etcdlet restore --rejoin) instead of starting another", d.Node, d.ClusterID, r.Data.ClusterID)
		case d.RetiredFor != "" && d.RetiredFor != r.Data.Node && !slices.Contains(goneNodes, d.RetiredFor):
			return Recovery{}, fmt.Errorf("%s promised %s not to start its member again: a recovery runs on %[2]s; start etcdlet there, "+
				"or, if %[2]s is gone for good, name it: --gone %[2]s", d.Node, d.RetiredFor)
		default:
			r.Survivors = append(r.Survivors, d.Node)
			r.Highest = max(r.Highest, d.Revision)
			if d.Ahead(r.Data) {
				r.Ahead = append(r.Ahead, d)
			}
		}
	}
	r.Highest = max(r.Highest, r.Data.Revision)
	if len(silent) > 0 {
		return Recovery{}, fmt.Errorf("not heard from %s: its log may go further than this node's; start its etcdlet so that it reports its data, "+
			"or, if that host is gone for good with its data, name it: --gone %s", strings.Join(silent, ", "), strings.Join(silent, ","))
	}
	if len(r.Ahead) > 0 && r.Reason == "" {
		best := r.Ahead[0]
		return r, fmt.Errorf("%s holds a further log (%s; this node %s): run etcdlet recover there; "+
			"to recover from this node's data all the same, losing the writes only the further nodes hold, say why with --reason",
			best.Node, describeData(best), describeData(r.Data))
	}
	// Last: what would refuse the recovery on this node whatever runs
	// is said first, rather than "stop the agent" for a recovery that
	// must not run here at all.
	if err := checkNotInUse(s); err != nil {
		return Recovery{}, err
	}
	return r, nil
}

func describeData(d consent.DataReport) string {
	if d.RevisionUnknown {
		return fmt.Sprintf("log end %d/%d, revision unknown", d.LastTerm, d.LastIndex)
	}
	return fmt.Sprintf("log end %d/%d, revision %d", d.LastTerm, d.LastIndex, d.Revision)
}

// Revision is the revision the recovered cluster starts at, at least:
// past the highest any node reported by the bump. The recovered data may
// hold a few more revisions than this node's backend had applied.
func (r Recovery) Revision() int64 {
	if r.Bump == 0 {
		return r.Data.Revision
	}
	return r.Highest + r.Bump
}

// RunRecovery recovers the cluster from this node's member data: the data
// dir is copied, its whole log recorded as committed (datadir.CommitLog),
// etcd forced to a one-member cluster on the copy, reachable only on
// 127.0.0.1, and a snapshot of it taken; that snapshot is restored as a
// restore does (Run), bumped past the highest revision any node reported
// and marked compacted, the old data dir moved aside and the agent pinned
// to the new cluster. The member's own data dir is not touched before the
// recovered one is complete; a crash at any step leaves it in place, or
// moved aside with the recovered one in its place, and a repeated run
// starts again from the copy. It returns where the old data dir went, the
// recovered revision, the bump included, and how many log entries above
// the recorded commit index were kept.
func RunRecovery(ctx context.Context, s Settings, r Recovery, log *slog.Logger, now time.Time) (moved string, revision int64, kept uint64, err error) {
	work := filepath.Clean(r.DataDir) + ".etcdlet-recover"
	if err := os.RemoveAll(work); err != nil { // only ever a recovery's own work dir
		return "", 0, 0, fmt.Errorf("remove the work dir %s of an earlier recovery: %w", work, err)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", 0, 0, err
	}
	defer os.RemoveAll(work)
	copied := filepath.Join(work, "data")
	if err := datadir.Copy(r.DataDir, copied); err != nil {
		return "", 0, 0, err
	}
	if kept, err = datadir.CommitLog(copied); err != nil {
		return "", 0, 0, err
	}
	store, err := snapshot.NewLocalStore(filepath.Join(work, "snapshots"), "")
	if err != nil {
		return "", 0, 0, err
	}
	full, err := snapshot.TakeForced(ctx, copied, r.Self.Name, store, log)
	if err != nil {
		return "", 0, 0, err
	}
	log.Info("took a snapshot of the survivor's data as a one-member cluster", "revision", full.LastRevision, "keptAboveCommit", kept)
	bump := int64(0)
	if r.Bump > 0 {
		// Past the highest revision any node reported, by the bump: what
		// a watch saw anywhere is below the recovered revision.
		bump = r.Bump + max(0, r.Highest-full.LastRevision)
	}
	if full.LastRevision < r.Data.Revision {
		return "", 0, kept, fmt.Errorf("etcd on the copy of the survivor's data is at revision %d, before the %d its backend held: nothing was changed", full.LastRevision, r.Data.Revision)
	}
	moved, revision, err = Run(ctx, s, store, Plan{Self: r.Self, Full: full, DataDir: r.DataDir, Bump: bump, Kind: state.RecoveredFromData}, log, now)
	return moved, revision, kept, err
}
