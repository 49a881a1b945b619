// Command etcdlet is a node agent for etcd on self-managed Kubernetes
// control planes: it keeps the etcd cluster's membership equal to an
// externally managed list of member IPs and runs this node's member.
//
// This package is a thin command-line layer over the daemon packages.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries an exit code; its message has already been printed
// when silent is set.
type exitError struct {
	code   int
	silent bool
	err    error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	root := newRootCommand()
	if err := root.Execute(); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
			if ee.silent {
				os.Exit(code)
			}
		}
		fmt.Fprintf(os.Stderr, "etcdlet: %v\n", err)
		os.Exit(code)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "etcdlet",
		Short: "Keep etcd membership equal to a list of member IPs, one agent per control-plane host",
		Long: `etcdlet is a node agent for etcd on self-managed Kubernetes control planes.

One etcdlet runs on every control-plane host. It reads an externally managed
list of member IPs (a static list or a members file) and keeps the etcd
cluster's membership equal to it: new IPs join as learners and are promoted
once in sync, IPs that left the list are removed without ever costing
quorum, and a member whose data is stale is moved aside (never deleted) and
rejoins. It runs this host's etcd member itself.

Documentation: /usr/share/doc/etcdlet/ (installed with the package; docs/ in
the source): config.md is the configuration reference, operations.md the
procedures (install, add, remove, replace, snapshot, recover, upgrade);
examples/ holds example configurations. Every command has a man page:
man etcdlet-<command>.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCommand(), newReloadCommand(), newValidateCommand(), newStatusCommand(), newBootstrapCommand(), newAckMovesCommand(),
		newPacemakerCommand(), newRenderCommand(), newVersionCommand())
	root.AddCommand(newCertsCommand())
	root.AddCommand(newTaskCommand(), newRestoreCommand(), newRecoverCommand())
	root.AddCommand(newMemberCommand(), newMembersCommand(), newLockCommand(), newEtcdctlCommand(), newEtcdCommand())
	root.AddCommand(newGenDocsCommand())
	return root
}

// addConfigFlag adds the --config and --instance flags every command
// shares.
func addConfigFlag(cmd *cobra.Command, path *string) {
	addConfigFlagTo(cmd.Flags(), path)
	cmd.MarkFlagsMutuallyExclusive("config", "instance")
}

func addConfigFlagTo(flags *pflag.FlagSet, path *string) {
	flags.StringVarP(path, "config", "c", filepath.Join(configDir, "config.yaml"),
		"path of the etcdlet configuration file (YAML; unknown fields are errors)")
	addInstanceFlag(flags, path)
}
