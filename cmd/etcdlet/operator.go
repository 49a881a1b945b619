package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/clusterlist"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/state"
)

func newBootstrapCommand() *cobra.Command {
	var (
		path    string
		approve bool
	)
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Show whether a new cluster may form here; --approve forms one (explicit) or lets one form without silent nodes (consent)",
		Long: `A new etcd cluster forms only when no listed etcd answers, and only as
cluster.bootstrap says. This command shows how, each listed node's answer
(asked on its agent peer endpoint, agent.peerPort) and what this node's
agent would decide.

cluster.bootstrap explicit (the default): a new cluster forms only on an
operator's act on one node, as kubeadm init, k3s --cluster-init and
talosctl bootstrap make it. The fresh nodes wait and say so ("no cluster
yet; run etcdlet bootstrap --approve on one node"). --approve is that act:
it records the approval for the list in force on this node (in
agent.stateDir/operator.json, read on every pass), and this node's agent
then founds a one-member cluster of itself, with a new cluster identity;
the writer adds the other listed nodes as learners, one at a time, as it
adds any node. Run it on one node only, once every listed host's etcdlet
runs. Listed nodes that do not answer do not hold it back (you looked at
their answers); a node that answers no does: it holds data, is or was a
member (a former member first forgets its cluster: etcdlet restore
--rejoin), founds or bootstraps a cluster itself, reads another list, or
is approved or named in cluster.founder itself. An approval founds one
cluster: once used, it never founds another, not after this node's data is
lost; found again (disaster recovery) only with a new --approve.
(cluster.founder in every host's configuration names the founding node
instead; see /usr/share/doc/etcdlet/config.md.)

cluster.bootstrap consent: a node bootstraps a new cluster of every listed
node when every listed node's agent confirms that it is fresh (no data,
never a member) and sees the same list. A listed node that does not answer
is no consent: it may be the host of the only member, down or cut off, and
a bootstrap beside it would split the cluster in two. The agents wait and
say so (etcdlet status, the log, etcdlet_bootstrap_waiting_for_consent).
--approve is the way on without them, as in explicit mode: this node
founds a one-member cluster and the others join it when they come.

Disaster recovery (every member's data is known to be lost): --approve on
one node founds a new cluster with a new cluster identity, never the old
one's: a member of the old cluster that was only down and comes back with
its data is then another cluster's, is never started as a member of the
new one, and is reported (refusal foreign-data) until its data is moved
aside by hand.

In both modes --approve is refused while a listed etcd answers (the nodes
join it, nothing is bootstrapped), while this node holds data (restore it,
or move it aside by hand first), while this node is not listed, and with
cluster.bootstrap never, which members.source etcd-resource always is: the
API server that serves that list runs on the cluster, which therefore
exists.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, inspector, err := openCluster(path)
			if err != nil {
				return err
			}
			defer inspector.Close()
			if approve && cfg.Members.Source == config.SourceCluster {
				if err := firstClusterList(cmd.Context(), cfg, inspector.Pool()); err != nil {
					return err
				}
			}
			snap := inspector.Look(cmd.Context())
			switch {
			case !snap.ListOK:
				return fmt.Errorf("no member list in force: %v", snap.ListErr)
			case snap.SelfErr != nil:
				return snap.SelfErr
			}
			mode := cfg.BootstrapMode()
			own := inspector.Node.OwnAnswer(snap)
			asked := inspector.Node.AskPeers(cmd.Context(), snap)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "cluster.bootstrap %s: %s\n", mode, modeSays(cfg))
			writeAnswers(out, mode, own, asked)
			fmt.Fprintf(out, "\nthis node's decision: %s: %s\n", snap.Decision.Kind, snap.Decision.Reason)
			if !approve {
				return nil
			}
			switch {
			case mode == config.BootstrapNever:
				return fmt.Errorf("not approved: this node never bootstraps (%s): it joins the cluster that serves its list; to recover a cluster that lost its quorum for good, see 'Recover from lost quorum' in /usr/share/doc/etcdlet/operations.md", neverWhy(cfg))
			case snap.View.Reached || snap.View.Established:
				return fmt.Errorf("not approved: a listed etcd answers (cluster %x); the nodes join it, nothing is bootstrapped", snap.View.ClusterID)
			case snap.Data.HasData():
				return fmt.Errorf("not approved: this node's data dir %s holds etcd data; restore the member on it, or move it aside by hand, before a new cluster is formed", cfg.Etcd.DataDir)
			case !slices.ContainsFunc(snap.Desired, func(d identity.Member) bool { return d.IP == snap.Self.IP }):
				return fmt.Errorf("not approved: this node's address %s is not in the member list [%s]; approve on a listed node", snap.Self.IP, strings.Join(own.List, " "))
			}
			// The approval given now comes after any that stands elsewhere.
			own.Approved, own.ApprovedAt = true, time.Now().UTC()
			if v := consent.EvaluateFounding(own, asked); len(v.Refusing) > 0 {
				return fmt.Errorf("not approved: %s", v.Reason())
			}
			return approveBootstrap(out, cfg, own.List, "\napproved: this node founds a new one-member cluster of itself, with a cluster identity of its own, on its agent's next pass, unless a listed node answers that it stands against it; the other listed nodes then join it as learners, one at a time (etcdlet status --wait shows them). Approve on this node only. The approval holds for the list [%s] and founds one cluster.\n")
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&approve, "approve", false, "found a new one-member cluster on this node, which the other listed nodes join; listed nodes that do not answer do not hold it back")
	return cmd
}

// firstClusterList gives the host that founds a cluster whose list is
// kept in the cluster (members.source cluster) its first list
// (clusterlist.FirstList).
func firstClusterList(ctx context.Context, cfg *config.Config, pool *etcdclient.Pool) error {
	self, err := netip.ParseAddr(cfg.Node.Address)
	if err != nil {
		return errors.New("not approved: with members.source cluster the host that founds the cluster needs node.address: its first member list is itself")
	}
	seeds := clusterlist.SeedURLs(identity.SchemeFrom(cfg), cfg.Members.Seeds)
	if err := clusterlist.FirstList(ctx, cfg.ListRules(), self, seeds, pool.NewMulti, cfg.Agent.CallTimeout); err != nil {
		return fmt.Errorf("not approved: %w", err)
	}
	return nil
}

// modeSays is what cluster.bootstrap means, for the command's first line.
func modeSays(cfg *config.Config) string {
	switch cfg.BootstrapMode() {
	case config.BootstrapNever:
		return "this node never founds a cluster (" + neverWhy(cfg) + "); it joins the one that answers"
	case config.BootstrapConsent:
		return "the listed nodes bootstrap a new cluster together once every one of them confirms it is fresh"
	}
	if f := cfg.Cluster.Founder; f != "" {
		return "a new cluster forms only on an operator's act; cluster.founder names " + f + ", which founds it"
	}
	return "a new cluster forms only on an operator's act: etcdlet bootstrap --approve on one node founds it"
}

func neverWhy(cfg *config.Config) string {
	if cfg.Members.Source == config.SourceEtcdResource {
		return "members.source etcd-resource: the API server that serves the list needs the cluster"
	}
	return "cluster.bootstrap never"
}

func writeAnswers(w io.Writer, mode string, own consent.Answer, asked []consent.Asked) {
	fmt.Fprintf(w, "cluster %s, list [%s]\n\n", own.Cluster, strings.Join(own.List, " "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if mode == config.BootstrapConsent {
		fmt.Fprintln(tw, "NODE\tANSWER\tCONSENTS\tDETAIL")
		ok, why := own.Consents(own)
		fmt.Fprintf(tw, "%s (this node)\t%s\t%s\t%s\n", own.Node, own.Phase, yesNo(ok, why), own.Detail)
	} else {
		// Whether the node stands against this node founding a cluster
		// with the operator's approval.
		fmt.Fprintln(tw, "NODE\tANSWER\tLETS THIS NODE FOUND\tDETAIL")
		fmt.Fprintf(tw, "%s (this node)\t%s\t-\t%s\n", own.Node, own.Phase, own.Detail)
	}
	for _, a := range asked {
		if a.Err != nil && !consent.IsRefused(a.Err) {
			fmt.Fprintf(tw, "%s\tno answer\t%s\t%v\n", a.Node, map[bool]string{true: "no", false: "yes, if approved"}[mode == config.BootstrapConsent], a.Err)
			continue
		}
		var ok bool
		var why string
		if mode == config.BootstrapConsent {
			want := own
			want.Node = a.Node.String()
			ok, why = a.Answer.Consents(want)
		} else {
			approved := own
			approved.Approved = true
			_, why = consent.FoundingObjection(approved, a)
			ok = why == ""
		}
		phase := string(a.Answer.Phase)
		if a.Err != nil {
			phase, why = "refused", a.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Node, phase, yesNo(ok, why), a.Answer.Detail)
	}
	tw.Flush()
}
func yesNo(ok bool, why string) string {
	if ok {
		return "yes"
	}
	return "no: " + why
}

func approveBootstrap(w io.Writer, cfg *config.Config, list []string, says string) error {
	if err := (state.Store{Dir: cfg.Agent.StateDir}).ApproveBootstrap(list, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(w, says, strings.Join(list, " "))
	return nil
}

func newAckMovesCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "ack-moves",
		Short: "Let a node that moved its data aside too often rejoin",
		Long: `When the data dir was moved aside etcd.moveAsideLimit times within
etcd.moveAsideWindow, the agent stops rejoining the cluster and says so:
something keeps removing this member or destroying its data, and every
rejoin copies the whole keyspace again. Find out what, then run this
command: moves made before now no longer count, and the agent rejoins on
its next pass. The moved-aside data dirs stay where they are (etcdlet never
deletes them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			moved, err := datadir.MovedSince(cfg.Etcd.DataDir, now.Add(-cfg.Etcd.MoveAsideWindow))
			if err != nil {
				return err
			}
			if err := (state.Store{Dir: cfg.Agent.StateDir}).AcknowledgeMoves(now); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "acknowledged %d move(s) aside within the last %s; the agent rejoins on its next pass\n", moved, cfg.Etcd.MoveAsideWindow)
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}
