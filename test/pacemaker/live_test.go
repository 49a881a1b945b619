package pacemaker

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/runner"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	"github.com/etcdlet/etcdlet/internal/eventually"
	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLiveNodeLossUncleanThenFenced starts a real two-node cluster, waits
// for the collector on master-0 to report it healthy, kills master-1's
// corosync, and follows master-0's status through unclean to fenced,
// feeding every built object back as the stored one, as the daemon does.
// master-1's own collector must meanwhile report an unknown state.
func TestLiveNodeLossUncleanThenFenced(t *testing.T) {
	c := startCluster(t)
	m0, m1 := collector(t, c.nodes[0]), collector(t, c.nodes[1])
	ctx := t.Context()

	var stored status.Object
	var last *etcdv1.PacemakerCluster
	poll := func() *etcdv1.PacemakerCluster {
		snap := m0.Poll(ctx)
		if !snap.Known {
			t.Logf("master-0 poll: unknown: %s", snap.Reason)
			return nil
		}
		obj, err := m0.Build(snap, stored, time.Now())
		if err != nil {
			t.Fatalf("Build: %v", err) // every status must pass the CRD's rules
		}
		stored, last = obj, obj.(*etcdv1.PacemakerCluster)
		return last
	}

	// 1. Healthy: DC elected, resources and fencing devices started.
	waitFor(t, 60*time.Second, "the cluster to be reported healthy", func() bool {
		o := poll()
		return o != nil && cond(o, "", "Healthy").Status == metav1.ConditionTrue
	}, func() string { return describe(last) })
	wantAddresses := map[string]string{"master-0": "192.0.2.1", "master-1": "192.0.2.2"}
	wantAgents := map[string]string{"master-0": "master-0_redfish/Redfish", "master-1": "master-1_ipmilan/IPMI"}
	for _, n := range *last.Status.Nodes {
		if got := n.Addresses[0].Address; got != wantAddresses[n.NodeName] {
			t.Errorf("%s address = %s, want corosync's ring0 %s", n.NodeName, got, wantAddresses[n.NodeName])
		}
		if len(n.FencingAgents) != 1 || fmt.Sprintf("%s/%s", n.FencingAgents[0].Name, n.FencingAgents[0].Method) != wantAgents[n.NodeName] {
			t.Errorf("%s fencing agents = %+v, want %s (target from pcmk_host_list, not where it runs)", n.NodeName, n.FencingAgents, wantAgents[n.NodeName])
		}
	}

	// 2. master-1 loses corosync: unclean until fenced (3 s fencing delay).
	c.killCorosync(t, c.nodes[1])
	killed := time.Now()
	var uncleanSeen, offlineAt time.Time
	waitFor(t, 45*time.Second, "master-1 to be reported unclean, then fenced", func() bool {
		o := poll()
		if o == nil {
			return false
		}
		online, clean := cond(o, "master-1", "Online"), cond(o, "master-1", "Clean")
		if online.Status == metav1.ConditionFalse && offlineAt.IsZero() {
			offlineAt = online.LastTransitionTime.Time
		}
		if clean.Status == metav1.ConditionFalse && uncleanSeen.IsZero() {
			uncleanSeen = time.Now()
			t.Logf("unclean after %s: %s", time.Since(killed).Round(100*time.Millisecond), clean.Message)
			if msg := cond(o, "master-1/resource/Etcd", "Started").Message; !strings.Contains(msg, "as far as pacemaker last knew") {
				t.Errorf("etcd on the unclean node: %q, want its last known state marked as such", msg)
			}
			if h := cond(o, "", "Healthy"); h.Status != metav1.ConditionFalse {
				t.Errorf("cluster Healthy = %s while master-1 is unclean", h.Status)
			}
		}
		return !uncleanSeen.IsZero() && clean.Status == metav1.ConditionTrue &&
			strings.Contains(clean.Message, "last fenced (reboot) by master-0")
	}, func() string { return describe(last) })
	t.Logf("fenced after %s", time.Since(killed).Round(100*time.Millisecond))

	// 3. The fenced node: offline, clean, its resources stopped, not failed;
	// Online kept the lastTransitionTime of the moment it went offline. The
	// survivor runs etcd but can no longer be fenced: its device may only
	// run on master-1.
	for _, w := range []struct {
		path, typ string
		status    metav1.ConditionStatus
	}{
		{"master-1", "Online", metav1.ConditionFalse},
		{"master-1", "Clean", metav1.ConditionTrue},
		{"master-1/resource/Etcd", "Started", metav1.ConditionFalse},
		{"master-1/resource/Etcd", "Operational", metav1.ConditionTrue},
		{"master-0", "Online", metav1.ConditionTrue},
		{"master-0/resource/Etcd", "Started", metav1.ConditionTrue},
		{"master-0", "FencingAvailable", metav1.ConditionFalse},
	} {
		if got := cond(last, w.path, w.typ); got.Status != w.status {
			t.Errorf("%s %s = %s (%s), want %s", w.path, w.typ, got.Status, got.Message, w.status)
		}
	}
	if got := cond(last, "master-1", "Online").LastTransitionTime.Time; !got.Equal(offlineAt) {
		t.Errorf("Online lastTransitionTime moved from %s to %s without a status change", offlineAt, got)
	}

	// 4. On master-1 itself pacemaker lost its cluster: unknown, promptly.
	start := time.Now()
	snap := m1.Poll(ctx)
	if snap.Known || snap.Reason == "" {
		t.Errorf("master-1's own poll: known=%v reason=%q; want unknown with a reason", snap.Known, snap.Reason)
	}
	// Its commands run at once, each bounded by the command timeout: a
	// poll that takes longer than two of them has stalled.
	if d := time.Since(start); d > 2*liveCommandTimeout {
		t.Errorf("master-1's poll took %s, more than twice the command timeout (%s)", d, liveCommandTimeout)
	}
	t.Logf("master-1's own view: %s", snap.Reason)
}

