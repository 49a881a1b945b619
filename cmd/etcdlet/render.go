package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod/manifest"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

func newRenderCommand() *cobra.Command {
	var path, output string
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the etcd static-pod manifest etcdlet would write now (dry run)",
		Long: `Decide, as the agent's next reconcile pass would, how this node's etcd member
runs (bootstrap, join as the learner the writer added, restart on its data,
or keep running), and print the kubelet static-pod manifest for it. It reads
the state dir and the data dir and observes the cluster, but changes
nothing: no membership change, no file written unless --output names one.

Applies to etcd.runtime static-pod only: with the embedded runtime etcdlet
writes no manifest, and render exits non-zero saying so. Exits non-zero on
an invalid configuration, too, and when no member runs on this node now
(not listed, waiting to be added, ...), saying why.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			if cfg.Etcd.Runtime != config.RuntimeStaticPod {
				return fmt.Errorf("render applies to etcd.runtime %s only: with etcd.runtime %s etcdlet writes no manifest", config.RuntimeStaticPod, cfg.Etcd.Runtime)
			}
			inspector, err := daemon.NewInspector(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer inspector.Close()
			spec, err := inspector.Preview(cmd.Context())
			if err != nil {
				return err
			}
			data, err := manifest.Render(spec, cfg.StaticPod)
			if err != nil {
				return err
			}
			if output == "-" {
				_, err := cmd.OutOrStdout().Write(data)
				return err
			}
			if err := os.MkdirAll(filepath.Dir(output), 0o700); err != nil {
				return err
			}
			return atomicfile.Write(output, data, 0o600)
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringVarP(&output, "output", "o", "-", "where to write the manifest: - for stdout, or a file path (written atomically, mode 0600)")
	return cmd
}
