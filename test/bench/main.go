// Command bench is `make bench`: etcdlet's speed and cost on loopback,
// each figure next to a floor measured in the same run.
//
//   - Membership: from the members-file write to the fourth member seen a
//     voter (join) and seen gone (leave), for agents with etcdlet's
//     defaults and for the floor (plain etcd processes and a file watch
//     that issues the etcd calls directly). Both clocks start at the same
//     write and stop at the same observation.
//   - Idle cost with the embedded runtime: agents (etcd in-process)
//     against plain embedded etcd processes.
//   - Idle cost with the static-pod runtime: the agent alone, and the etcd
//     it manages against the same etcd processes with the agents stopped.
//   - The static-pod runtime's render+write, and agent start to READY=1.
//
// Every wait has a deadline; a failure ends the run with the reason and
// the tail of every agent's log.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/test/harness"
)

func main() {
	if os.Getenv(memberEnv) != "" {
		runMember() // re-executed as a floor member
		return
	}
	runs := flag.Int("runs", 5, "join, leave and replace cycles per side, and agent restarts")
	idle := flag.Duration("idle", time.Minute, "how long each idle CPU and RSS window lasts")
	keyspace := flag.Int("keyspace", 0, "MiB written into each side's cluster before its cycles: every join then copies that keyspace")
	limit := flag.Duration("limit", 30*time.Minute, "fail the benchmark if it has not finished by then")
	keep := flag.Bool("keep", false, "keep the working directory (agent logs, data dirs) and print where it is")
	staticPod := flag.Bool("static-pod", true, "measure the static-pod runtime too (false: membership and the embedded runtime only)")
	flag.Parse()

	t := &tb{}
	defer t.cleanup()
	t.limit(*limit)
	dir, err := os.MkdirTemp("", "etcdlet-bench-")
	t.check(err, "temporary directory")
	t.Cleanup(func() {
		if *keep {
			fmt.Fprintln(os.Stderr, "bench: kept", dir)
			return
		}
		os.RemoveAll(dir)
	})
	binary, err := harness.BuildBinary(dir)
	t.check(err, "build etcdlet")
	if *staticPod {
		harness.EtcdBinary(t) // the static-pod part needs it: fail now, not after the rest
	}

	if *keyspace < 0 {
		t.Fatalf("-keyspace %d: want 0 or more MiB", *keyspace)
	}
	fmt.Printf("etcdlet benchmark on loopback: %d join, leave and replace cycles per side, a keyspace of %d MiB, idle windows of %s\n", *runs, *keyspace, *idle)
	fmt.Printf("agents run with etcdlet's defaults: agent.reconcileInterval %s, agent.idleInterval %s, agent.logLevel %s, agent.logFormat %s, etcd.logLevel %s\n",
		config.DefaultReconcileInterval, config.DefaultIdleInterval, config.DefaultLogLevel, config.DefaultLogFormat, config.DefaultEtcdLogLevel)
	fmt.Println("(set per agent: node.address, ports, listen addresses and directories, which place the agents but do not shape their work)")
	if os.Geteuid() != 0 {
		fmt.Println("not root: the page cache is not dropped before each timed change; with -keyspace, joins may reclaim it and vary by seconds")
	}
	fmt.Println()

	// Each part runs alone: the processes of one are stopped before the
	// next starts.
	m := membershipReport{keyspace: *keyspace}
	t.section(func() {
		m.agents, m.agentsIdle = measureAgents(t, binary, filepath.Join(dir, "agents"), *runs, *keyspace, *idle)
	})
	t.section(func() { m.floor, m.floorIdle = measureFloor(t, filepath.Join(dir, "floor"), *runs, *keyspace, *idle) })

	var sp staticPodFigures
	if *staticPod {
		t.section(func() { measureRenderWrite(t, filepath.Join(dir, "render"), 2000, &sp) })
		t.section(func() { measureReady(t, binary, filepath.Join(dir, "ready"), *runs, &sp) })
		t.section(func() { measureStaticPodIdle(t, binary, filepath.Join(dir, "staticpod"), *idle, &sp) })
	}

	fmt.Println()
	reportMembership(m)
	if *staticPod {
		reportStaticPod(sp)
	}
}

// membershipReport is what the membership and embedded-runtime part
// measured on both sides.
type membershipReport struct {
	keyspace              int // MiB
	agents, floor         membershipFigures
	agentsIdle, floorIdle usage
}
