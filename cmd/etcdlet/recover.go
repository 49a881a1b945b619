package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/nodeaddr"
	"github.com/etcdlet/etcdlet/daemon/restore"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
)

func newRecoverCommand() *cobra.Command {
	var (
		path   string
		reason string
		gone   []string
		yes    bool
		bump   int64
	)
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Recover from lost quorum: a new cluster from the member data that survived here",
		Long: `Recovers a cluster that lost its quorum for good (a majority of its
hosts gone with their data) from the member data that survived on this
node, with every write it holds (/usr/share/doc/etcdlet/operations.md,
"Recover from lost quorum", step by step):

 1. Leave etcdlet running on the other survivors: their agents report what
    their member data holds. etcdlet status lists every node's, the
    furthest log first.
 2. On the first of them: stop etcdlet (systemctl stop etcdlet) and its
    member, then etcdlet recover --gone <IP>,... naming the listed hosts
    that are gone for good. It asks every listed node's agent again and
    refuses while a quorum answers, while a listed node that is not named
    gone does not answer (its log may go further), while another cluster
    answers or is held at a listed node (a recovery ran already: join it),
    and when another node's log goes further than this node's, unless
    --reason says why to lose the writes only that node holds.
 3. Every other node that holds data of the cluster promises, for good
    and before anything changes here, not to start its member of it
    again: its agent stops the member and keeps the data.
 4. It copies the data dir, records its whole log as committed (an entry
    above the commit index this member recorded may have been committed
    and acknowledged by a leader whose notice never reached it: raft keeps
    it when it elects this member, and so does the recovery), starts etcd
    on the copy as a one-member cluster reachable only on 127.0.0.1
    (force-new-cluster), takes a snapshot of it and restores that as
    etcdlet restore does: the revision bumped past the highest any node
    reported by --bump-revision (default 1,000,000,000) and marked
    compacted, the old data dir moved aside (never deleted), the agent
    pinned to the new cluster.
 5. Start etcdlet here. The other survivors' agents see the recovered
    cluster answer here, move their data aside (kept) and join; the agent
    here adds them one at a time, as learners, then voters. Take the hosts
    that are gone off the member list first (or replace them).

A host that is gone for good must never start its member on its old data
again: replace it in the member list, or clear it with etcdlet restore
--rejoin before its etcdlet starts. It asks for confirmation unless --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			settings := restore.SettingsFrom(cfg)
			if done, err := finishInterruptedRestore(cmd, settings, time.Now()); done || err != nil {
				return err
			}
			self, _, err := restore.Self(settings, nodeaddr.Detect)
			if err != nil {
				return err
			}
			inspector, err := daemon.NewInspector(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			snap := inspector.Look(cmd.Context())
			var quorum, foreign []string
			for _, f := range snap.View.Foreign {
				foreign = append(foreign, f.String())
			}
			if snap.View.Reached {
				for _, m := range snap.View.Members {
					if m.InRaft() {
						quorum = append(quorum, m.Name)
					}
				}
			}
			defer inspector.Close()
			reports := inspector.ListedData(cmd.Context(), snap)
			out := cmd.OutOrStdout()
			statusreport.WriteData(out, reports)
			r, err := restore.PrepareRecovery(settings, self, restore.RecoveryRequest{Reports: reports, Quorum: quorum, Foreign: foreign, Gone: gone, Reason: reason, Bump: bump})
			if err != nil {
				return err
			}
			describeRecovery(out, r)
			if !yes && !confirm(cmd, "go ahead?") {
				return fmt.Errorf("not confirmed")
			}
			// Every other survivor promises first, for good, never to
			// start its member of the lost cluster again: with hosts named
			// gone that come back with their data, it could make that
			// cluster's quorum beside the recovered one.
			if refused := inspector.Retire(cmd.Context(), snap, r.Survivors, r.Data.ClusterID, gone); len(refused) > 0 {
				return fmt.Errorf("not every other survivor promised not to start its member again, so nothing was changed here:\n  %s\n"+
					"those that promised keep their members stopped and wait for a recovery from this node: run etcdlet recover here again",
					strings.Join(refused, "\n  "))
			}
			if len(r.Survivors) > 0 {
				fmt.Fprintf(out, "%s promised not to start their members of cluster %s again; they join the recovered cluster once it runs here\n",
					strings.Join(r.Survivors, ", "), r.Data.ClusterID)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			moved, revision, kept, err := restore.RunRecovery(cmd.Context(), settings, r, log, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "recovered at revision %d with %d log entries above the recorded commit index; the old data dir is at %s (kept).\n"+
				"Start etcdlet here: the other survivors' agents move their data aside (kept) and join as learners, one at a time.\n",
				revision, kept, orNothing(moved))
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringSliceVar(&gone, "gone", nil, "listed nodes (IPs) gone for good with their data: without it, a listed node whose agent does not answer is waited for")
	cmd.Flags().StringVar(&reason, "reason", "", "recover from this node's data although another node's log goes further, and why (the writes only that node holds are lost)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().Int64Var(&bump, "bump-revision", restore.DefaultBump, "start the recovered cluster this far past the highest revision any node reported, marked compacted, so that watching clients never see it go backwards; 0: keep this node's revision")
	return cmd
}

// describeRecovery says what the recovery will do, before it asks.
func describeRecovery(w io.Writer, r restore.Recovery) {
	d := r.Data
	fmt.Fprintf(w, "\nrecover from this node's member data (%s, member %s of cluster %s): log end %d/%d, commit %d, revision %d\n",
		d.Node, d.MemberID, d.ClusterID, d.LastTerm, d.LastIndex, d.Commit, d.Revision)
	if n := r.AboveCommit(); n > 0 {
		fmt.Fprintf(w, "  %d log entries above the recorded commit index are kept: a leader may have committed them, and acknowledged them, without this member hearing of it\n", n)
	}
	for _, a := range r.Ahead {
		fmt.Fprintf(w, "  %s holds a further log (%d/%d, revision %d): its writes beyond this node's are lost (reason: %s)\n", a.Node, a.LastTerm, a.LastIndex, a.Revision, r.Reason)
	}
	for _, g := range r.Gone {
		fmt.Fprintf(w, "  %s is gone for good (--gone): should it come back with its data, clear it (etcdlet restore --rejoin) before its etcdlet starts\n", g.Node)
	}
	if r.Bump > 0 {
		fmt.Fprintf(w, "  the new cluster starts at revision %d or later (the highest any node reported, %d, plus %d), marked compacted: clients that watched list again\n",
			r.Revision(), r.Highest, r.Bump)
	} else {
		fmt.Fprintln(w, "  not bumped (--bump-revision 0): a client that watched the lost cluster may see revisions go backwards")
	}
	fmt.Fprintf(w, "  into %s as %s (%s), the only member of a new cluster; the old data dir is moved aside, not deleted\n", r.DataDir, r.Self.Name, r.Self.PeerURL)
}
