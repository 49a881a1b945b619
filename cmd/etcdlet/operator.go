package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/state"
)

func newBootstrapCommand() *cobra.Command {
	var (
		path    string
		approve bool
	)
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Show whether the listed nodes may bootstrap a new cluster; --approve one on this node",
		Long: `A node bootstraps a new etcd cluster only when no listed etcd answers and
every listed node's agent confirms that it is fresh (no data, never a
member) and sees the same list. A listed node that does not answer is no
consent: it may be the host of the only member, down or cut off, and a
bootstrap beside it would split the cluster in two. The agents wait and say
so (etcdlet status, the log, etcdlet_bootstrap_waiting_for_consent).

This command shows each listed node's answer, asked on its agent peer
endpoint (agent.peerPort), and what this node's agent would decide.

With --approve it records the operator's approval for the list in force, on
this node (in agent.stateDir/operator.json, read on every pass): this node's
agent then bootstraps without waiting for the nodes that do not answer. Use
it when a listed node cannot answer yet (its agent is not installed) or for
disaster recovery, when every member's data is known to be lost: a node that
was a member answers "fresh" only with an approval, so run --approve on each
node that is to form the new cluster. A node that answers no (it has data,
it is a member of a cluster, it sees another list) still blocks: approval
never bootstraps beside a cluster that answers. --approve is refused while a
listed etcd answers, and while this node holds data (restore it, or move it
aside by hand first).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, inspector, err := openCluster(path)
			if err != nil {
				return err
			}
			defer inspector.Close()
			snap := inspector.Look(cmd.Context())
			switch {
			case !snap.ListOK:
				return fmt.Errorf("no member list in force: %v", snap.ListErr)
			case snap.SelfErr != nil:
				return snap.SelfErr
			}
			own := inspector.Node.OwnAnswer(snap)
			asked := inspector.Node.AskPeers(cmd.Context(), snap)
			out := cmd.OutOrStdout()
			writeAnswers(out, own, asked)
			fmt.Fprintf(out, "\nthis node's decision: %s: %s\n", snap.Decision.Kind, snap.Decision.Reason)
			if !approve {
				return nil
			}
			switch {
			case snap.View.Reached || snap.View.Established:
				return fmt.Errorf("not approved: a listed etcd answers (cluster %x); the nodes join it, nothing is bootstrapped", snap.View.ClusterID)
			case snap.Data.HasData():
				return fmt.Errorf("not approved: this node's data dir %s holds etcd data; restore the member on it, or move it aside by hand, before a new cluster is formed", cfg.Etcd.DataDir)
			}
			own.Approved = true
			if own.Phase == consent.Member {
				own.Phase = consent.Fresh
			}
			if v := consent.Evaluate(own, asked); len(v.Refusing) > 0 {
				return fmt.Errorf("not approved: %s", v.Reason())
			}
			return approveBootstrap(out, cfg, own.List)
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&approve, "approve", false, "approve a bootstrap of the list in force on this node, without waiting for listed nodes that do not answer")
	return cmd
}

func writeAnswers(w io.Writer, own consent.Answer, asked []consent.Asked) {
	fmt.Fprintf(w, "cluster %s, list [%s]\n\n", own.Cluster, strings.Join(own.List, " "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tANSWER\tCONSENTS\tDETAIL")
	ok, why := own.Consents(own)
	fmt.Fprintf(tw, "%s (this node)\t%s\t%s\t%s\n", own.Node, own.Phase, yesNo(ok, why), own.Detail)
	for _, a := range asked {
		if a.Err != nil {
			fmt.Fprintf(tw, "%s\tno answer\tno\t%v\n", a.Node, a.Err)
			continue
		}
		want := own
		want.Node = a.Node.String()
		ok, why := a.Answer.Consents(want)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Node, a.Answer.Phase, yesNo(ok, why), a.Answer.Detail)
	}
	tw.Flush()
}

func yesNo(ok bool, why string) string {
	if ok {
		return "yes"
	}
	return "no: " + why
}

func approveBootstrap(w io.Writer, cfg *config.Config, list []string) error {
	store := state.Store{Dir: cfg.Agent.StateDir}
	op, err := store.LoadOperator()
	if err != nil {
		return err
	}
	op.BootstrapApproval = &state.Approval{List: slices.Clone(list), At: time.Now().UTC()}
	if err := store.SaveOperator(op); err != nil {
		return err
	}
	fmt.Fprintf(w, "\napproved: a bootstrap of [%s] on this node; its agent bootstraps on its next pass unless a listed node answers no. The approval holds for this list only.\n", strings.Join(list, " "))
	return nil
}

func newAckMovesCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "ack-moves",
		Short: "Let a node that moved its data aside too often rejoin",
		Long: `When the data dir was moved aside etcd.moveAsideLimit times within
etcd.moveAsideWindow, the agent stops rejoining the cluster and says so:
something keeps removing this member or destroying its data, and every
rejoin copies the whole keyspace again. Find out what, then run this
command: moves made before now no longer count, and the agent rejoins on
its next pass. The moved-aside data dirs stay where they are (etcdlet never
deletes them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			moved, err := datadir.MovedSince(cfg.Etcd.DataDir, now.Add(-cfg.Etcd.MoveAsideWindow))
			if err != nil {
				return err
			}
			store := state.Store{Dir: cfg.Agent.StateDir}
			op, err := store.LoadOperator()
			if err != nil {
				return err
			}
			op.MovesAcknowledged = now
			if err := store.SaveOperator(op); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "acknowledged %d move(s) aside within the last %s; the agent rejoins on its next pass\n", moved, cfg.Etcd.MoveAsideWindow)
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}
