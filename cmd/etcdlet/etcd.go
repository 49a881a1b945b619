package main

import (
	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/daemon/manual"
)

func newEtcdCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Act on the etcd cluster itself: its version (downgrade)",
		Long: `Commands on the etcd cluster that are not about its membership. For now,
etcd's downgrade API: an upgrade needs no command (install the newer etcd
one host at a time), a downgrade does, because etcd runs no member below
the cluster version.`,
	}
	cmd.AddCommand(newDowngradeCommand())
	return cmd
}

func newDowngradeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "downgrade",
		Short: "Lower the cluster version one minor, so that an older etcd can run the members",
		Long: `etcd runs no member below the cluster version, which is the lowest minor
its members run: once every member runs etcd 3.7, an etcd 3.6 member stops
at once (the agent refuses to start it, naming the rule). etcd's downgrade
API (3.6 and later) lowers the cluster version by one minor:

  etcdlet etcd downgrade validate 3.6   # would etcd accept it? changes nothing
  etcdlet etcd downgrade enable 3.6     # lower the cluster version to 3.6
  # then, one host at a time: run etcd 3.6 there (staticPod.image, or the
  # etcdlet package that embeds it) and wait for etcdlet status --wait
  etcdlet etcd downgrade cancel         # stop it before every member runs 3.6

The downgrade ends on its own when every member runs the target;
etcdlet status shows "downgrade: enabled, to 3.6.0" until then.

Refused, naming the rule, touching nothing: without quorum; a target that
is not one minor below the version the members run; a downgrade enabled
already. enable also refuses while any member is a learner or not healthy:
each member is restarted in turn on the older etcd, and a restart while
another member is down can cost quorum. enable takes the agents' writer
lock (no member is added meanwhile) and checks again under it.

The command reads the agent's configuration (--config): the member list in
force, node.address and agent.etcdClientTLS (or etcd.tls.client); it
touches only the cluster this node belongs to.`,
	}
	cmd.AddCommand(
		downgradeActionCommand(manual.DowngradeValidate, "validate VERSION", "Ask etcd whether it would accept a downgrade to VERSION (changes nothing)"),
		downgradeActionCommand(manual.DowngradeEnable, "enable VERSION", "Lower the cluster version to VERSION, one minor below it"),
		downgradeActionCommand(manual.DowngradeCancel, "cancel", "Stop the downgrade enabled"),
	)
	return cmd
}

func downgradeActionCommand(action manual.DowngradeAction, use, short string) *cobra.Command {
	var path string
	args := cobra.ExactArgs(1)
	if action == manual.DowngradeCancel {
		args = cobra.NoArgs
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

See etcdlet etcd downgrade --help for the procedure and what is refused.
A refused request exits 1 naming the rule.`,
		Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			target := ""
			if len(args) == 1 {
				target = args[0]
			}
			return withOperator(cmd, path, func(o manual.Operator) error { return o.Downgrade(cmd.Context(), action, target) })
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}
