package pacemaker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/test/campaign"
	"github.com/etcdlet/etcdlet/test/harness"
)

// A real two-node corosync + pacemaker cluster with etcdlet on both nodes
// (embedded etcd, TLS), every node a set of namespaces of its own, and a
// fencing that powers the fenced node off. Clients write all along; their
// history is checked by the campaign's linearizability checker at the end.
//
//  1. master-1 powers off (every process of it killed at once): master-0's
//     pacemaker fences it, master-0's agent makes its member the only
//     member of the cluster, keeping every entry of its log, and writes
//     resume on master-0.
//  2. master-1 comes back (a new boot): its member was removed by the
//     failover, so its agent moves the data aside and it joins again as a
//     learner, then a voter.
//  3. The cable between them is cut: both pacemakers fence at once, and
//     the fencing delay on master-1's device lets master-1 win: exactly
//     one node survives, and it fails over. The cable is mended and
//     master-0 comes back and rejoins.
//  4. Both nodes power off, and boot again one after the other, the one
//     that held the cluster last coming last: the first waits (its
//     pacemaker has no quorum until it has seen its peer), and forces
//     nothing; once both run, the cluster is back with both.
func TestTwoNodeFailover(t *testing.T) {
	// The directories first: cleanups run last in, first out, so they are
	// removed only after the nodes' namespaces are gone, with every
	// process in them (an agent entered there with nsenter may outlive
	// the nsenter the harness stops, and write into its data dir while
	// the directory is being removed).
	binDir, clusterDir := t.TempDir(), t.TempDir()
	lc := startClusterWith(t, liveOptions{powerOffWhenFenced: true})
	binary, err := harness.BuildBinary(binDir)
	if err != nil {
		t.Fatal(err)
	}
	c := harness.NewCluster(t, binary, clusterDir, harness.Options{
		Addr:  func(n int) string { return fmt.Sprintf("192.0.2.%d", n) },
		Ports: &harness.Ports{Client: 2379, Peer: 2380, Metrics: 2381, Agent: 9479, AgentPeer: 2382},
		Wrap: func(n int, argv []string) []string {
			return append([]string{"nsenter", "-t", strconv.Itoa(lc.initPID(n - 1)), "-m", "-n", "-u", "-p", "--"}, argv...)
		},
		Dial:              lc.dial,
		ReconcileInterval: time.Second,
		Extra: "pacemaker:\n  enabled: true\n  interval: 1s\n  commandTimeout: 5s\n" +
			"  kubeletResources: [kubelet]\n  etcdResources: [etcd]\n",
	})
	c.WriteMembers(1, 2)
	c.Start(1)
	c.Start(2)
	cli := c.ClientOf(1, 2)
	c.Wait(cli, 2*time.Minute, 1, 2)
	var clis []*clientv3.Client
	for range 3 {
		clis = append(clis, c.ClientOf(1, 2))
	}
	clients := campaign.StartClients(clis, uint64(time.Now().UnixNano()))
	lc.waitFormed(t)
	waitWitness(t, c, time.Now(), 1, 2)

	// 1. master-1 powers off.
	lc.powerOff(t, 1)
	lost := time.Now()
	waitFailover(t, c, cli, 1, lost)

	// 2. master-1 comes back and rejoins.
	lc.startNode(t, 1)
	restartAgent(t, c, 2)
	c.Wait(cli, 2*time.Minute, 1, 2)
	if n := c.Agent(2).CountLog("moved data dir aside; it is kept, not deleted", nil); n != 1 {
		t.Errorf("master-1 moved its data aside %d times on its return, want once (its member was removed by the failover)", n)
	}
	// Pacemaker must know master-1 is back before the next loss: a node
	// it never saw online is not fenced, and then the survivor rightly
	// waits (its member was seen running).
	lc.waitFormed(t)
	waitWitness(t, c, time.Now(), 1, 2)

	// 3. The cable is cut: both fence, master-1 wins.
	lc.cable(t, false)
	cut := time.Now()
	waitFailover(t, c, cli, 2, cut)
	if lc.running(0) {
		t.Errorf("master-0 still runs after both nodes fenced each other; want exactly one survivor")
	}
	lc.cable(t, true)
	lc.startNode(t, 0)
	restartAgent(t, c, 1)
	c.Wait(cli, 2*time.Minute, 1, 2)
	lc.waitFormed(t)
	waitWitness(t, c, time.Now(), 1, 2)

	// 4. Both power off; master-0 boots first, master-1 (which held the
	// cluster alone last) after it.
	coldBoot(t, lc, c, cli, binary, 0)
	// 5. Both power off again; this time master-1 boots first.
	lc.waitFormed(t)
	waitWitness(t, c, time.Now(), 1, 2)
	coldBoot(t, lc, c, cli, binary, 1)
	for n := 1; n <= 2; n++ {
		if got := c.Agent(n).CountLog("two-node failover done: the member is the only member of its cluster; the peer rejoins as a learner when it returns", nil); got > 1 {
			t.Errorf("agent %d failed over %d times, want at most once", n, got)
		}
	}

	summary, violations := clients.Check(cli, 5*time.Minute)
	t.Logf("clients: %s", summary)
	for _, v := range violations {
		t.Errorf("violation: %s", v)
	}
}

