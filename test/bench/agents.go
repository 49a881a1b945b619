package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
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

// connectedSettle waits out etcd's rule that a member is added only once
// every voter has been connected to the leader for 5s (and removed only
// once a quorum has), before every change and on both sides alike, so
// that each figure measures the change and not the rule.
const connectedSettle = 6 * time.Second

// quiet is the wait before every timed change, on both sides alike: it
// writes out what the last cycle left dirty in the page cache (a member's
// data moved aside, a new member's copy of the keyspace), which the kernel
// would otherwise write back during the next timed join and charge to
// whichever side it happened to fall on, then waits out connectedSettle:
// a long write-back stalls the members' own fsyncs, and a leader that
// missed a follower's heartbeats refuses to add a member for a while.
// Run as root, it also drops the clean pages no process maps (the copies
// of earlier cycles, moved aside): with a large keyspace the page cache
// fills the memory within a few cycles, and a join then spends seconds of
// CPU reclaiming it, as much as the copy itself and on either side by
// chance. The members' backends stay cached (etcd maps them).
func quiet() {
	syscall.Sync()
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0) // not root: the page cache stays
	time.Sleep(connectedSettle)
}

// warmDown lets start-up work (first compactions, the first passes) end
// before an idle window begins, on every side alike.
const warmDown = 5 * time.Second

// nodes is the number of nodes of each side: three members and one that
// is out of the cluster at the start of every cycle.
const nodes = 4

// membershipFigures are one side's times, per cycle.
type membershipFigures struct {
	// join: members-file write → the node that was out a voter.
	join []time.Duration
	// leave: members-file write → the leader gone (handing over first).
	leave []time.Duration
	// gap: the longest time a writer saw no write succeed while the
	// leader left.
	gap []time.Duration
	// replace: members-file write → a voter that is not the leader traded
	// for the node that is out: the node a voter and the voter gone.
	replace []time.Duration
	// joinCPU: the CPU time the joining node's process used during the
	// join, in seconds (the agent with its etcd; a plain etcd).
	joinCPU []float64
}

// cycle is one join, leave and replace, the same on both sides: the node
// that is out is listed and joins; then the leader is unlisted and leaves
// while a writer writes; then one list write trades a member that is not
// the leader for the node that left. The member traded away is the one
// out in the next cycle.
type cycle struct {
	t     *tb
	c     *harness.Cluster
	obs   *observer
	write func(ns ...int)
	// prepare, when set, readies the node that joins next, before the
	// clock starts (the floor pre-starts its etcd process, as an agent
	// runs before it is listed).
	prepare func(joining int)
	// settled returns once the side is ready for the next change after a
	// node left (an agent moved its data aside; a floor process exited).
	settled func(left int)
	// pid is the process of node n (after prepare, the one that joins).
	pid func(n int) int
}

func (cy *cycle) run(runs int, label string) membershipFigures {
	var f membershipFigures
	out := nodes
	for i := range runs {
		all := seqTo(nodes)
		if cy.prepare != nil {
			cy.prepare(out)
		}
		quiet()
		pid := cy.pid(out)
		cpu := readCPUTime(cy.t, pid)
		start := time.Now()
		cy.write(all...)
		joined := cy.obs.waitFor(cy.c.PeerURL(out), voter)
		f.join = append(f.join, joined.Sub(start))
		after := readCPUTime(cy.t, pid)
		f.joinCPU = append(f.joinCPU, after.since(cpu))
		kernel := after.system - cpu.system
		cy.obs.waitVoters(nodes)

		leader := cy.nodeOf(cy.obs.leader())
		stay := slices.DeleteFunc(seqTo(nodes), func(n int) bool { return n == leader })
		quiet()
		w := cy.c.StartWriter(cy.obs.cli)
		start = time.Now()
		cy.write(stay...)
		f.leave = append(f.leave, cy.obs.waitFor(cy.c.PeerURL(leader), absent).Sub(start))
		cy.obs.waitVoters(nodes - 1)
		// The gap counts up to a write that succeeded after the change: a
		// writer whose every write failed since would otherwise report none.
		harness.Eventually(cy.t, changeDeadline, "a write succeeds after the leader left", func() error {
			if r := w.Report(); r.LastOK.Before(start) {
				return fmt.Errorf("no write since the members-file write; %d failed, last error %v", r.Failures, r.LastErr)
			}
			return nil
		})
		w.Stop()
		f.gap = append(f.gap, w.Report().MaxGap)
		cy.settled(leader)
		took, gone := cy.replace(leader, stay)
		f.replace = append(f.replace, took)
		out = gone
		fmt.Printf("  %-8s cycle %d: join %s (joining node's CPU %.2fs, %.2fs of it in the kernel), leader leaves %s, longest write gap %s, replace %s\n", label, i+1,
			round(f.join[i]), f.joinCPU[i], kernel, round(f.leave[i]), round(f.gap[i]), round(f.replace[i]))
	}
	return f
}

