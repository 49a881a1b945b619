package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/daemon"
)

func newReloadCommand() *cobra.Command {
	var (
		path    string
		pid     int
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "reload --pid PID",
		Short: "Make the running agent read its configuration again, and report the outcome",
		Long: `Check the configuration file as etcdlet validate does, send the agent
(process PID) SIGHUP, and wait until it has applied or refused the new
configuration. The unit's ExecReload runs it, so that systemctl reload
etcdlet needs no other program and fails when the reload does:

  systemctl reload etcdlet

A change to the member list source (members.*) or cluster.replicas applies
at once; a change to any other field is refused, naming the fields, and the
running configuration stays in force until etcdlet is restarted.

Exit codes: 0 the new configuration is in force; 1 the file is invalid (the
agent is not signalled), or the agent refused it, or did not answer within
--timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pid <= 1 {
				return fmt.Errorf("--pid %d: the agent's process ID is required (systemd passes it as $MAINPID)", pid)
			}
			cfg, err := loadValidConfig(path)
			if err != nil {
				return fmt.Errorf("reload not sent, the running configuration stays in force: %w", err)
			}
			sent := time.Now()
			if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
				return fmt.Errorf("signal the agent (process %d): %w", pid, err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			outcome, err := daemon.WaitReload(ctx, cfg.Agent.StateDir, sent)
			if err != nil {
				return fmt.Errorf("the agent (process %d) did not report the reload within %s: %w", pid, timeout, err)
			}
			if outcome.Error != "" {
				return errors.New(outcome.Error)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "configuration reloaded")
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().IntVar(&pid, "pid", 0, "process ID of the running agent (etcdlet run)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the agent's outcome")
	return cmd
}