// liveCommandTimeout bounds each pacemaker command of the live cluster's
// collectors.
const liveCommandTimeout = 5 * time.Second

func collector(t testing.TB, n *liveNode) *pacemaker.Collector {
	t.Helper()
	o := config.DefaultPacemaker()
	// Both resources are ocf:pacemaker:Dummy here: select them by id.
	o.KubeletResources, o.EtcdResources = []string{"kubelet"}, []string{"etcd"}
	o.CommandTimeout = liveCommandTimeout
	c, err := pacemaker.NewCollector(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.Runner = nsRunner{inner: runner.Exec{Timeout: o.CommandTimeout, MaxOutput: o.MaxOutputBytes}, pid: n.initPID}
	return c
}

// waitFor waits until check holds; at the deadline it fails with the last
// status. check runs pacemaker's tools: at most one try every 250ms.
func waitFor(t testing.TB, within time.Duration, what string, check func() bool, state func() string) {
	t.Helper()
	var last time.Time
	eventually.Nil(t, within, what, func() error {
		time.Sleep(time.Until(last.Add(250 * time.Millisecond)))
		last = time.Now()
		if check() {
			return nil
		}
		return lastStatus(state)
	})
}

// lastStatus asks for the status only when the failure is reported.
type lastStatus func() string

func (s lastStatus) Error() string { return "last status:\n" + s() }

// cond returns the condition at path ("" cluster, "<node>",
// "<node>/resource/<name>").
func cond(o *etcdv1.PacemakerCluster, path, typ string) metav1.Condition {
	var conds []metav1.Condition
	if path == "" {
		conds = o.Status.Conditions
	}
	for _, n := range *o.Status.Nodes {
		if path == n.NodeName {
			conds = n.Conditions
		}
		for _, r := range n.Resources {
			if path == n.NodeName+"/resource/"+string(r.Name) {
				conds = r.Conditions
			}
		}
	}
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

func describe(o *etcdv1.PacemakerCluster) string {
	if o == nil {
		return "(none built)"
	}
	var b strings.Builder
	if err := pacemaker.Render(&b, o, pacemaker.FormatTable); err != nil {
		return err.Error()
	}
	return b.String()
}

// BenchmarkLivePoll is the wall time of one full poll (crm_mon, cibadmin
// and corosync-cmapctl, concurrently, each through nsenter) of the live
// two-node cluster.
//
//	go test ./test/pacemaker -run '^$' -bench LivePoll -benchtime 50x
func BenchmarkLivePoll(b *testing.B) {
	c := startCluster(b)
	m0 := collector(b, c.nodes[0])
	waitFor(b, 60*time.Second, "the cluster to come up", func() bool {
		snap := m0.Poll(b.Context())
		if !snap.Known || len(snap.Cluster.Nodes) != 2 {
			return false
		}
		obj, err := m0.Build(snap, nil, time.Now())
		return err == nil && cond(obj.(*etcdv1.PacemakerCluster), "", "Healthy").Status == metav1.ConditionTrue
	}, func() string { return "" })
	b.ReportAllocs()
	for b.Loop() {
		if snap := m0.Poll(b.Context()); !snap.Known {
			b.Fatal(snap.Reason)
		}
	}
}
