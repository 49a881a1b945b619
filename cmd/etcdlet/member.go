package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
)

const memberHelpCommon = `
The command reads the agent's configuration (--config): the member list in
force, node.address, agent.etcdClientTLS (or etcd.tls.client) and
agent.callTimeout. TARGET is a member's name (etcd-main-192.0.2.4), its ID
in hex as etcd prints it, or its IP.

It checks its rules on the cluster as it is now, then takes the agents'
writer lock (the one every etcdlet takes for a membership change, so the
change never races an agent's), looks again under the lock, checks again,
and only then acts. A refused change exits 1 naming the rule.`

func newMemberCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "List etcd members, and remove, evict or hand leadership over without costing quorum",
		Long: `Operator commands on the etcd cluster's membership, next to the agents that
keep it equal to the member list. To add or remove a node for good, edit
the member list: the agents do the rest (docs/operations.md). These
commands are for what the list cannot say: a member that must go now, a
stuck learner, leadership on a chosen node.`,
	}
	cmd.AddCommand(newMemberListCommand(), newMemberRemoveCommand(), newMemberEvictCommand(), newMemberMoveLeaderCommand())
	return cmd
}

func newMemberListCommand() *cobra.Command {
	var path, output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show every etcd member: ID, name, URLs, role, health, and whether it is listed",
		Long: `Show every member of the etcd cluster: ID, name, peer and client URLs,
role (leader, voter or learner), health as the member's own Status says
(unhealthy: why), and IN LIST: yes (its IP is in the member list in force),
no (the agents will remove it), conflict, or unknown (no valid list is in
force).

The cluster is asked through the member list in force, node.address and
the agent's last applied list, with the agent's client TLS. Without quorum
the members come from one member's own (serializable) view and their health
is unknown; the command then exits 3, and 4 when no member answered (the
exit codes of etcdlet status).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: must be table or json", output)
			}
			cfg, in, err := openCluster(path)
			if err != nil {
				return err
			}
			defer in.Close()
			report := statusreport.FromSnapshot(cfg.Cluster.Name, in.Look(cmd.Context()))
			rows := slices.DeleteFunc(report.Members, func(r statusreport.Row) bool { return r.MemberID == "" })
			if output == "json" {
				err = writeJSON(cmd.OutOrStdout(), rows)
			} else {
				err = writeMembers(cmd.OutOrStdout(), rows)
			}
			if err != nil || report.Reached {
				return err
			}
			report.ListProblems = nil // a broken list does not keep the members from being listed
			return statusError(report, 0)
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func writeMembers(w io.Writer, rows []statusreport.Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tHEALTH\tIN LIST\tPEER URLS\tCLIENT URLS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.MemberID, r.Name, r.Role, r.Health, r.InList,
			dashJoin(r.PeerURLs), dashJoin(r.ClientURLs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Problem != "" {
			fmt.Fprintf(w, "unhealthy: %s: %s\n", r.Name, r.Problem)
		}
	}
	return nil
}

func dashJoin(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func newMemberRemoveCommand() *cobra.Command {
	var (
		path  string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "remove TARGET",
		Short: "Remove a member, refusing what would cost quorum",
		Long: `Remove one member from the etcd cluster now. Refused:
  - while the cluster has no quorum (no change can commit);
  - the last voter (the cluster would be gone);
  - a voter whose removal leaves fewer healthy voters than the quorum of
    the voters that remain (removing a healthy voter of three while
    another is down leaves one healthy of two, below quorum two);
  - a member whose IP is in the member list in force, unless --force: its
    agent would add it back as a new learner on its next pass (and move
    its data aside). To take a node out for good, remove its IP from the
    list instead; the agents then remove it themselves, the same way.
The leader hands leadership over to the healthy voter furthest along
before it is removed, as the agents do. A member not found (removed
meanwhile) counts as done.
` + memberHelpCommon,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMemberChange(cmd, path, "etcdlet member remove", args[0], func(s node.Snapshot, m membership.Member) error {
				return checkRemove(s, m, force)
			}, removeMember)
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&force, "force", false, "remove a member whose IP is listed; its agent adds it back as a new learner")
	return cmd
}

func newMemberEvictCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "evict-learner TARGET",
		Short: "Remove a learner (a member that does not vote yet)",
		Long: `Remove a learner from the etcd cluster, for a learner that holds etcd's
single learner slot and does not catch up (the agents also remove a
learner not promoted within agent.learnerTimeout). A learner does not
vote, so this never costs quorum. Refused for a voter (use member remove)
and while the cluster has no quorum. A listed learner's agent adds it
again as a new learner on its next pass, which restarts its join.
` + memberHelpCommon,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMemberChange(cmd, path, "etcdlet member evict-learner", args[0], func(_ node.Snapshot, m membership.Member) error {
				return checkEvict(m)
			}, removeMember)
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}

func newMemberMoveLeaderCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "move-leader TARGET",
		Short: "Hand leadership to a healthy voter that is caught up",
		Long: `Ask the current leader to hand leadership to TARGET (etcd's MoveLeader,
sent to the leader). Refused: a learner (it cannot lead), a voter that is
not healthy (not in raft, or with an alarm), one more than
` + strconv.Itoa(membership.MaxLeaderLag) + ` applied entries behind the leader (a transfer to it would
stall writes until it caught up, or time out), and while the cluster has
no quorum or no leader. TARGET leading already is success.
` + memberHelpCommon,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMemberChange(cmd, path, "etcdlet member move-leader", args[0], checkMoveLeader, moveLeaderTo)
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}

// change is what a member command does under the writer lock.
type change struct {
	cfg  *config.Config
	pool *etcdclient.Pool
	lock etcdclient.Lock
	view membership.View
	out  io.Writer
}

// runMemberChange resolves the target, checks the rules, takes the
// writer lock, looks again, checks again, and acts.
func runMemberChange(cmd *cobra.Command, path, holder, arg string, check func(node.Snapshot, membership.Member) error,
	act func(context.Context, change, membership.Member) error) error {
	cfg, in, err := openCluster(path)
	if err != nil {
		return err
	}
	defer in.Close()
	ctx := cmd.Context()
	snap, target, err := lookAt(ctx, in, arg, check)
	if err != nil {
		return err
	}
	return withWriterLock(ctx, cfg, in, holder, snap.View, target.ID, func(ctx context.Context, lock etcdclient.Lock) error {
		// The view the rules judged may predate an agent's change.
		fresh, again, err := lookAt(ctx, in, membership.IDString(target.ID), check)
		if err != nil {
			return fmt.Errorf("under the writer lock: %w", err)
		}
		return act(ctx, change{cfg: cfg, pool: in.Pool(), lock: lock, view: fresh.View, out: cmd.OutOrStdout()}, again)
	})
}

// lookAt observes the cluster, finds the target and checks the rules.
func lookAt(ctx context.Context, in *daemon.Inspector, arg string, check func(node.Snapshot, membership.Member) error) (node.Snapshot, membership.Member, error) {
	snap := in.Look(ctx)
	if !snap.View.Reached {
		return snap, membership.Member{}, fmt.Errorf("the cluster has no quorum (or no member answered): no membership change can commit: %s", strings.Join(snap.View.Problems, "; "))
	}
	target, err := resolveMember(snap.View.Members, arg)
	if err != nil {
		return snap, target, err
	}
	if err := check(snap, target); err != nil {
		return snap, target, fmt.Errorf("refused: %s: %w", target, err)
	}
	return snap, target, nil
}

// openCluster loads the agent's configuration and connects the way the
// agent does (its client TLS, its call timeout).
func openCluster(path string) (*config.Config, *daemon.Inspector, error) {
	cfg, err := loadValidConfig(path)
	if err != nil {
		return nil, nil, err
	}
	in, err := daemon.NewInspector(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	return cfg, in, nil
}

// resolveMember finds the one member that TARGET names: by name, by ID in
// hex, or by the IP of its peer URL.
func resolveMember(members []membership.Member, arg string) (membership.Member, error) {
	ip, ipErr := netip.ParseAddr(strings.Trim(arg, "[]"))
	var found []membership.Member
	for _, m := range members {
		byIP := ipErr == nil && memberIP(m) == ip.Unmap()
		if m.Name == arg || membership.IDString(m.ID) == strings.ToLower(arg) || byIP {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		names := make([]string, len(members))
		for i, m := range members {
			names[i] = m.String()
		}
		return membership.Member{}, fmt.Errorf("no member is named, has the ID or the IP %q; members: %s", arg, strings.Join(names, ", "))
	}
	return membership.Member{}, fmt.Errorf("%q names %d members (%v); give the member ID", arg, len(found), found)
}

func memberIP(m membership.Member) netip.Addr {
	for _, u := range m.PeerURLs {
		if ip, ok := identity.IPFromURL(u); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// checkRemove is the rule set of member remove.
func checkRemove(s node.Snapshot, m membership.Member, force bool) error {
	if listed(s.Desired, m) && !force {
		return fmt.Errorf("its IP %s is in the member list in force, and its agent would add it back as a new learner; remove the IP from the list (the agents then remove the member themselves), or pass --force", memberIP(m))
	}
	return s.View.MayRemove(m.ID)
}

func listed(desired []identity.Member, m membership.Member) bool {
	ip := memberIP(m)
	return ip.IsValid() && slices.ContainsFunc(desired, func(d identity.Member) bool { return d.IP.Unmap() == ip })
}

// checkEvict is the rule of member evict-learner.
func checkEvict(m membership.Member) error {
	if !m.IsLearner {
		return errors.New("it is a voter; evict-learner removes learners only (etcdlet member remove checks a voter's removal against quorum)")
	}
	return nil
}

// checkMoveLeader is the rule set of member move-leader: the rule book's
// MayLead, and a leader to hand over from.
func checkMoveLeader(s node.Snapshot, m membership.Member) error {
	if err := s.View.MayLead(m.ID); err != nil {
		return err
	}
	if _, ok := s.View.Member(s.View.LeaderID); !ok {
		return errors.New("the cluster has no leader to hand over from")
	}
	return nil
}

// removeMember removes the target, the leader after handing over.
func removeMember(ctx context.Context, c change, m membership.Member) error {
	if m.ID == c.view.LeaderID {
		to, ok := c.view.Transferee(m.ID, nil, nil)
		if !ok {
			return fmt.Errorf("refused: %s is the leader and no healthy voter that is caught up can take over", m)
		}
		if err := moveLeaderTo(ctx, c, to); err != nil {
			return err
		}
	}
	if err := c.apply(ctx, membership.Action{Kind: membership.ActionRemove, Name: m.Name, MemberID: m.ID}); err != nil {
		return fmt.Errorf("remove member %s: %w", m, err)
	}
	fmt.Fprintf(c.out, "removed member %s\n", m)
	return nil
}

// moveLeaderTo hands leadership to m; MoveLeader returns once it leads.
func moveLeaderTo(ctx context.Context, c change, m membership.Member) error {
	if m.ID == c.view.LeaderID {
		fmt.Fprintf(c.out, "%s leads already\n", m)
		return nil
	}
	if err := c.apply(ctx, membership.Action{Kind: membership.ActionMoveLeader, Name: m.Name, TransfereeID: m.ID}); err != nil {
		return fmt.Errorf("move leadership to %s: %w", m, err)
	}
	fmt.Fprintf(c.out, "moved leadership to %s\n", m)
	return nil
}

// apply makes one change as the agents do: the one Writer, with the
// agents' retry policy, under the writer lock.
func (c change) apply(ctx context.Context, a membership.Action) error {
	w := membership.Writer{Cluster: c.pool, Policy: node.DefaultPolicy(c.cfg.Agent.CallTimeout), Lock: c.lock}
	if res := w.Apply(ctx, c.view.Observation, a, nil); res.Outcome != etcdclient.Done {
		return res.Err
	}
	return nil
}

// withWriterLock runs fn under the agents' writer lock, taken through the
// voters, within agent.lockTTL's locked section as an agent's change. The
// lock's session avoids the target's endpoint when another voter is there:
// a removed member answers no more calls, and the release after a
// successful removal would fail through it.
func withWriterLock(ctx context.Context, cfg *config.Config, in *daemon.Inspector, holder string, v membership.View, target uint64,
	fn func(context.Context, etcdclient.Lock) error) error {
	locker := in.WriterLocker(holder)
	defer locker.Close()
	lock, err := takeLock(ctx, cfg, locker, membership.LockEndpoints(v.Members, target), v.ClusterID)
	if err != nil {
		return err
	}
	section, cancel := context.WithTimeout(ctx, cfg.Agent.LockSection())
	err = fn(section, lock)
	cancel()
	unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Agent.CallTimeout)
	defer cancel()
	if uerr := lock.Unlock(unlockCtx); uerr != nil && err == nil {
		err = uerr
	}
	return err
}

// takeLock takes the writer lock. An agent holds it for one change at a
// time, so a busy lock is tried again until agent.lockTTL has passed.
func takeLock(ctx context.Context, cfg *config.Config, locker *etcdclient.SessionLocker, voters []string, clusterID uint64) (etcdclient.Lock, error) {
	deadline := time.Now().Add(cfg.Agent.LockTTL)
	for {
		lock, err := locker.TryLock(ctx, voters, clusterID)
		if !errors.Is(err, etcdclient.ErrLocked) {
			return lock, err
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("the writer lock stayed held for %s (etcdlet lock status shows by whom): try again", cfg.Agent.LockTTL)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// writeJSON renders v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
