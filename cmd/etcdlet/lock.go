package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/manual"
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
			return withOperator(cmd, path, func(o manual.Operator) error {
				st, err := o.ReadLock(cmd.Context(), whichLock(taskLock))
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
			return withOperator(cmd, path, func(o manual.Operator) error {
				st, broke, err := o.BreakLock(cmd.Context(), whichLock(taskLock), yes, force)
				out := cmd.OutOrStdout()
				if st.Lock != "" { // read, whether broken or refused
					writeLock(out, st)
				}
				if broke {
					fmt.Fprintf(out, "broke the %s: revoked lease %s of %s\n", st.Lock, st.Lease, st.HolderName())
				}
				return err
			})
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&yes, "yes", false, "break the lock if it is stale")
	cmd.Flags().BoolVar(&force, "force", false, "break the lock whoever holds it, stale or not")
	cmd.Flags().BoolVar(&taskLock, "task", false, "the cluster-wide task lock instead of the writer lock")
	return cmd
}

func whichLock(task bool) manual.Which {
	if task {
		return manual.TaskLock
	}
	return manual.WriterLock
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
