package main

import (
	"context"
	"errors"
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
		Short: "Show or break the agents' writer lock",
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
alive.`,
	}
	cmd.AddCommand(newLockStatusCommand(), newLockBreakCommand())
	return cmd
}

func newLockStatusCommand() *cobra.Command {
	var path, output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show who holds the writer lock, since when, and whether it is stale",
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
			return withLockClient(cmd.Context(), path, func(ctx context.Context, cli *clientv3.Client, key string, _ time.Duration) error {
				st, err := readLock(ctx, cli, key)
				if err != nil {
					return err
				}
				st.judge(time.Now())
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
	return cmd
}

func newLockBreakCommand() *cobra.Command {
	var (
		path       string
		yes, force bool
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
			return withLockClient(cmd.Context(), path, func(ctx context.Context, cli *clientv3.Client, key string, timeout time.Duration) error {
				st, err := readLock(ctx, cli, key)
				if err != nil {
					return err
				}
				st.judge(time.Now())
				out := cmd.OutOrStdout()
				writeLock(out, st)
				if err := checkBreak(st, yes, force); err != nil {
					return err
				}
				if !st.Held {
					return nil
				}
				if err := breakLock(ctx, cli, st, timeout); err != nil {
					return err
				}
				fmt.Fprintf(out, "broke the writer lock: revoked lease %s of %s\n", st.Lease, st.holderName())
				return nil
			})
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&yes, "yes", false, "break the lock if it is stale")
	cmd.Flags().BoolVar(&force, "force", false, "break the lock whoever holds it, stale or not")
	return cmd
}

// lockState is the writer lock as read from etcd.
type lockState struct {
	Prefix string `json:"prefix"`
	Held   bool   `json:"held"`
	// Key is the holder's mutex key; Lease its lease, in hex.
	Key            string                 `json:"key,omitempty"`
	Lease          string                 `json:"lease,omitempty"`
	LeaseID        clientv3.LeaseID       `json:"-"`
	CreateRevision int64                  `json:"createRevision,omitempty"`
	Revision       int64                  `json:"revision"`
	Holder         *etcdclient.LockHolder `json:"holder,omitempty"`
	GrantedTTL     int64                  `json:"grantedTTLSeconds,omitempty"`
	RemainingTTL   int64                  `json:"remainingTTLSeconds,omitempty"`
	HeldFor        string                 `json:"heldFor,omitempty"`
	Stale          bool                   `json:"stale"`
	// Why says why the lock is or is not stale.
	Why string `json:"why,omitempty"`
	// Waiting counts other contenders' keys (a contender deletes its
	// key at once when the lock is held, so this is rarely non-zero).
	Waiting int `json:"waiting,omitempty"`
}

// withLockClient connects with the agent's configuration and runs fn
// with the lock prefix and the call timeout.
func withLockClient(ctx context.Context, path string, fn func(context.Context, *clientv3.Client, string, time.Duration) error) error {
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
	resp, err := cli.Get(idCtx, etcdclient.ClusterKeys(0), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return fmt.Errorf("ask the cluster for its ID: %w", err)
	}
	id := resp.Header.ClusterId
	if pinned := in.State.ClusterID; pinned != "" && pinned != strconv.FormatUint(id, 16) {
		return fmt.Errorf("the endpoints answer for cluster %x, but this node belongs to cluster %s: not touching another cluster's lock", id, pinned)
	}
	return fn(ctx, cli, etcdclient.WriterLockKey(id), cfg.Agent.CallTimeout)
}

// readLock reads the lock keys and the holder's lease, linearizable. The
// holder is the key created first, as in etcd's mutex.
func readLock(ctx context.Context, cli *clientv3.Client, prefix string) (lockState, error) {
	st := lockState{Prefix: prefix}
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return st, fmt.Errorf("read writer lock %s: %w", prefix, err)
	}
	st.Revision = resp.Header.Revision
	if len(resp.Kvs) == 0 {
		return st, nil
	}
	kv := resp.Kvs[0]
	st.Held, st.Key, st.CreateRevision, st.Waiting = true, string(kv.Key), kv.CreateRevision, len(resp.Kvs)-1
	st.LeaseID = clientv3.LeaseID(kv.Lease)
	st.Lease = strconv.FormatInt(kv.Lease, 16)
	if h, ok := etcdclient.ParseLockHolder(kv.Value); ok {
		st.Holder = &h
	}
	if st.LeaseID == clientv3.NoLease {
		return st, nil
	}
	ttl, err := cli.TimeToLive(ctx, st.LeaseID)
	if err != nil {
		return st, fmt.Errorf("read writer lock lease %s: %w", st.Lease, err)
	}
	st.GrantedTTL, st.RemainingTTL = ttl.GrantedTTL, ttl.TTL
	return st, nil
}

// judge says whether a held lock is stale, and why.
func (st *lockState) judge(now time.Time) {
	switch {
	case !st.Held:
		st.Why = "the lock is free"
	case st.LeaseID == clientv3.NoLease || st.RemainingTTL <= 0:
		st.Stale, st.Why = true, "its lease is gone: the key outlived its holder"
	case st.Holder == nil:
		st.Why = "the key's value names no holder and no time (an etcdlet older than this one took it): its age is unknown; it is released when its lease expires"
	default:
		held := now.Sub(st.Holder.Acquired)
		limit := 2 * time.Duration(st.GrantedTTL) * time.Second
		st.HeldFor = held.Round(time.Second).String()
		if held > limit {
			st.Stale, st.Why = true, fmt.Sprintf("held for %s, longer than twice its lease's TTL (%s): no holder's locked section lasts that long", st.HeldFor, limit/2)
		} else {
			st.Why = fmt.Sprintf("held for %s, within twice its lease's TTL (%s): the holder may be mid-change", st.HeldFor, limit/2)
		}
	}
}

func (st lockState) holderName() string {
	if st.Holder == nil {
		return "an unnamed holder"
	}
	return fmt.Sprintf("%s (host %s, pid %d)", st.Holder.Holder, st.Holder.Host, st.Holder.PID)
}

// checkBreak is the rule of lock break.
func checkBreak(st lockState, yes, force bool) error {
	switch {
	case !yes && !force:
		return errors.New("refused: breaking the writer lock needs --yes (only a stale lock) or --force (any lock)")
	case !st.Held || force || st.Stale:
		return nil
	}
	return fmt.Errorf("refused: the lock is not stale (%s); wait for it, or pass --force", st.Why)
}

// breakLock revokes the holder's lease (deleting the key and ending the
// holder's session), or for a key without a lease deletes it, in both
// cases only if it is still the key that was read.
func breakLock(ctx context.Context, cli *clientv3.Client, st lockState, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if st.LeaseID != clientv3.NoLease {
		if _, err := cli.Revoke(ctx, st.LeaseID); err != nil {
			return fmt.Errorf("break writer lock: revoke lease %s: %w", st.Lease, err)
		}
		return nil
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(st.Key), "=", st.CreateRevision)).
		Then(clientv3.OpDelete(st.Key)).Commit()
	switch {
	case err != nil:
		return fmt.Errorf("break writer lock: delete %s: %w", st.Key, err)
	case !resp.Succeeded:
		return fmt.Errorf("break writer lock: %s changed since it was read; look again", st.Key)
	}
	return nil
}

func writeLock(w io.Writer, st lockState) {
	if !st.Held {
		fmt.Fprintf(w, "writer lock %s: free (revision %d)\n", st.Prefix, st.Revision)
		return
	}
	fmt.Fprintf(w, "writer lock %s: held\n", st.Prefix)
	fmt.Fprintf(w, "  holder:   %s\n", st.holderName())
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
