package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
)

func newStatusCommand() *cobra.Command {
	var (
		path   string
		output string
		wait   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every desired and actual member and what the agent would do next",
		Long: `Show, for every listed address and every etcd member: name, IP, member ID,
role (leader, voter, learner), health, DB size, applied raft index and
whether it matches the list (yes; no: a member that will leave; missing: a
listed address that is not a member yet; conflict). Then the plan: the next
membership change, and the changes that wait and why; endpoints that answer
for another cluster; a list refused because it would orphan the cluster;
and what the agent decides about this node's own member (for a bootstrap
that waits: which listed nodes have not confirmed they are fresh). With a
kubernetes section, the state of each reporting target as the agent last
saved it: the last successful write (Lease, PacemakerCluster status, the
Etcd resource read) and the error of a failing one.

The report is what the agent's next pass would see and decide (the same
look, read-only: nothing is changed), computed from the configuration's
member list, the state and data dirs and the live cluster (each call with
agent.callTimeout); the agent need not run. Besides the listed addresses it
asks node.address and the agent's last applied list, so an empty or wrong
list still shows the real members (in list "no"; the plan says what the
agent would do).

With --wait, poll until membership matches the list with every member
voting and healthy, and exit 1 if that does not happen in time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: must be table or json", output)
			}
			cfg, err := config.Load(path)
			if err != nil {
				return fmt.Errorf("invalid configuration %s:\n%w", path, err)
			}
			report, err := waitForReport(cmd.Context(), cfg, wait)
			if err != nil {
				return err
			}
			if output == "json" {
				err = statusreport.WriteJSON(cmd.OutOrStdout(), report)
			} else {
				err = statusreport.WriteTable(cmd.OutOrStdout(), report)
			}
			if err == nil && wait > 0 && !report.Converged {
				return &exitError{code: 1, err: fmt.Errorf("membership did not match the list within %s", wait)}
			}
			return err
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().DurationVar(&wait, "wait", 0, "poll until membership matches the list (all voting, all healthy), for at most this long (e.g. 2m); 0 reports once")
	return cmd
}

func waitForReport(ctx context.Context, cfg *config.Config, wait time.Duration) (statusreport.Report, error) {
	inspector, err := daemon.NewInspector(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return statusreport.Report{}, err
	}
	defer inspector.Close()
	deadline := time.Now().Add(wait)
	for {
		snap := inspector.Look(ctx)
		if !snap.ListOK && snap.ListErr != nil {
			return statusreport.Report{}, fmt.Errorf("member list:\n%w", snap.ListErr)
		}
		report := statusreport.FromSnapshot(cfg.Cluster.Name, snap)
		report.Insecure = cfg.SecurityWarnings()
		if report.Reporting, err = daemon.ReadReporting(cfg); err != nil {
			report.Reporting = []kube.TargetState{{Target: "the agent's saved reporting state", LastError: err.Error()}}
		}
		if report.Converged || !time.Now().Before(deadline) {
			return report, nil
		}
		select {
		case <-ctx.Done():
			return report, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
