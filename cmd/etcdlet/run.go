package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/daemon"
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

The agent logs to stderr with log/slog: text on a terminal, JSON otherwise
(agent.logFormat overrides). It serves /metrics (Prometheus), /healthz
(200 while reconcile passes keep finishing: liveness), /readyz (200 when the
local member is a healthy voter in the list, or the node is correctly idle;
503 with the reason otherwise) and /pacemaker on agent.listen.

Signals:
  SIGTERM, SIGINT  stop the local etcd member cleanly and exit 0
  SIGHUP           reload the configuration file, checked as at start
                   (etcdlet validate); changes to the member list source and
                   cluster.replicas apply at once, a change to any other
                   field is refused (logged) and needs a restart`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			log, _ := logging.New(os.Stderr, cfg.Agent.LogFormat, cfg.Agent.LogLevel)
			agent, err := daemon.New(cfg, log, version)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for range hup {
					reloaded, err := loadValidConfig(path)
					if err != nil {
						log.Error("configuration reload rejected; the running configuration stays in force", "config", path, "problems", err.Error())
						agent.RejectReload(err) // /readyz says so
						continue
					}
					_ = agent.Reload(ctx, reloaded) // logs its own outcome
				}
			}()
			return agent.Run(ctx)
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}
