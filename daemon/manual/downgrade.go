package manual

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

// DowngradeAction is what etcdlet etcd downgrade asks of etcd's downgrade
// API (etcd 3.6 and later).
type DowngradeAction string

// The actions, named as etcd names them.
const (
	DowngradeValidate DowngradeAction = "validate"
	DowngradeEnable   DowngradeAction = "enable"
	DowngradeCancel   DowngradeAction = "cancel"
)

// Downgrade validates or enables a downgrade of the cluster version to
// target (one minor below it), or cancels the downgrade enabled.
//
// etcd's own checks (the target is the cluster version's minor less one;
// no downgrade enabled yet) come with rules of the agents' on top, for
// enable: every member a healthy voter that runs, because each member is
// restarted in turn on the older etcd, and a restart while another member
// is down or a learner joins costs quorum or strands the learner on the
// newer etcd. Enable runs under the writer lock, so that no agent adds a
// member meanwhile, and looks again under it.
func (o Operator) Downgrade(ctx context.Context, action DowngradeAction, target string) error {
	if action == DowngradeCancel {
		return o.cancelDowngrade(ctx)
	}
	to, err := downgradeTarget(target)
	if err != nil {
		return err
	}
	snap, err := o.lookForDowngrade(ctx, action, to)
	if err != nil {
		return err
	}
	if action == DowngradeValidate {
		return o.callDowngrade(ctx, DowngradeValidate, to, func(resp *clientv3.DowngradeResponse) {
			fmt.Fprintf(o.Out, "etcd accepts a downgrade of the cluster from version %s to %s (nothing changed)\nnext: etcdlet etcd downgrade enable %s\n",
				clusterMinor(resp.Version), to, to)
		})
	}
	return o.withWriterLock(ctx, "etcdlet etcd downgrade enable", snap.View, 0, func(ctx context.Context, _ etcdclient.Lock) error {
		// An agent may have added a member since the first look.
		if _, err := o.lookForDowngrade(ctx, action, to); err != nil {
			return fmt.Errorf("under the writer lock: %w", err)
		}
		return o.callDowngrade(ctx, DowngradeEnable, to, func(resp *clientv3.DowngradeResponse) {
			fmt.Fprintf(o.Out, "downgrade to %s enabled (the cluster was at %s); every member moves its data to the %s format, and the cluster version goes to %s\n"+
				"next, one host at a time: run etcd %s there (staticPod.image, or the etcdlet package that embeds it), then wait for etcdlet status --wait before the next host\n"+
				"the downgrade ends on its own once every member runs etcd %s; to stop it before that: etcdlet etcd downgrade cancel\n",
				to, clusterMinor(resp.Version), to, to, to, to)
		})
	})
}

// downgradeTarget reads the version a downgrade goes to: major.minor, as
// the cluster version is kept (a patch given is dropped, as etcd does).
func downgradeTarget(target string) (etcdversion.Minor, error) {
	to, ok := etcdversion.Parse(target)
	if !ok || strings.HasPrefix(strings.TrimSpace(target), "v") {
		return to, fmt.Errorf("downgrade target %q: want a version MAJOR.MINOR, such as 3.6", target)
	}
	return to, nil
}

// lookForDowngrade looks at the cluster and checks the rules of action
// against it.
func (o Operator) lookForDowngrade(ctx context.Context, action DowngradeAction, to etcdversion.Minor) (node.Snapshot, error) {
	snap := o.Cluster.Look(ctx)
	if !snap.View.Reached {
		return snap, fmt.Errorf("the cluster has no quorum (or no member answered): the downgrade API needs it: %s", strings.Join(snap.View.Problems, "; "))
	}
	if err := checkDowngrade(snap.View.Members, action, to); err != nil {
		return snap, fmt.Errorf("refused: downgrade to %s: %w", to, err)
	}
	return snap, nil
}

