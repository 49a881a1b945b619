package main

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/nodeaddr"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/restore"
	"github.com/etcdlet/etcdlet/daemon/tasks"
)

func newRestoreCommand() *cobra.Command {
	var (
		path     string
		snapshot string
		rejoin   bool
		force    bool
		yes      bool
		bump     int64
	)
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Recover from lost quorum: a new cluster from a snapshot here, the other nodes rejoin",
		Long: `The operator's recovery path after the cluster lost quorum for good
(/usr/share/doc/etcdlet/operations.md, "Recover from lost quorum", step by step):

 1. Stop etcdlet on the node to restore on (systemctl stop etcdlet), and
    its member. Leave it running on the other nodes that still run.
 2. There: etcdlet restore. Every other listed node whose agent answers
    and holds member data first promises, as for etcdlet recover, not to
    start its member of that cluster again: its agent stops the member and
    keeps the data, and once the restored cluster answers here it moves the
    data aside and joins on its own. Should a node whose agent answers
    refuse (it promised another node that recovers), nothing is changed.
    Then it restores the newest full snapshot of backup.store and the
    deltas after it (or the chain ending at --snapshot) into a new data dir
    as the single member of a new cluster, moves the old data dir aside
    (<dataDir>.etcdlet-moved-<time>, never deleted), and pins the agent to
    the new cluster.
 3. On every other node whose agent did not answer (the command names
    them): etcdlet restore --rejoin before its etcdlet starts. It moves the
    data dir aside and makes the agent forget the old cluster, so it joins
    the restored one as a new member.
 4. Start etcdlet on the restored node, then on those others: the agent of
    the restored node adds the nodes one by one (learner, then voter).

The restored revision never goes backwards for a client: it is the
snapshots' revision plus --bump-revision (default 1,000,000,000, as etcd's
disaster-recovery guide advises), marked compacted. A client that watched
the lost cluster (the Kubernetes API server's watch cache, every informer)
resumes its watch with a compaction error and lists again, instead of
waiting for revisions it already saw or missing the writes made between
the last snapshot and the loss. --bump-revision 0 keeps the snapshots'
revision, for a cluster no client watched.

A restore refuses while the data dir is in use, and while a cluster
answers with quorum on the listed addresses (restoring then would split a
healthy cluster in two); --force skips the second check. It asks for
confirmation unless --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			now := time.Now()
			settings := restore.SettingsFrom(cfg)
			if done, err := finishInterruptedRestore(cmd, settings, now); done || err != nil {
				return err
			}
			if rejoin {
				if !yes && !confirm(cmd, fmt.Sprintf("move %s aside and make this node join the restored cluster as a new member?", cfg.Etcd.DataDir)) {
					return fmt.Errorf("not confirmed")
				}
				moved, err := restore.Rejoin(settings, now)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "data dir moved aside to %s (kept); start etcdlet: this node joins the restored cluster once the restored node's agent adds it\n", orNothing(moved))
				return nil
			}
			store, err := tasks.OpenSnapshotStore(cmd.Context(), cfg.Backup.Store, true)
			if err != nil {
				return err
			}
			if store == nil {
				return fmt.Errorf("backup.store: no snapshot store is configured in %s", path)
			}
			self, list, err := restore.Self(settings, nodeaddr.Detect)
			if err != nil {
				return err
			}
			pool, err := etcdclient.NewPool(cfg.ClientTLS(), cfg.Agent.CallTimeout)
			if err != nil {
				return err
			}
			defer pool.Close()
			listed := membership.ClientURLs(settings.Scheme.ForAll(list))
			sv := ops.Surveyor{Etcd: pool, CallTimeout: cfg.Agent.CallTimeout, Endpoints: func() []string { return listed }}
			plan, err := restore.Prepare(cmd.Context(), settings, store, self, sv, snapshot, bump, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "restore from %s:\n  full  %s (revision %d, %s)\n", store, plan.Full.SnapName, plan.Full.LastRevision, plan.Full.CreatedOn.Local().Format(time.DateTime))
			for _, d := range plan.Deltas {
				fmt.Fprintf(out, "  delta %s (revisions %d-%d)\n", d.SnapName, d.StartRevision, d.LastRevision)
			}
			fmt.Fprintf(out, "into %s as %s (%s), the single member of a new cluster at revision %d\n", plan.DataDir, self.Name, self.PeerURL, plan.Revision())
			if plan.Bump > 0 {
				fmt.Fprintf(out, "  bumped by %d to %d and marked compacted: clients that watched the lost cluster list again\n", plan.Bump, plan.Revision()+plan.Bump)
			} else {
				fmt.Fprintln(out, "  not bumped (--bump-revision 0): a client that watched the lost cluster may see revisions go backwards")
			}
			if !yes && !confirm(cmd, "go ahead?") {
				return fmt.Errorf("not confirmed")
			}
			silent, promised, err := promiseRestore(cmd, cfg, force)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			moved, revision, err := restore.Run(cmd.Context(), settings, store, plan, log, now)
			if err != nil && promised {
				return fmt.Errorf("%w\nthe nodes that promised keep their members stopped and wait for a restore from this node: run etcdlet restore here again", err)
			} else if err != nil {
				return err
			}
			fmt.Fprintf(out, "restored at revision %d; the old data dir is at %s (kept). Start etcdlet here first.\n", revision, orNothing(moved))
			if len(silent) > 0 {
				fmt.Fprintf(out, "Run 'etcdlet restore --rejoin' on %s before its etcdlet starts: its agent did not answer, so it promised nothing.\n", strings.Join(silent, ", "))
			}
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "restore up to this snapshot (its name, e.g. Incr-00000043-00000050-1764000100.gz); default the newest")
	cmd.Flags().BoolVar(&rejoin, "rejoin", false, "on the other nodes: move the data dir aside and forget the old cluster, to join the restored one")
	cmd.Flags().BoolVar(&force, "force", false, "restore even though a cluster answers with quorum on the listed addresses")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().Int64Var(&bump, "bump-revision", restore.DefaultBump, "add this to the restored revision and mark it compacted, so that watching clients never see it go backwards; 0: keep the snapshots' revision")
	return cmd
}

// promiseRestore asks every other listed node whose agent answers and
// that holds member data to promise, as etcdlet recover does, not to
// start its member of that cluster again, for this node restores it: its
// agent stops the member and keeps the data until the restored cluster
// answers here, then moves it aside and joins. Started beside the
// restored cluster, its old member could make the lost cluster's quorum
// with other hosts that come back: two clusters. A refusal from a node
// that answers (it promised another node that recovers) stops the
// restore before anything changed; with force (a cluster answers with
// quorum, and the operator restores all the same) its nodes refuse, and
// are cleared by hand like those whose agents do not answer. It returns
// the nodes to clear by hand, and whether any node promised.
func promiseRestore(cmd *cobra.Command, cfg *config.Config, force bool) (silent []string, promisedAny bool, err error) {
	inspector, err := daemon.NewInspector(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, false, err
	}
	defer inspector.Close()
	snap := inspector.Look(cmd.Context())
	byCluster := map[string][]string{}
	for _, d := range inspector.ListedData(cmd.Context(), snap) {
		switch {
		case d.Node == snap.Self.IP.String():
		case d.Error != "":
			silent = append(silent, d.Node)
		case d.HasData():
			byCluster[d.ClusterID] = append(byCluster[d.ClusterID], d.Node)
		}
	}
	var refused, refusedNodes, promised []string
	for _, cluster := range slices.Sorted(maps.Keys(byCluster)) {
		nodes := byCluster[cluster]
		r := inspector.Retire(cmd.Context(), snap, nodes, cluster, nil)
		refused = append(refused, r...)
		for _, n := range nodes {
			// Each refusal begins with the node's address and a colon.
			if slices.ContainsFunc(r, func(why string) bool { return strings.HasPrefix(why, n+": ") }) {
				refusedNodes = append(refusedNodes, n)
			} else {
				promised = append(promised, fmt.Sprintf("%s (cluster %s)", n, cluster))
			}
		}
	}
	out := cmd.OutOrStdout()
	if len(refused) > 0 && !force {
		return nil, false, fmt.Errorf("not every listed node that answers promised not to start its member again, so nothing was changed here:\n  %s",
			strings.Join(refused, "\n  "))
	}
	for _, r := range refused {
		fmt.Fprintf(out, "no promise (--force): %s\n", r)
	}
	silent = append(silent, refusedNodes...)
	if len(promised) > 0 {
		fmt.Fprintf(out, "%s promised not to start their members again; they join the restored cluster once it runs here\n", strings.Join(promised, ", "))
	}
	return silent, len(promised) > 0, nil
}

// finishInterruptedRestore finishes a restore or a recovery that a crash
// interrupted once its data dir was complete (restore.ResumeRestored),
// and says so; done is true when it did: the command asked for then does
// nothing more, and the operator looks again.
func finishInterruptedRestore(cmd *cobra.Command, s restore.Settings, now time.Time) (done bool, err error) {
	resumed, moved, err := restore.ResumeRestored(s, now)
	if err != nil {
		return false, fmt.Errorf("finish the restore that was interrupted: %w", err)
	}
	if resumed {
		old := moved
		if old == "" {
			old = s.DataDir + ".etcdlet-moved-<time> if it had data (moved aside before the interruption)"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "finished a restore (or recovery) that was interrupted: the restored data dir is in place at %s, the old one at %s (kept), and the agent is pinned to the restored cluster; nothing else was done: start etcdlet here, or run the command again\n",
			s.DataDir, old)
	}
	return resumed, nil
}

func orNothing(moved string) string {
	if moved == "" {
		return "(nothing: the data dir was empty)"
	}
	return moved
}

func confirm(cmd *cobra.Command, question string) bool {
	fmt.Fprintf(cmd.OutOrStdout(), "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(cmd.InOrStdin(), &answer)
	return answer == "y" || answer == "yes"
}
