package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/daemon/status"
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
membership change, and the changes that wait and why.

The report is computed from the configuration's member list and the live
cluster (each call with agent.callTimeout); the agent need not run. Besides
the listed addresses it asks node.address and, if the state dir can be read,
the agent's last applied list, so an empty or wrong list still shows the
real members (in list "no"; the plan says what the agent would do).

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
				err = status.WriteJSON(cmd.OutOrStdout(), report)
			} else {
				err = status.WriteTable(cmd.OutOrStdout(), report)
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

func waitForReport(ctx context.Context, cfg *config.Config, wait time.Duration) (status.Report, error) {
	pool, err := etcdclient.NewPool(cfg.ClientTLS(), cfg.Agent.CallTimeout)
	if err != nil {
		return status.Report{}, err
	}
	defer pool.Close()
	scheme := identity.SchemeFrom(cfg)
	observer := &membership.Observer{Pool: pool, Timeout: cfg.Agent.CallTimeout, Scheme: scheme}
	deadline := time.Now().Add(wait)
	known := knownEndpoints(cfg, scheme)
	var members []membership.Member
	for {
		addrs, errs := cfg.DesiredMembers()
		if len(errs) > 0 {
			return status.Report{}, fmt.Errorf("member list:\n%w", errs)
		}
		desired := scheme.ForAll(addrs)
		view := observer.Observe(ctx, membership.Endpoints(desired, members, known...))
		members = view.Members
		report := status.Build(cfg.Cluster.Name, desired, view)
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

// knownEndpoints are client URLs worth asking besides the listed ones:
// this node's address and, from the agent's state dir when it can be read,
// the address it used and the last list it applied. So the report shows
// the real cluster even when the list is empty or names no member yet.
func knownEndpoints(cfg *config.Config, scheme identity.Scheme) []string {
	var ips []string
	if cfg.Node.Address != "" {
		ips = append(ips, cfg.Node.Address)
	}
	if st, err := (state.Store{Dir: cfg.Agent.StateDir}).Load(); err == nil {
		ips = append(ips, st.SelfAddress)
		ips = append(ips, st.LastAppliedList...)
	}
	var urls []string
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil {
			urls = append(urls, scheme.For(ip).ClientURL)
		}
	}
	return urls
}
