package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/daemon/tasks"
)

func newTaskCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Run and inspect ops tasks (snapshot, defrag, compact) through the running agent",
		Long: `Ops tasks run inside the agent, one at a time per cluster: a second task,
on this node or any other, is rejected while one runs, naming it. A task
goes Pending → InProgress → Succeeded or Failed, or Pending → Rejected
(/usr/share/doc/etcdlet/operations.md). Its state is kept in the agent's state dir, so an
agent restarted in the middle resumes it.

These commands talk to the agent listener (agent.listen) with the token
the agent keeps in its state dir: run them as root on the node.`,
	}
	cmd.AddCommand(newTaskRunCommand(), newTaskListCommand(), newTaskStatusCommand(), newTaskCancelCommand())
	return cmd
}

type taskFlags struct {
	path    string
	timeout time.Duration
	detach  bool
}

func newTaskRunCommand() *cobra.Command {
	var f taskFlags
	cmd := &cobra.Command{
		Use:   "run TYPE",
		Short: "Run a task and wait for it, showing its progress",
		Long: `Run a task and wait until it completes, showing what it does; the exit
code is 0 when it succeeded, 1 when it failed or was rejected. Interrupting
the wait (Ctrl-C) does not stop the task: 'etcdlet task cancel ID' does.`,
	}
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 0, "the task's timeout from submission to completion (default: the type's, from the tasks section)")
	cmd.PersistentFlags().BoolVar(&f.detach, "detach", false, "print the task's ID and return at once instead of waiting")
	addConfigFlagTo(cmd.PersistentFlags(), &f.path)
	cmd.MarkFlagsMutuallyExclusive("config", "instance")

	var kind string
	var final bool
	snapshotCmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Take a full or delta snapshot to the configured store",
		Long: `Take a snapshot in etcd-backup-restore's format and store it in backup.store
as <prefix>/v2/Full-<0>-<last rev>-<unix>.gz (full) or
<prefix>/v2/Incr-<first rev>-<last rev>-<unix>.gz (delta: the events since
the newest stored snapshot; "skipped" when there are none). The snapshot is
streamed from the voting follower with the least lag, never the leader
unless it is the only member. A full snapshot prunes old ones by
backup.retention.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kind != "full" && kind != "delta" {
				return fmt.Errorf("--kind %q: must be full or delta", kind)
			}
			p := map[string]string{ops.ParamKind: kind}
			if final {
				p[ops.ParamFinal] = "true"
			}
			return runTask(cmd, f, "snapshot", p)
		},
	}
	snapshotCmd.Flags().StringVar(&kind, "kind", "full", "full or delta")
	snapshotCmd.Flags().BoolVar(&final, "final", false, "mark the full snapshot final (the last one before the cluster goes away)")

	var threshold float64
	var allowUnavailable bool
	defragCmd := &cobra.Command{
		Use:   "defrag",
		Short: "Defragment every member, one at a time, never below quorum",
		Long: `Defragment the members one at a time: followers first, then the leader after
