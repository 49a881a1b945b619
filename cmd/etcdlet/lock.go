package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

func newLockCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Show or break the agents' writer lock, or the task lock",
		Long: `Every membership change an agent makes (and etcdlet member remove,
evict-learner, move-leader) happens under one cluster-wide writer lock: an
etcd mutex under the key /etcdlet/_id/<cluster ID>/membership-lock (by the
cluster's ID: a node configured with another cluster.name contends for the
same lock), on a
lease of agent.lockTTL that the holder keeps alive. The holder records
itself in the lock key's value: who (the agent's host, or the operator
command), its host and process ID, and when it took the lock; etcd keeps no
time and no owner of a key.

An agent holds the lock for one change only: its locked section ends
within agent.lockTTL. A holder that dies releases the lock when its lease
expires, at most agent.lockTTL later; nothing needs breaking then. A lock
held much longer is stale: a holder that hangs while its lease is kept
alive.

With --task, the commands are about the cluster-wide task lock instead:
the key /etcdlet/<cluster.name>/task-lock, which the running ops task
(snapshot, defrag, compact, member-restart) holds on a lease its agent
keeps alive, with the same holder record plus the task's ID and type. A
task holds it for as long as it runs, within its timeout, so only a lease
that is gone makes it stale.`,
	}
	cmd.AddCommand(newLockStatusCommand(), newLockBreakCommand())
	return cmd
}

func newLockStatusCommand() *cobra.Command {
	var (
		path, output string
		taskLock     bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show who holds the writer lock (or --task the task lock), since when, and whether it is stale",
		Long: `Show whether the writer lock is held and, when it is: the holder (who,
host, process ID), when it was taken and for how long it has been held,
its lease (ID, granted and remaining TTL), the lock key and its create
revision, and whether the lock is stale: held for longer than twice its
lease's TTL (an agent's locked section ends within one; the second covers
clocks that differ between hosts), or on a lease that is gone.

The cluster is asked through the member list in force and node.address,
with the agent's client TLS (--config).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: must be table or json", output)
			}
			return withLockClient(cmd.Context(), path, taskLock, func(ctx context.Context, cli *clientv3.Client, read readLock, _ time.Duration) error {
				st, err := read(ctx, cli)
				if err != nil {
					return err
				}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), st)
				}
				writeLock(cmd.OutOrStdout(), st)
				return nil
			})
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().BoolVar(&taskLock, "task", false, "the cluster-wide task lock instead of the writer lock")
	return cmd
}

func newLockBreakCommand() *cobra.Command {
	var (
		path                 string
		yes, force, taskLock bool
	)
	cmd := &cobra.Command{
		Use:   "break",
		Short: "Free a stale writer lock (--yes), or any held one (--force)",
		Long: `Free the writer lock by revoking its holder's lease, which deletes the
lock key. Refused without --yes or --force. With --yes only a stale lock
is broken (see etcdlet lock status): one held for longer than twice its
lease's TTL, or whose lease is gone. With --force the lock is broken
whoever holds it and for however long.

What a live holder does then: an agent confirms the lock before every
membership call (a linearizable read of its key and of its lease's time to
live) and makes the call only if it fits in that time, so a broken lock
stops it before its next call; a call already sent completes, and it is
one change, the one that agent's plan chose as safe. The agent takes the
lock again, on a new lease, on its next pass. Breaking a lock is therefore
never needed for a holder that died (its lease expires within
agent.lockTTL); it is for a holder that hangs with its lease kept alive.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLockClient(cmd.Context(), path, taskLock, func(ctx context.Context, cli *clientv3.Client, read readLock, timeout time.Duration) error {
				st, err := read(ctx, cli)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				writeLock(out, st)
				if err := st.MayBreak(yes, force); err != nil {
					return err
				}
				if !st.Held {
					return nil
				}
				if err := etcdclient.BreakLock(ctx, cli, st, timeout); err != nil {
					return err
				}
				fmt.Fprintf(out, "broke the %s: revoked lease %s of %s\n", st.Lock, st.Lease, st.HolderName())
				return nil
			})
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&yes, "yes", false, "break the lock if it is stale")
	cmd.Flags().BoolVar(&force, "force", false, "break the lock whoever holds it, stale or not")
	cmd.Flags().BoolVar(&taskLock, "task", false, "the cluster-wide task lock instead of the writer lock")
	return cmd
}

// readLock reads one lock and judges it now.
type readLock func(context.Context, *clientv3.Client) (etcdclient.LockStatus, error)

// withLockClient connects with the agent's configuration and runs fn
// with the reader of the writer lock (or with taskLock the task lock)
// and the call timeout.
func withLockClient(ctx context.Context, path string, taskLock bool, fn func(context.Context, *clientv3.Client, readLock, time.Duration) error) error {
	cfg, in, err := openCluster(path)
	if err != nil {
		return err
	}
	defer in.Close()
	cli, err := in.Pool().NewMulti(in.ClientEndpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	// The lock's key derives from the cluster's ID, which every answer
	// carries; it must be the cluster this node belongs to, when it
	// belongs to one.
	idCtx, cancel := context.WithTimeout(ctx, cfg.Agent.CallTimeout)
	id, err := etcdclient.ClusterIDOf(idCtx, cli)
	cancel()
	if err != nil {
		return err
	}
	if pinned := in.State.ClusterID; pinned != "" && pinned != strconv.FormatUint(id, 16) {
		return fmt.Errorf("the endpoints answer for cluster %x, but this node belongs to cluster %s: not touching another cluster's lock", id, pinned)
	}
	read := func(ctx context.Context, cli *clientv3.Client) (etcdclient.LockStatus, error) {
		var st etcdclient.LockStatus
		var err error
		if taskLock {
			st, err = etcdclient.ReadTaskLock(ctx, cli, etcdclient.TaskLockKey(cfg.Cluster.Name))
		} else {
			st, err = etcdclient.ReadLock(ctx, cli, etcdclient.WriterLockKey(id))
		}
		st.Judge(time.Now())
		return st, err
	}
	return fn(ctx, cli, read, cfg.Agent.CallTimeout)
}

func writeLock(w io.Writer, st etcdclient.LockStatus) {
	if !st.Held {
		fmt.Fprintf(w, "%s %s: free (revision %d)\n", st.Lock, st.Prefix, st.Revision)
		return
	}
	fmt.Fprintf(w, "%s %s: held\n", st.Lock, st.Prefix)
	fmt.Fprintf(w, "  holder:   %s\n", st.HolderName())
	if st.Holder != nil {
		fmt.Fprintf(w, "  acquired: %s (%s ago)\n", st.Holder.Acquired.Local().Format(time.RFC3339), st.HeldFor)
	}
	fmt.Fprintf(w, "  lease:    %s, granted TTL %ds, remaining %ds\n", st.Lease, st.GrantedTTL, st.RemainingTTL)
	fmt.Fprintf(w, "  key:      %s, created at revision %d (now %d)\n", st.Key, st.CreateRevision, st.Revision)
	if st.Waiting > 0 {
		fmt.Fprintf(w, "  waiting:  %d other contender(s)\n", st.Waiting)
	}
	stale := "no"
	if st.Stale {
		stale = "yes"
	}
	fmt.Fprintf(w, "  stale:    %s: %s\n", stale, st.Why)
}
