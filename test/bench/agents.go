package main

import (
	"fmt"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// The 127.0.<n>.0/24 networks of the benchmark's clusters.
const (
	netAgents = 200 + iota
	netFloor
	netReady
	netStaticPod
)

// connectedSettle waits out etcd's rule that a membership change is
// refused until every voter has been connected for 5s, on both sides
// alike, so that the first cycle measures the change and not the rule.
const connectedSettle = 6 * time.Second

// warmDown lets start-up work (first compactions, the first passes) end
// before an idle window begins, on every side alike.
const warmDown = 5 * time.Second

// membershipFigures are one side's join and leave times.
type membershipFigures struct {
	join, leave []time.Duration
}

// measureAgents runs four agents with etcdlet's defaults (embedded
// runtime), three listed, and times cycles of listing the fourth and
// unlisting it again: from the members-file write to the observation of
// the fourth member a voter, and gone. Then it measures the idle cost of
// the three agents (each an agent with its etcd member in-process).
func measureAgents(t *tb, binary, dir string, runs int, idle time.Duration) (membershipFigures, usage) {
	c := harness.NewCluster(t, binary, dir, harness.Options{Net: netAgents, Defaults: true})
	c.WriteMembers(1, 2, 3)
	for n := 1; n <= 4; n++ {
		c.WriteConfig(n)
		c.Start(n)
	}
	obs := newObserver(t, []string{c.ClientURL(1), c.ClientURL(2), c.ClientURL(3)})
	c.Wait(c.Client(), changeDeadline, 1, 2, 3)
	time.Sleep(connectedSettle)
	fourth := c.PeerURL(4)

	var f membershipFigures
	for i := range runs {
		start := time.Now()
		c.WriteMembers(1, 2, 3, 4)
		f.join = append(f.join, obs.waitFor(fourth, voter).Sub(start))
		c.Wait(c.Client(), changeDeadline, 1, 2, 3, 4)

		start = time.Now()
		c.WriteMembers(1, 2, 3)
		f.leave = append(f.leave, obs.waitFor(fourth, absent).Sub(start))
		c.Wait(c.Client(), changeDeadline, 1, 2, 3)
		// The next cycle starts once agent 4 stopped its member and moved
		// its data aside, as it does before it is listed again.
		harness.Eventually(t, changeDeadline, "agent 4 moved its data aside", func() error {
			if moved := c.Agent(4).CountLog("moved data dir aside; it is kept, not deleted", nil); moved < i+1 {
				return fmt.Errorf("%d moves so far, want %d", moved, i+1)
			}
			return nil
		})
		fmt.Printf("  etcdlet  cycle %d: join %s, leave %s\n", i+1, round(f.join[i]), round(f.leave[i]))
	}
	c.Agent(4).Stop()
	time.Sleep(warmDown)
	return f, idleUsage(t, agentPIDs(c, 1, 2, 3), idle)
}

func agentPIDs(c *harness.Cluster, ns ...int) []int {
	var pids []int
	for _, n := range ns {
		pids = append(pids, c.Agent(n).PID())
	}
	return pids
}
