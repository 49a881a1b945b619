package node

import (
	"fmt"
	"log/slog"

	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// HeldChange is a change that restarts the local member.
type HeldChange struct {
	// Reason says what changes, for the task and the log: "etcd 3.6 to
	// 3.7", or "its manifest".
	Reason string
	// Version is the etcd minor the member runs after a version change;
	// zero for other changes.
	Version etcdversion.Minor
}

// versionProblem says why the local member must not start with the etcd
// version it would run: the cluster version its data recorded, or else
// the lowest server version of the cluster's members (a join), is above
// that version or more than one minor below it (etcd itself would stop
// the member at once, and say less); or it would be the first of a minor
// upgrade beside members of the older minor below that minor's patch
// floor (etcd would start it, and the upgrade could strand the cluster).
func (n *Node) versionProblem(s *Snapshot) localmember.Problem {
	server := n.Settings.EtcdVersion
	if server.IsZero() || s.Runtime.Running {
		return localmember.Problem{}
	}
	cluster, from := etcdversion.Minor{}, ""
	if s.Data.WAL {
		v, err := n.DataDir.ClusterVersion()
		if err != nil {
			n.logOnce("version", err.Error(), slog.LevelWarn, "cannot read the cluster version of the data dir", "error", err)
		}
		cluster, _ = etcdversion.ParseRecorded(v)
		from = "the cluster version its data records"
	} else if s.View.Reached {
		cluster, from = clusterVersion(s.View)
	}
	if err := etcdversion.CheckMember(server, cluster); err != nil {
		return localmember.Problem{Refusal: localmember.RefuseEtcdVersion, Reason: fmt.Sprintf("not starting the local member (%s is %s): %v", from, cluster, err)}
	}
	if s.View.Reached {
		if err := etcdversion.CheckPatchFloor(server, runningVersions(s.View)); err != nil {
			return localmember.Problem{Refusal: localmember.RefuseEtcdVersion, Reason: "not starting the local member: " + err.Error()}
		}
	}
	return localmember.Problem{}
}

// versionChangeProblem says why a running member must not be restarted
// on the etcd version the configuration now names (a new staticPod.image):
// the same rules as for a start (versionProblem), against the running
// cluster, since etcd itself would stop the new member at once, or, below
// a patch floor, start it into a known bug. Until the rules allow the
// change it waits, and the member keeps running what it runs: refused,
// the static pod's manifest stays as it is.
func (n *Node) versionChangeProblem(s *Snapshot) localmember.Problem {
	want, runs := n.Settings.EtcdVersion, s.Runtime.Version
	if !s.Runtime.Running || want.IsZero() || runs.IsZero() || want == runs {
		return localmember.Problem{}
	}
	keeping := fmt.Sprintf("keeping the local member on etcd %s, not restarting it on %s", runs, want)
	if !s.View.Reached {
		return localmember.Problem{Refusal: localmember.RefuseEtcdVersion,
			Reason: keeping + ": the cluster does not answer with quorum, so its members' versions cannot be checked"}
	}
	cluster, from := clusterVersion(s.View)
	if err := etcdversion.CheckMember(want, cluster); err != nil {
		return localmember.Problem{Refusal: localmember.RefuseEtcdVersion, Reason: fmt.Sprintf("%s (%s is %s): %v", keeping, from, cluster, err)}
	}
	if err := etcdversion.CheckPatchFloor(want, runningVersions(s.View)); err != nil {
		return localmember.Problem{Refusal: localmember.RefuseEtcdVersion, Reason: keeping + ": " + err.Error()}
	}
	if voters, _ := s.View.Voters(); voters == 2 && !n.twoNode(*s) {
		// The restart costs the quorum of two voters for as long as it
		// takes; only pacemaker's fencing (a two-node cluster) keeps the
		// other from being taken for lost meanwhile.
		return localmember.Problem{Refusal: localmember.RefuseEtcdVersion,
			Reason: keeping + ": the cluster has two voters, which lose their quorum while one restarts, and pacemaker does not fence this pair (pacemaker.enabled with these two listed nodes); add a third member first, or take the manifest over (the annotation etcdlet.io/disable-protection) and change it by hand"}
	}
	if want.Less(runs) {
		// A downgrade: etcd lowers each member's storage version to the
		// target (seconds after the downgrade is enabled); the older etcd
		// does not start on data of a later storage version.
		self, ok := s.View.WithPeerURL(s.Self.PeerURL)
		if !ok {
			return localmember.Problem{Refusal: localmember.RefuseEtcdVersion, Reason: keeping + ": the cluster has no member with this node's peer URL " + s.Self.PeerURL}
		}
		if storage, ok := etcdversion.Parse(self.Health.StorageVersion); !ok || want.Less(storage) {
			return localmember.Problem{Refusal: localmember.RefuseEtcdVersion,
				Reason: fmt.Sprintf("%s: its data's storage version is %q, and etcd %s starts only on data that etcd lowered to %s, as it does within seconds of the downgrade being enabled",
					keeping, self.Health.StorageVersion, want, want)}
		}
	}
	return localmember.Problem{}
}

// heldChange says whether the spec the running member keeps differs from
// what runs in a way that restarts it (a new staticPod.image, other flags,
// another rendering after an etcdlet upgrade), and the change must wait
// for a member-restart task: the configuration or the package reaches
// every host at about the same time, and every member restarting at once
// would stop the cluster. The task restarts one member at a time, only
// while the others keep quorum, and for a version change takes a snapshot
// first and waits until the member is back as a caught-up voter of the
// new version. A member that does not serve (it crash-loops, or the
// cluster has no quorum) has nothing to lose and takes the change at
// once; so does a cluster of one or two voters, where no restart keeps
// quorum (a version change there is refused or fenced by pacemaker:
// versionChangeProblem).
func (n *Node) heldChange(s *Snapshot) *HeldChange {
	r, ok := n.Runtime.(runtime.Restarting)
	if !ok || s.Decision.Kind != localmember.Keep {
		return nil
	}
	spec, _ := SpecFor(n.Settings.Member, s.Self, s.Decision, n.state)
	if restarts, err := r.WouldRestart(spec); err != nil || !restarts {
		// An error is the Apply's to report.
		return nil
	}
	v := s.View
	self, ok := v.WithPeerURL(s.Self.PeerURL)
	if voters, _ := v.Voters(); !v.Reached || !ok || !self.InRaft() || voters < 3 {
		return nil
	}
	h := &HeldChange{Reason: "its manifest"}
	if want, runs := n.Settings.EtcdVersion, s.Runtime.Version; !want.IsZero() && !runs.IsZero() && want != runs {
		h.Reason, h.Version = fmt.Sprintf("etcd %s to %s", runs, want), want
	}
	return h
}

// runningVersions are the server versions the cluster's members run,
// for the patch floors.
func runningVersions(v membership.View) []etcdversion.RunningVersion {
	running := make([]etcdversion.RunningVersion, 0, len(v.Members))
	for _, m := range v.Members {
		running = append(running, etcdversion.RunningVersion{Member: m.Name, Version: m.Health.Version})
	}
	return running
}

// clusterVersion is the version a running cluster holds its members to:
// the target of a downgrade enabled in it (etcd lowers the cluster
// version to it at once), else the lowest server version of its members.
func clusterVersion(v membership.View) (etcdversion.Minor, string) {
	for _, m := range v.Members {
		if target, ok := etcdversion.Parse(m.Health.DowngradeTarget); ok {
			return target, "the target of the downgrade enabled in the cluster"
		}
	}
	var versions []string
	for _, m := range v.Members {
		versions = append(versions, m.Health.Version)
	}
	lowest, _ := etcdversion.Lowest(versions...)
	return lowest, "the lowest etcd version of the cluster's members"
}