// coldBoot powers both nodes off and boots them one after the other,
// node first first (binary is etcdlet's). Alone it has no quorum, in pacemaker or in etcd, and
// forces nothing: its agent and etcdlet status say why it waits. Once the
// other node runs too, the cluster is back with both.
func coldBoot(t *testing.T, lc *liveCluster, c *harness.Cluster, cli *clientv3.Client, binary string, first int) {
	t.Helper()
	second := 1 - first
	lc.powerOff(t, 0)
	lc.powerOff(t, 1)
	lc.startNode(t, first)
	restartAgent(t, c, first+1)
	waits := "two-node failover waits: the cluster has no quorum, and this node does not run its member alone"
	why := map[string]string{"reason": "pacemaker has no quorum on this node: it may be the node that is cut off"}
	before := c.Agent(first+1).CountLog(waits, why)
	harness.Eventually(t, time.Minute, fmt.Sprintf("master-%d says why it does not fail over", first), func() error {
		if c.Agent(first+1).CountLog(waits, why) == before {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	status, _ := exec.Command("nsenter", "-t", strconv.Itoa(lc.initPID(first)), "-m", "-n", "-u", "-p", "--",
		binary, "status", "--config", c.ConfigPath(first+1)).CombinedOutput()
	if !strings.Contains(string(status), "two-node failover: waits: pacemaker has no quorum on this node") {
		t.Errorf("etcdlet status on master-%d alone does not say why the failover waits:\n%s", first, status)
	}
	lc.startNode(t, second)
	restartAgent(t, c, second+1)
	c.Wait(cli, 2*time.Minute, 1, 2)
}

// restartAgent starts agent n again once its process, killed with its
// node, is gone (the harness reaps it a moment after the node's
// namespace died).
func restartAgent(t *testing.T, c *harness.Cluster, n int) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("agent %d's process is gone with its node", n), func() error {
		if c.Agent(n).Running() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	c.Agent(n).Restart()
}

// waitWitness waits until each agent recorded both members healthy after
// since: the failover counts only on a sight of both in the node's current
// boot, and a record from before the node's last boot is no such sight.
func waitWitness(t *testing.T, c *harness.Cluster, since time.Time, ns ...int) {
	t.Helper()
	for _, n := range ns {
		path := filepath.Join(c.StateDir(n), "twonode.json")
		harness.Eventually(t, time.Minute, fmt.Sprintf("agent %d records both members healthy", n), func() error {
			var w state.Witness
			data, err := os.ReadFile(path)
			if err == nil {
				err = json.Unmarshal(data, &w)
			}
			switch {
			case err != nil:
				return err
			case !w.Healthy.After(since):
				return fmt.Errorf("the last record is from %s, before %s", w.Healthy, since)
			}
			return nil
		})
	}
}

// waitFailover waits until agent n, the survivor, failed over and its
// member alone answers writes.
func waitFailover(t *testing.T, c *harness.Cluster, cli *clientv3.Client, n int, since time.Time) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("agent %d fails over and takes writes", n), func() error {
		if c.Agent(n).CountLog("two-node failover done: the member is the only member of its cluster; the peer rejoins as a learner when it returns", nil) == 0 {
			return fmt.Errorf("agent %d has not failed over (%s)", n, lastWait(c.Agent(n)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "/failover/probe", time.Now().String())
		return err
	})
	t.Logf("agent %d failed over; writes resumed %s after the loss", n, time.Since(since).Round(100*time.Millisecond))
}

// waitFormed waits until pacemaker on each node sees both nodes online,
// with quorum: only then does a loss lead to a fencing.
func (c *liveCluster) waitFormed(t *testing.T) {
	t.Helper()
	for i := range c.nodes {
		m := collector(t, c.nodes[i])
		var last string
		waitFor(t, time.Minute, fmt.Sprintf("pacemaker on %s sees both nodes online", c.nodes[i].name), func() bool {
			snap := m.Poll(t.Context())
			if !snap.Known {
				last = snap.Reason
				return false
			}
			last = fmt.Sprintf("quorum %v", snap.Cluster.WithQuorum)
			online := 0
			for _, n := range snap.Cluster.Nodes {
				last += fmt.Sprintf(", %s online %v", n.Name, n.Online)
				if n.Online.IsTrue() {
					online++
				}
			}
			return snap.Cluster.WithQuorum.IsTrue() && online == len(c.nodes)
		}, func() string { return last })
	}
}

// lastWait is the last reason the agent gave for not failing over, and
// its last decision, so that a failover that never comes says why.
func lastWait(a *harness.Agent) string {
	reason, decision := "none logged", "none logged"
	for _, e := range a.LogEntries() {
		switch e["msg"] {
		case "two-node failover waits: the cluster has no quorum, and this node does not run its member alone":
			reason = fmt.Sprint(e["time"], ": ", e["reason"])
		case "local member":
			decision = fmt.Sprint(e["time"], ": ", e["decision"], " (", e["reason"], ")")
		}
	}
	return "last wait: " + reason + "; last decision: " + decision
}

// initPID is node i's init, for nsenter.
func (c *liveCluster) initPID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].initPID
}

// running reports whether node i's processes run.
func (c *liveCluster) running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.nodes[i].down:
		return false
	default:
		return true
	}
}

// dial reaches a node's address from inside its network namespace.
func (c *liveCluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		if n.addr == host {
			return harness.DialInNetns(n.ns)(ctx, network, addr)
		}
	}
	return nil, fmt.Errorf("no node at %s", host)
}

// cable cuts (up false) or mends the link between the nodes.
func (c *liveCluster) cable(t *testing.T, up bool) {
	t.Helper()
	state := map[bool]string{true: "up", false: "down"}[up]
	for _, n := range c.nodes {
		run(t, "ip", "-n", n.ns, "link", "set", n.veth, state)
	}
}
