package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/logging"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
)

func newPacemakerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pacemaker",
		Short: "Inspect pacemaker the way etcdlet reports it",
	}
	cmd.AddCommand(newPacemakerStatusCommand())
	return cmd
}

func newPacemakerStatusCommand() *cobra.Command {
	var (
		path    string
		cibFile string
		output  string
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the PacemakerCluster object etcdlet would write",
		Long: `Poll pacemaker once (crm_mon --one-shot --inactive --output-as=xml, the CIB
configuration and corosync's node list) and print the OpenShift
PacemakerCluster object (etcd.openshift.io, singleton "cluster") that etcdlet
would write: every cluster, node, resource and fencing-agent condition,
computed as /usr/share/doc/etcdlet/pacemaker.md describes, already checked against the CRD's
validation rules.

The pacemaker section of --config is used when the file exists (it need
not be given on a node that runs pacemaker with the defaults). With
--cib-file, crm_mon runs with CIB_file=FILE and the CIB is read from FILE:
no running cluster is needed.

crm_mon, cibadmin and corosync-cmapctl run as root: one that someone other
than root could change is refused before any of them runs, also when
pacemaker.enabled is false (see /usr/share/doc/etcdlet/config.md, "Secure by default").

Exits 1 when pacemaker's state is unknown (crm_mon missing, not connected,
failing), printing why, or when a program is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != pacemaker.FormatYAML && output != pacemaker.FormatJSON && output != pacemaker.FormatTable {
				return fmt.Errorf("--output %q: must be yaml, json or table", output)
			}
			opts, err := pacemakerOptions(path, cmd.Flags().Changed("config"))
			if err != nil {
				return err
			}
			if cibFile != "" {
				if opts.CIBFile, err = filepath.Abs(cibFile); err != nil {
					return fmt.Errorf("--cib-file: %w", err)
				}
			}
			log, _ := logging.New(os.Stderr, config.LogFormatText, "error") // an unknown state is the error printed below
			collector, err := pacemaker.NewCollector(opts, log.With("component", "pacemaker"))
			if err != nil {
				return err
			}
			snap := collector.Poll(cmd.Context())
			if snap.Known {
				// The log is quiet below errors; what the status rests on
				// must still be seen.
				for _, note := range snap.Cluster.Notes {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+note)
				}
			}
			obj, err := collector.Build(snap, nil, time.Now())
			if err != nil {
				return err
			}
			return pacemaker.Render(cmd.OutOrStdout(), obj, output)
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringVar(&cibFile, "cib-file", "", "read the cluster from this CIB file (crm_mon runs with CIB_file=FILE) instead of the running cluster")
	cmd.Flags().StringVarP(&output, "output", "o", pacemaker.FormatYAML, "output format: yaml, json or table")
	return cmd
}

// pacemakerOptions is the configuration file's pacemaker section, or the
// defaults when no file was named and the default one does not exist.
func pacemakerOptions(path string, explicit bool) (config.Pacemaker, error) {
	if _, err := os.Stat(path); !explicit && errors.Is(err, os.ErrNotExist) {
		slog.Debug("no configuration file; using the pacemaker defaults", "config", path)
		return config.DefaultPacemaker(), nil
	}
	cfg, err := loadValidConfig(path)
	if err != nil {
		return config.Pacemaker{}, err
	}
	return cfg.Pacemaker, nil
}
