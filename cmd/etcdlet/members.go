package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/clusterlist"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

const membersHelpCommon = `
The list lives in the cluster's own keyspace (members.source cluster): every
agent watches it, so no two hosts can hold different lists. The command
reads the agent's configuration (--config) for the endpoints (the listed
members, this node's own, members.seeds), the client TLS and the list rules
(cluster.replicas; TLS off loopback), and edits the list of the cluster this
node belongs to. The edit is a compare-and-swap on the list's revision: an
edit made meanwhile on another host is never overwritten (run the command
again). While the cluster has not carried out the last change (a learner
not promoted, a listed host not a member yet, an unlisted member not
removed yet) a new edit is refused, except one that takes back a join that
cannot finish; --force edits anyway. The agents carry out a change one
member at a time, never below quorum: 'etcdlet status --wait' waits for it.`

func newMembersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members",
		Short: "Show or change the member list kept in the cluster (members.source cluster)",
		Long: `Show or change the member list that etcdlet keeps in the etcd cluster itself
(members.source cluster), from any host with etcdlet's configuration: the
one-command way to add, remove or replace a control-plane host, as kubeadm
join or talosctl do. A fresh host needs only members.seeds (addresses of
members) in its configuration: its agent reads the list from them and joins
once 'etcdlet members add <its IP>' lists it.

The first list is written by 'etcdlet bootstrap --approve' on the host that
founds the cluster (a one-member list of itself). To move a cluster whose
list came from a file to members.source cluster, run 'etcdlet members set'
with the list in force, then switch every host's configuration.
` + membersHelpCommon,
	}
	cmd.AddCommand(newMembersShowCommand(),
		newMembersEditCommand(clusterlist.Add, "add IP...", "List more hosts: their agents join them as learners, one at a time, and they are promoted"),
		newMembersEditCommand(clusterlist.Remove, "remove IP...", "Take hosts off the list: the agents remove their members without costing quorum"),
		newMembersEditCommand(clusterlist.Set, "set IP...", "Replace the whole list (also the first one, when none is stored)"))
	return cmd
}

func newMembersShowCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the stored list, its revision, its last change, and what is in flight",
		Long: `Print the member list stored in the cluster, the revision it was last
changed at, what that change was (where and when it was made), and what of
it the cluster has not carried out yet.` + "\n" + membersHelpCommon,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClusterList(cmd.Context(), path, func(cfg *config.Config, ed clusterlist.Editor) error {
				stored, found, err := clusterlist.Read(cmd.Context(), ed.Client, ed.ClusterID, ed.Timeout)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("%w (cluster %x): store the first one with 'etcdlet members set <IP>...'", clusterlist.ErrNoList, ed.ClusterID)
				}
				writeStored(cmd.OutOrStdout(), ed.ClusterID, stored)
				pending, err := ed.Pending(cmd.Context(), stored)
				if err != nil {
					return err
				}
				if len(pending) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "in flight: nothing; the members are the listed hosts, every one a voter")
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "in flight (not carried out yet):\n  %s\n", strings.Join(pending, "\n  "))
				return nil
			})
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}

func newMembersEditCommand(kind, use, short string) *cobra.Command {
	var (
		path  string
		force bool
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  short + ".\n" + membersHelpCommon,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addrs, err := parseIPArgs(args)
			if err != nil {
				return err
			}
			return withClusterList(cmd.Context(), path, func(cfg *config.Config, ed clusterlist.Editor) error {
				ed.Force = force
				stored, err := ed.Change(cmd.Context(), clusterlist.Edit{Kind: kind, Addrs: addrs})
				if err != nil {
					return err
				}
				writeStored(cmd.OutOrStdout(), ed.ClusterID, stored)
				fmt.Fprintln(cmd.OutOrStdout(), "stored: every agent carries it out, one member at a time; 'etcdlet status --wait' waits until it is done")
				return nil
			})
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&force, "force", false, "edit although the cluster has not carried out the last change (the agents still change one member at a time, never below quorum)")
	return cmd
}

