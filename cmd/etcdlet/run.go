package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/instancelock"
	"github.com/etcdlet/etcdlet/daemon/logging"
)

func newRunCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent in the foreground",
		Long: `Run the agent in the foreground until SIGTERM or SIGINT.

A members file that is missing or breaks the list rules does not stop the
agent: it is rejected with its reasons, and the last good list (kept in
agent.stateDir across restarts) stays in force; with none, the agent waits.

The agent holds agent.stateDir locked while it runs: a second agent on it
fails at once. One host runs one agent per cluster (etcdlet@<name>.service,
see etcdlet validate --help); an agent refuses to start beside a running
one that shares a port, a directory or a member with it.

The agent logs to stderr with log/slog: text (logfmt) on a terminal and on
the systemd journal, JSON otherwise (agent.logFormat overrides). It serves /metrics (Prometheus), /healthz
(200 while reconcile passes keep finishing: liveness), /readyz (200 when the
local member is a healthy voter in the list, or the node is correctly idle;
503 with the reason otherwise) and /pacemaker on agent.listen.

The configuration file is reloaded when its content changes (watched like
the members file) and on SIGHUP, checked as at start (etcdlet validate):
changes to the member list source and cluster.replicas apply at once; a
change to any other field is refused as a whole, naming the fields (in
the log, /readyz and etcdlet status), and needs a restart.

Signals:
  SIGTERM, SIGINT  stop the local etcd member cleanly and exit 0
  SIGHUP           reload the configuration file now (etcdlet reload sends
                   it and waits for the verdict)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			lock, err := instancelock.Acquire(cfg.Agent.StateDir)
			if err != nil {
				return err
			}
			defer lock.Release()
			if err := refuseBesideRunningInstances(path, cfg); err != nil {
				return err
			}
			log, _ := logging.New(os.Stderr, cfg.Agent.LogFormat, cfg.Agent.LogLevel)
			log = log.With("cluster", cfg.Cluster.Name)
			agent, err := daemon.New(cfg, log, version)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go daemon.ConfigFile{Path: path, Load: loadValidConfig, Log: log}.Run(ctx, agent, hup)
			return agent.Run(ctx)
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}