// checkDowngrade is the rule set of etcdlet etcd downgrade validate and
// enable. The cluster version is the lowest of the members' versions;
// etcd downgrades it one minor at a time.
func checkDowngrade(members []membership.Member, action DowngradeAction, to etcdversion.Minor) error {
	if d := downgradeEnabled(members); d != "" {
		return fmt.Errorf("a downgrade to %s is enabled already; etcdlet etcd downgrade cancel ends it", d)
	}
	var versions []string
	for _, m := range members {
		versions = append(versions, m.Health.Version)
	}
	if from, ok := etcdversion.Lowest(versions...); ok && (from.Major != to.Major || from.Minor != to.Minor+1) {
		return fmt.Errorf("the cluster runs etcd %s, and etcd downgrades one minor at a time: the target must be %d.%d", from, from.Major, from.Minor-1)
	}
	if action != DowngradeEnable {
		return nil
	}
	for _, m := range members {
		switch {
		case m.IsLearner:
			return fmt.Errorf("member %s is a learner: let it be promoted, or evict it (etcdlet member evict-learner), before the members are restarted one by one on etcd %s", m, to)
		case !m.Healthy():
			why := strings.Join(append([]string{m.Health.Problem}, m.Health.Alarms...), ", ")
			return fmt.Errorf("member %s is not healthy (%s): each member is restarted in turn on etcd %s, and a restart while another member is down can cost quorum", m, strings.TrimPrefix(why, ", "), to)
		}
	}
	return nil
}

// cancelDowngrade ends the downgrade enabled. etcd answers a cancel with
// success even when no downgrade is enabled (it only logs that), so the
// command says which it was, from the members' own status.
func (o Operator) cancelDowngrade(ctx context.Context) error {
	snap := o.Cluster.Look(ctx)
	if !snap.View.Reached {
		return fmt.Errorf("the cluster has no quorum (or no member answered): the downgrade API needs it: %s", strings.Join(snap.View.Problems, "; "))
	}
	enabled := downgradeEnabled(snap.View.Members)
	if enabled == "" {
		fmt.Fprintln(o.Out, "no downgrade is enabled: nothing to cancel")
		return nil
	}
	err := o.callDowngrade(ctx, DowngradeCancel, etcdversion.Minor{}, func(*clientv3.DowngradeResponse) {})
	if err != nil {
		return err
	}
	if still := downgradeEnabled(o.Cluster.Look(ctx).View.Members); still != "" {
		return fmt.Errorf("etcd took the cancel, but a member still reports a downgrade to %s: it may have missed it yet; run etcdlet status to see", still)
	}
	fmt.Fprintf(o.Out, "downgrade to %s cancelled; members that run the older etcd already keep running it until they are upgraded again\n", enabled)
	return nil
}

// downgradeEnabled is the target of the downgrade a member reports
// enabled, "" when none does.
func downgradeEnabled(members []membership.Member) string {
	for _, m := range members {
		if d := m.Health.DowngradeTarget; d != "" {
			return clusterMinor(d)
		}
	}
	return ""
}

// apiActions are the actions as etcd's client names them.
var apiActions = map[DowngradeAction]clientv3.DowngradeAction{
	DowngradeValidate: clientv3.DowngradeValidate,
	DowngradeEnable:   clientv3.DowngradeEnable,
	DowngradeCancel:   clientv3.DowngradeCancel,
}

// callDowngrade makes one call of etcd's downgrade API on the cluster this
// node belongs to, and reports the answer with done.
func (o Operator) callDowngrade(ctx context.Context, action DowngradeAction, to etcdversion.Minor, done func(*clientv3.DowngradeResponse)) error {
	return o.withClusterClient(ctx, func(ctx context.Context, cli *clientv3.Client, _ uint64) error {
		callCtx, cancel := context.WithTimeout(ctx, o.Settings.CallTimeout)
		defer cancel()
		version := ""
		if !to.IsZero() {
			version = to.String()
		}
		resp, err := cli.Downgrade(callCtx, apiActions[action], version)
		if err != nil {
			return fmt.Errorf("etcd refused the downgrade %s: %w", action, err)
		}
		done(resp)
		return nil
	})
}

// clusterMinor renders a version etcd reports ("3.6.0") as the cluster
// version it stands for ("3.6").
func clusterMinor(v string) string {
	if m, ok := etcdversion.Parse(v); ok {
		return m.String()
	}
	return v
}