// parseIPArgs checks the command's addresses with the rules of a member
// list (canonical IPs, each once).
func parseIPArgs(args []string) ([]netip.Addr, error) {
	entries := make([]config.AddressEntry, len(args))
	for i, a := range args {
		entries[i] = config.AddressEntry{Where: "argument " + strconv.Itoa(i+1), Text: a}
	}
	addrs, errs := config.ValidateAddressList("arguments", entries, nil)
	if len(errs) > 0 {
		return nil, errs
	}
	return addrs, nil
}

func writeStored(w io.Writer, clusterID uint64, s clusterlist.Stored) {
	fmt.Fprintf(w, "member list of cluster %x, revision %d:\n", clusterID, s.Revision)
	for _, a := range s.Addresses {
		fmt.Fprintf(w, "  %s\n", a)
	}
	if s.Change != "" {
		fmt.Fprintf(w, "last change: %s, by %s, at %s\n", s.Change, s.By, s.At.Format("2006-01-02 15:04:05Z07:00"))
	}
}

// withClusterList runs fn with an editor of the list of the cluster this
// node belongs to (or, on a host that belongs to none yet, of the one
// cluster its endpoints answer for).
func withClusterList(ctx context.Context, path string, fn func(*config.Config, clusterlist.Editor) error) error {
	cfg, in, err := openCluster(path)
	if err != nil {
		return err
	}
	defer in.Close()
	if cfg.Members.Source != config.SourceCluster {
		return fmt.Errorf("members.source is %s, so the list is not kept in the cluster: %s; these commands change the list of members.source cluster", cfg.Members.Source, sourceSays(cfg))
	}
	ed, done, err := clusterListEditor(ctx, cfg, in)
	if err != nil {
		return err
	}
	defer done()
	return fn(cfg, ed)
}

// clusterListEditor connects to the cluster whose list this node reads:
// through the listed members, this node's own and the seeds. done closes
// the connection.
func clusterListEditor(ctx context.Context, cfg *config.Config, in *daemon.Inspector) (clusterlist.Editor, func(), error) {
	scheme := identity.SchemeFrom(cfg)
	eps := append(in.ClientEndpoints(), clusterlist.SeedURLs(scheme, cfg.Members.Seeds)...)
	cli, err := in.Pool().NewMulti(eps)
	if err != nil {
		return clusterlist.Editor{}, nil, err
	}
	done := func() { _ = cli.Close() }
	pinned, _ := strconv.ParseUint(in.PinnedClusterID(), 16, 64)
	id, answering, err := clusterlist.Choose(ctx, cli, eps, pinned, cfg.Agent.CallTimeout)
	if err != nil {
		done()
		return clusterlist.Editor{}, nil, err
	}
	cli.SetEndpoints(answering...)
	return clusterlist.Editor{Rules: cfg.ListRules(), Scheme: scheme, Client: cli, ClusterID: id,
		Timeout: cfg.Agent.CallTimeout, By: whoEdits()}, done, nil
}

// clusterListLine is etcdlet status's line about the list kept in the
// cluster (members.source cluster): its revision and last change, and
// whether this node's copy, which the agent acts on, is that list.
func clusterListLine(ctx context.Context, cfg *config.Config, in *daemon.Inspector) string {
	ed, done, err := clusterListEditor(ctx, cfg, in)
	if err != nil {
		return "not read from the cluster: " + err.Error()
	}
	defer done()
	return ed.Describe(ctx)
}

// sourceSays says where the list of another source is changed.
func sourceSays(cfg *config.Config) string {
	switch cfg.Members.Source {
	case config.SourceStatic:
		return "edit members.addresses in the configuration of every host"
	case config.SourceFile:
		return "edit " + cfg.Members.File + " on every host"
	}
	return "edit the Etcd resource's spec.externallyManagedMemberAddresses"
}

// whoEdits is the host and user an edit is recorded under.
func whoEdits() string {
	host, _ := os.Hostname()
	if u, err := user.Current(); err == nil {
		return host + " (" + u.Username + ")"
	}
	return host
}
