package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/manual"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
)

const memberHelpCommon = `
The command reads the agent's configuration (--config): the member list in
force, node.address, agent.etcdClientTLS (or etcd.tls.client) and
agent.callTimeout. TARGET is a member's name (etcd-main-192.0.2.4), its ID
in hex as etcd prints it, or its IP.

It checks its rules on the cluster as it is now, then takes the agents'
writer lock (the one every etcdlet takes for a membership change, so the
change never races an agent's), looks again under the lock, checks again,
and only then acts. A refused change exits 1 naming the rule.`

func newMemberCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "List etcd members, and remove, evict or hand leadership over without costing quorum",
		Long: `Operator commands on the etcd cluster's membership, next to the agents that
keep it equal to the member list. To add or remove a node for good, edit
the member list (with members.source cluster: etcdlet members add|remove):
the agents do the rest (/usr/share/doc/etcdlet/operations.md). These
commands are for what the list cannot say: a member that must go now, a
stuck learner, leadership on a chosen node.`,
	}
	cmd.AddCommand(newMemberListCommand(), newMemberRemoveCommand(), newMemberEvictCommand(), newMemberMoveLeaderCommand())
	return cmd
}

func newMemberListCommand() *cobra.Command {
	var path, output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show every etcd member: ID, name, URLs, role, health, and whether it is listed",
		Long: `Show every member of the etcd cluster: ID, name, peer and client URLs,
role (leader, voter or learner), health as the member's own Status says
(unhealthy: why), its etcd version (with its data's storage version when
that is of another minor: an upgrade or a downgrade under way), and IN
LIST: yes (its IP is in the member list in force), no (the agents will
remove it), conflict, or unknown (no valid list is in force).

The cluster is asked through the member list in force, node.address and
the agent's last applied list, with the agent's client TLS. Without quorum
the members come from one member's own (serializable) view and their health
is unknown; the command then exits 3, and 4 when no member answered (the
exit codes of etcdlet status).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: must be table or json", output)
			}
			cfg, in, err := openCluster(path)
			if err != nil {
				return err
			}
			defer in.Close()
			report := statusreport.FromSnapshot(cfg.Cluster.Name, in.Look(cmd.Context()))
			rows := slices.DeleteFunc(report.Members, func(r statusreport.Row) bool { return r.MemberID == "" })
			if output == "json" {
				err = writeJSON(cmd.OutOrStdout(), rows)
			} else {
				err = writeMembers(cmd.OutOrStdout(), rows)
			}
			if err != nil || report.Reached {
				return err
			}
			report.ListProblems = nil // a broken list does not keep the members from being listed
			return statusError(report, 0)
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func writeMembers(w io.Writer, rows []statusreport.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tHEALTH\tVERSION\tIN LIST\tPEER URLS\tCLIENT URLS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.MemberID, r.Name, r.Role, r.Health, statusreport.Versions(r), r.InList,
			dashJoin(r.PeerURLs), dashJoin(r.ClientURLs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Problem != "" {
			fmt.Fprintf(w, "unhealthy: %s: %s\n", r.Name, r.Problem)
		}
	}
	return nil
}

func dashJoin(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func newMemberRemoveCommand() *cobra.Command {
	var (
		path  string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "remove TARGET",
		Short: "Remove a member, refusing what would cost quorum",
		Long: `Remove one member from the etcd cluster now. Refused:
  - while the cluster has no quorum (no change can commit);
  - the last voter (the cluster would be gone);
  - a voter whose removal leaves fewer healthy voters than the quorum of
    the voters that remain (removing a healthy voter of three while
    another is down leaves one healthy of two, below quorum two);
  - a member whose IP is in the member list in force, unless --force: its
    agent would add it back as a new learner on its next pass (and move
    its data aside). To take a node out for good, remove its IP from the
    list instead; the agents then remove it themselves, the same way.
The leader hands leadership over to the healthy voter furthest along
before it is removed, as the agents do. A member not found (removed
meanwhile) counts as done.
` + memberHelpCommon,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withOperator(cmd, path, func(o manual.Operator) error { return o.Remove(cmd.Context(), args[0], force) })
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&force, "force", false, "remove a member whose IP is listed; its agent adds it back as a new learner")
	return cmd
}

func newMemberEvictCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "evict-learner TARGET",
		Short: "Remove a learner (a member that does not vote yet)",
		Long: `Remove a learner from the etcd cluster, for a learner that holds etcd's
single learner slot and does not catch up (the agents also remove a
learner not promoted within agent.learnerTimeout). A learner does not
vote, so this never costs quorum. Refused for a voter (use member remove)
and while the cluster has no quorum. A listed learner's agent adds it
again as a new learner on its next pass, which restarts its join.
` + memberHelpCommon,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withOperator(cmd, path, func(o manual.Operator) error { return o.EvictLearner(cmd.Context(), args[0]) })
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}

func newMemberMoveLeaderCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "move-leader TARGET",
		Short: "Hand leadership to a healthy voter that is caught up",
		Long: `Ask the current leader to hand leadership to TARGET (etcd's MoveLeader,
sent to the leader). Refused: a learner (it cannot lead), a voter that is
not healthy (not in raft, or with an alarm), one more than
` + strconv.Itoa(membership.MaxLeaderLag) + ` applied entries behind the leader (a transfer to it would
stall writes until it caught up, or time out), and while the cluster has
no quorum or no leader. TARGET leading already is success.
` + memberHelpCommon,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withOperator(cmd, path, func(o manual.Operator) error { return o.MoveLeader(cmd.Context(), args[0]) })
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}

// openCluster loads the agent's configuration and connects the way the
// agent does (its client TLS, its call timeout).
func openCluster(path string) (*config.Config, *daemon.Inspector, error) {
	cfg, err := loadValidConfig(path)
	if err != nil {
		return nil, nil, err
	}
	in, err := daemon.NewInspector(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	return cfg, in, nil
}

// withOperator runs fn with an operator on the cluster this node's agent
// configuration (--config) names.
func withOperator(cmd *cobra.Command, path string, fn func(manual.Operator) error) error {
	cfg, in, err := openCluster(path)
	if err != nil {
		return err
	}
	defer in.Close()
	return fn(manual.Operator{Cluster: in, Settings: manual.SettingsFrom(cfg), Out: cmd.OutOrStdout()})
}

// writeJSON renders v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