// replace lists in (out of the cluster, its data moved aside) instead of
// the first of members that does not lead, in one write, and times the
// write until in is a voter and that member gone, and returns that time
// and the member traded away, once it settled.
func (cy *cycle) replace(in int, members []int) (took time.Duration, gone int) {
	leader := cy.nodeOf(cy.obs.leader())
	gone = members[0]
	if gone == leader {
		gone = members[1]
	}
	if cy.prepare != nil {
		cy.prepare(in)
	}
	list := append(slices.DeleteFunc(slices.Clone(members), func(n int) bool { return n == gone }), in)
	slices.Sort(list)
	quiet()
	start := time.Now()
	cy.write(list...)
	done := cy.obs.waitFor(cy.c.PeerURL(in), voter)
	// The member may have gone first: then this finds it gone at once.
	if left := cy.obs.waitFor(cy.c.PeerURL(gone), absent); left.After(done) {
		done = left
	}
	cy.obs.waitVoters(nodes - 1)
	cy.settled(gone)
	return done.Sub(start), gone
}

func (cy *cycle) nodeOf(peerURL string) int {
	for n := 1; n <= nodes; n++ {
		if cy.c.PeerURL(n) == peerURL {
			return n
		}
	}
	cy.t.Fatalf("the leader %s is none of the nodes", peerURL)
	return 0
}

func seqTo(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

func clientURLs(c *harness.Cluster) []string {
	var urls []string
	for n := 1; n <= nodes; n++ {
		urls = append(urls, c.ClientURL(n))
	}
	return urls
}

// measureAgents runs four agents with etcdlet's defaults (embedded
// runtime), three listed, through the cycles. Then it measures the idle
// cost of the three members' agents (each an agent with its etcd member
// in-process).
func measureAgents(t *tb, binary, dir string, runs, keyspace int, idle time.Duration) (membershipFigures, usage) {
	c := harness.NewCluster(t, binary, dir, harness.Options{Net: netAgents, Defaults: true,
		Insecure: "measured against a floor of plain embedded etcd, so TLS would weigh on one side only"})
	c.WriteMembers(1, 2, 3)
	for n := 1; n <= nodes; n++ {
		c.WriteConfig(n)
		c.Start(n)
	}
	obs := newObserver(t, clientURLs(c))
	c.Wait(c.Client(), changeDeadline, 1, 2, 3)
	fillKeyspace(t, obs, keyspace)

	moves := map[int]int{}
	cy := &cycle{t: t, c: c, obs: obs, write: c.WriteMembers, pid: func(n int) int { return c.Agent(n).PID() }, settled: func(left int) {
		// The next cycle lists the node again once its agent stopped the
		// member and moved its data aside, as it does before rejoining.
		moves[left]++
		harness.Eventually(t, changeDeadline, fmt.Sprintf("agent %d moved its data aside", left), func() error {
			if moved := c.Agent(left).CountLog("moved data dir aside; it is kept, not deleted", nil); moved < moves[left] {
				return fmt.Errorf("%d moves so far, want %d", moved, moves[left])
			}
			return nil
		})
	}}
	f := cy.run(runs, "etcdlet")

	members, _ := obs.members()
	var pids []int
	for n := 1; n <= nodes; n++ {
		if slices.Contains(members, c.PeerURL(n)) {
			pids = append(pids, c.Agent(n).PID())
		} else {
			c.Agent(n).Stop()
		}
	}
	time.Sleep(warmDown)
	return f, idleUsage(t, pids, idle)
}

// fillKeyspace writes mib MiB into the cluster before the cycles start.
func fillKeyspace(t *tb, obs *observer, mib int) {
	if mib == 0 {
		return
	}
	start := time.Now()
	t.check(harness.Fill(context.Background(), obs.cli, mib<<20), "fill the keyspace")
	fmt.Printf("  wrote a keyspace of %d MiB in %s\n", mib, round(time.Since(start)))
}

func agentPIDs(c *harness.Cluster, ns ...int) []int {
	var pids []int
	for _, n := range ns {
		pids = append(pids, c.Agent(n).PID())
	}
	return pids
}