it handed leadership to a follower. A member is skipped when less than
--threshold of its backend is free; it waits while the others alone would
not keep quorum (a defragmenting member stalls). One- and two-member
clusters lose quorum while a member defragments: they are refused unless
--allow-unavailable. A NOSPACE alarm is disarmed once there is room again.
An agent restarted in the middle goes on with the next member.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := map[string]string{}
			if cmd.Flags().Changed("threshold") {
				p[ops.ParamThreshold] = strconv.FormatFloat(threshold, 'f', -1, 64)
			}
			if allowUnavailable {
				p[ops.ParamAllowUnavailable] = "true"
			}
			return runTask(cmd, f, "defrag", p)
		},
	}
	defragCmd.Flags().Float64Var(&threshold, "threshold", config.DefaultDefragThreshold, "free fraction of a member's backend below which it is skipped (0: defragment every member; default tasks.defrag.threshold)")
	defragCmd.Flags().BoolVar(&allowUnavailable, "allow-unavailable", false, "defragment even when the cluster cannot keep quorum without the member (writes stall meanwhile)")

	var retain int64
	compactCmd := &cobra.Command{
		Use:   "compact",
		Short: "Compact the keyspace, keeping the newest revisions readable",
		Long: `Compact the keyspace up to the current revision less --retain, and wait until
the compaction is applied. Kubernetes' API server compacts on its own
every 5 minutes; this is for clusters without one, and before a defrag.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := map[string]string{}
			if cmd.Flags().Changed("retain") {
				p[ops.ParamRetain] = strconv.FormatInt(retain, 10)
			}
			return runTask(cmd, f, "compact", p)
		},
	}
	compactCmd.Flags().Int64Var(&retain, "retain", config.DefaultCompactRetain, "revisions before the current one that stay readable (default tasks.compact.retain)")
	cmd.AddCommand(snapshotCmd, defragCmd, compactCmd)
	return cmd
}

// newTaskClientCommand is a task command that talks to the agent.
func newTaskClientCommand(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, c *tasks.Client, args []string) error) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newTaskClient(path)
			if err != nil {
				return err
			}
			return rejectedExits(run(cmd, c, args))
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}

func newTaskListCommand() *cobra.Command {
	return newTaskClientCommand("list", "List this node's recent tasks", cobra.NoArgs, func(cmd *cobra.Command, c *tasks.Client, _ []string) error {
		list, err := c.List(cmd.Context())
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTYPE\tSTATE\tSOURCE\tCREATED\tDESCRIPTION")
		for _, t := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Type, t.Phase, t.Source, t.CreatedAt.Local().Format(time.DateTime), t.LastOperation.Description)
		}
		return w.Flush()
	})
}

func newTaskStatusCommand() *cobra.Command {
	return newTaskClientCommand("status ID", "Show one task in full (JSON): state, last operation, last errors, output", cobra.ExactArgs(1),
		func(cmd *cobra.Command, c *tasks.Client, args []string) error {
			t, err := c.TaskJSON(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var out bytes.Buffer
			_ = json.Indent(&out, t, "", "  ")
			out.WriteByte('\n')
			_, err = cmd.OutOrStdout().Write(out.Bytes())
			return err
		})
}

func newTaskCancelCommand() *cobra.Command {
	return newTaskClientCommand("cancel ID", "Cancel a task: a pending one is rejected, a running one fails as soon as its step returns", cobra.ExactArgs(1),
		func(cmd *cobra.Command, c *tasks.Client, args []string) error {
			t, err := c.Cancel(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s: cancel requested (state %s)\n", t.ID, t.Phase)
			return nil
		})
}

// runTask submits a task and, unless detached, follows it to its end.
func runTask(cmd *cobra.Command, f taskFlags, typ string, params map[string]string) error {
	c, err := newTaskClient(f.path)
	if err != nil {
		return err
	}
	t, err := c.Submit(cmd.Context(), task.Request{Type: typ, Params: params, Timeout: task.Duration(f.timeout), Source: "cli"})
	if err != nil {
		return rejectedExits(err)
	}
	out := cmd.OutOrStdout()
	if f.detach {
		fmt.Fprintln(out, t.ID)
		return nil
	}
	fmt.Fprintf(out, "task %s (%s) submitted\n", t.ID, typ)
	last := ""
	for {
		line := fmt.Sprintf("%s: %s %s", t.Phase, t.LastOperation.Type, t.LastOperation.Description)
		if line != last {
			fmt.Fprintf(out, "%s  %s\n", time.Now().Format(time.TimeOnly), line)
			last = line
		}
		if t.Phase.Completed() && t.Cleaned {
			break
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(500 * time.Millisecond):
		}
		if t, err = c.Task(cmd.Context(), t.ID); err != nil {
			return err
		}
	}
	for _, e := range t.LastErrors {
		fmt.Fprintf(out, "  error %s at %s: %s\n", e.Code, e.ObservedAt.Local().Format(time.TimeOnly), e.Description)
	}
	if len(t.Output) > 0 && string(t.Output) != "null" {
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, t.Output, "", "  ")
		fmt.Fprintf(out, "output:\n%s\n", pretty.String())
	}
	if t.Phase != task.Succeeded {
		return &exitError{code: 1, err: fmt.Errorf("task %s %s: %s", t.ID, t.Phase, t.LastOperation.Description)}
	}
	return nil
}

// newTaskClient is a client of the agent the configuration at path runs.
func newTaskClient(path string) (*tasks.Client, error) {
	cfg, err := loadValidConfig(path)
	if err != nil {
		return nil, err
	}
	return tasks.NewClient(cfg.Agent)
}

// rejectedExits makes a rejected task exit 1, as a failed one does.
func rejectedExits(err error) error {
	if rejected, ok := errors.AsType[*tasks.RejectedError](err); ok {
		return &exitError{code: 1, err: rejected}
	}
	return err
}
