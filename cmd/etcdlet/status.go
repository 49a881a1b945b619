package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/certs"
	"github.com/etcdlet/etcdlet/daemon/kube"
	kubereport "github.com/etcdlet/etcdlet/daemon/kube/report"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/daemon/tasks"
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
listed address that is not a member yet; conflict), and its etcd version
(with its data's storage version when that is of another minor, during an
upgrade or a downgrade), and the cluster version (the lowest minor the
members run; a downgrade enabled through etcd's API lowers it, and adds a
line). Then the plan: the next
membership change, and the changes that wait and why; endpoints that answer
for another cluster; a list refused because it would orphan the cluster;
and what the agent decides about this node's own member (for a bootstrap
that waits: which listed nodes have not confirmed they are fresh). With a
kubernetes section, the state of each reporting target as the agent last
saved it: the last successful write (Lease, PacemakerCluster status, the
Etcd resource read) and the error of a failing one. Last, where the
snapshots go and the newest full one: none configured, a directory on
this host only (a lost host takes it with it), or the S3 store; and the
certificate that expires first, in days (or each that is broken or
expires within 30 days, with what to do). With members.source cluster, the
list kept in the cluster: its revision, last change, and whether this
node's copy holds it.

When the cluster does not answer with quorum, every listed node's agent is
asked what its member's data holds (its write-ahead log's last term and
index, its commit index, its revision, whether the member runs), and the
nodes are listed the furthest log first, as raft ranks logs: a cluster
that lost its quorum for good is recovered from the first (etcdlet recover)
(/usr/share/doc/etcdlet/operations.md, "Recover from lost quorum").

The report is what the agent's next pass would see and decide (the same
look, read-only: nothing is changed), computed from the configuration's
member list, the state and data dirs and the live cluster (each call with
agent.callTimeout); the agent need not run. Besides the listed addresses it
asks node.address and the agent's last applied list, so an empty or wrong
list still shows the real members (in list "no"; the plan says what the
agent would do).

The report is printed whatever the state of the list or the cluster. A
member list that is rejected (missing file, a line that is no IP, the
wrong length) adds one "list invalid:" line per problem, and says which
list the agent keeps in force meanwhile: the last one it applied.

When the file differs from the configuration the agent runs (a change it
has not reloaded yet, or refused because it needs a restart), the report
begins with "CONFIGURATION NOT IN FORCE" and the reason.

With --wait, poll until membership matches the list with every member
voting and healthy, and no change that restarts this node's member (a new
staticPod.image) is still held for its member-restart task.

Exit codes, for scripts (the first that holds wins):
  4  unreachable: no member of the cluster answered (also a new cluster
     before its founding act: etcdlet bootstrap --approve on one node)
  3  no quorum: members answer, but not a majority of the voters agree
  2  the member list is invalid or unreadable (the cluster has quorum)
  1  --wait: membership did not match the list in time, or this node
     still holds a change; or the command
     could not run (invalid configuration, bad flags)
  0  the cluster has quorum and the list is valid (with --wait: and
     membership matches it, every member voting and healthy)
A cluster-wide failure outranks a broken list: a script that pages on
"etcd is down" must not see it as a typo in the members file, and the
list problem is printed either way.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: must be table or json", output)
			}
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			report, err := waitForReport(cmd.Context(), cfg, wait)
			if err != nil {
				return err
			}
			report.Snapshots = tasks.Whereabouts(cmd.Context(), cfg.Backup, time.Now())
			report.Certificates = certs.Summary(certs.CertTargets(cfg), time.Now())
			if cfg.Certificates.AutoRenew && report.Certificates != "" {
				report.Certificates += fmt.Sprintf("; the agent renews the member's %s ahead (certificates.autoRenew)", cfg.Certificates.RenewBefore)
			}
			if output == "json" {
				err = statusreport.WriteJSON(cmd.OutOrStdout(), report)
			} else {
				err = statusreport.WriteTable(cmd.OutOrStdout(), report)
			}
			if err != nil {
				return err
			}
			return statusError(report, wait)
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
		report := statusreport.FromSnapshot(cfg.Cluster.Name, snap)
		report.Insecure = cfg.SecurityWarnings()
		if report.Configuration, err = daemon.ConfigDrift(cfg); err != nil {
			report.Configuration = err.Error()
		}
		if report.Reporting, err = kubereport.Read(cfg.Agent.StateDir); err != nil {
			report.Reporting = []kube.TargetState{{Target: "the agent's saved reporting state", LastError: err.Error()}}
		}
		if report.Done() || !time.Now().Before(deadline) {
			if cfg.Members.Source == config.SourceCluster {
				report.ClusterList = clusterListLine(ctx, cfg, inspector)
			}
			if report.Reached {
				report.ClusterVersion = inspector.ClusterVersion(ctx, snap.View)
			}
			if !report.Reached && snap.ListOK {
				report.Data = inspector.ListedData(ctx, snap)
				report.Recovery = statusreport.RecoveryHint(report.Data)
			}
			return report, nil
		}
		select {
		case <-ctx.Done():
			return report, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Exit codes of `etcdlet status`, documented in its --help and in
// docs/operations.md.
const (
	exitOK           = 0
	exitNotConverged = 1 // --wait timed out; also any error that kept the command from running
	exitListInvalid  = 2
	exitNoQuorum     = 3
	exitUnreachable  = 4
)

// statusCode classifies a report, the most severe state first: a
// cluster-wide failure outranks a broken list (which the report shows in
// any case), and a broken list outranks a --wait that timed out: it is
// the likelier reason, and the one to fix first.
func statusCode(r statusreport.Report, waited bool) int {
	switch {
	case !r.Answered:
		return exitUnreachable
	case !r.Reached:
		return exitNoQuorum
	case len(r.ListProblems) > 0:
		return exitListInvalid
	case waited && !r.Done():
		return exitNotConverged
	}
	return exitOK
}

// statusError carries the report's exit code, with a one-line reason on
// stderr (the report itself is on stdout).
func statusError(r statusreport.Report, wait time.Duration) error {
	code := statusCode(r, wait > 0)
	var why string
	switch code {
	case exitOK:
		return nil
	case exitUnreachable:
		why = "no member of the cluster answered"
		if l := r.Local; l != nil && l.Refusal == string(localmember.RefuseNotApproved) {
			// A new cluster waits for its founding act: say which.
			why = "no cluster yet: run 'etcdlet bootstrap --approve' on one node to found it (cluster.bootstrap explicit)"
		}
	case exitNoQuorum:
		why = "the cluster has no quorum"
	case exitListInvalid:
		why = "the member list is invalid: " + strings.Join(r.ListProblems, "; ")
	case exitNotConverged:
		why = fmt.Sprintf("membership did not match the list within %s", wait)
		if r.Converged {
			why = fmt.Sprintf("this node still holds a change that restarts its member (%s) after %s", r.Local.Held, wait)
		}
	}
	return &exitError{code: code, err: errors.New(why)}
}
