package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/test/harness"
)

// benchNet is the 127.0.<n>.0/24 the agents use; the floor uses the next.
const benchNet = 200

// measureAgents runs a 3-agent cluster with a 4th agent idling, then
// repeatedly lists the 4th and unlists it again.
func measureAgents(binary, dir string, runs int, idle time.Duration) figures {
	t := &tb{}
	defer t.cleanup()
	c := harness.NewCluster(t, binary, dir, harness.Options{Net: benchNet})
	c.WriteMembers(1, 2, 3)
	for n := 1; n <= 4; n++ {
		c.WriteConfig(n)
		c.Start(n)
	}
	cli := c.Client()
	c.Wait(cli, time.Minute, 1, 2, 3)
	// etcd refuses membership changes until every voter has been connected
	// for 5s; measure the agent, not a cluster that just started.
	time.Sleep(6 * time.Second)

	var f figures
	for i := 0; i < runs; i++ {
		start := time.Now()
		c.WriteMembers(1, 2, 3, 4)
		waitMember(t, cli, c.Name(4), func(m *memberState) bool { return m != nil && !m.learner })
		f.join = append(f.join, time.Since(start))
		c.Wait(cli, time.Minute, 1, 2, 3, 4)

		start = time.Now()
		c.WriteMembers(1, 2, 3)
		waitMember(t, cli, c.Name(4), func(m *memberState) bool { return m == nil })
		f.leave = append(f.leave, time.Since(start))
		c.Wait(cli, time.Minute, 1, 2, 3)
		// The next cycle starts once agent 4 stopped its member and moved
		// its data aside, as it would before being listed again.
		harness.Eventually(t, time.Minute, "agent 4 moved its data aside", func() error {
			if moved := c.Agent(4).CountLog("moved data dir aside; it is kept, not deleted", nil); moved < i+1 {
				return fmt.Errorf("%d moves so far", moved)
			}
			return nil
		})
		fmt.Printf("  etcdlet run %d: join %s, leave %s\n", i+1, round(f.join[i]), round(f.leave[i]))
	}
	c.Agent(4).Stop()
	var pids []int
	for n := 1; n <= 3; n++ {
		pids = append(pids, c.Agent(n).PID())
	}
	f.cpu, f.rss = idleUsage(t, pids, idle)
	return f
}

type memberState struct{ learner bool }

// waitMember polls the member list every 5ms until cond holds for the
// named member (nil when absent).
func waitMember(t *tb, cli *clientv3.Client, name string, cond func(*memberState) bool) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := cli.MemberList(ctx)
		cancel()
		if err == nil {
			var state *memberState
			for _, m := range resp.Members {
				if m.Name == name || (m.Name == "" && len(m.PeerURLs) > 0 && nameless(m.PeerURLs[0], name)) {
					state = &memberState{learner: m.IsLearner}
				}
			}
			if cond(state) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("member %s did not reach the expected state within 2m", name)
}

// nameless matches a member that has not published its name yet by its
// peer URL's host, which is the IP at the end of the member name.
func nameless(peerURL, name string) bool {
	return strings.Contains(peerURL, "//"+strings.TrimPrefix(name, "etcd-main-")+":")
}
