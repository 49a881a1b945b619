package test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/test/harness"
)

// A list change reaches the hosts one after another. A replacement
// ([1 2 3] → [1 2 4]) rolled out host by host, with a gap between hosts,
// makes exactly one add (4, promoted) and one removal (3), only once every
// agent holds the new list; only member 3's data is moved aside, once.
// Before, the agents fought while their lists differed: the host removed
// from the list re-added itself, another removed it, every pass.
func TestAReplacementRolledOutHostByHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		gap time.Duration
		net int
	}{{time.Second, netRollout1s}, {45 * time.Second, netRollout45s}} {
		t.Run(tc.gap.String(), func(t *testing.T) {
			t.Parallel()
			c, cli := startCluster(t, tc.net, 3, ownLists)
			c.WriteMembersOn([]int{4}, 1, 2, 3)
			c.Start(4)
			w := c.StartWriter(c.ClientOf(1, 2))

			for i, hosts := range [][]int{{1}, {2, 4}, {3}} {
				if i > 0 {
					// The rollout's gap: the list is on some hosts only.
					time.Sleep(tc.gap)
					expectMembers(t, c, cli, "while the list is on some hosts only", 1, 2, 3)
				}
				c.WriteMembersOn(hosts, 1, 2, 4)
			}
			c.Wait(cli, convergeTimeout, 1, 2, 4)
			checkWrites(t, w)
			harness.Eventually(t, convergeTimeout, "agent 3 moves the removed member's data aside", func() error {
				if len(movedAside(t, c, 3)) == 0 {
					return errorf("not moved yet")
				}
				return nil
			})
			waitPasses(t, c, []int{1, 2, 3, 4}, 2)

			adds, removes := countChanges(c, "add-learner"), countChanges(c, "remove")
			if adds != 1 || removes != 1 {
				t.Errorf("%d adds and %d removals issued, want exactly one each", adds, removes)
			}
			for n := 1; n <= 4; n++ {
				want := 0
				if n == 3 {
					want = 1
				}
				if got := len(movedAside(t, c, n)); got != want {
					t.Errorf("agent %d moved its data aside %d times, want %d", n, got, want)
				}
			}
		})
	}
}

// A list that flaps ([1 2 3] → [1 2] → [1 2 3] within half a second, on
// every host) removes nobody: the removal of a healthy voter waits for the
// list to have held for agent.removalHoldDown.
func TestAFlappingListRemovesNobody(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netListFlap, 3, ownLists)
	c.WriteMembers(1, 2)
	time.Sleep(500 * time.Millisecond) // the flap: the list is back half a second later
	c.WriteMembers(1, 2, 3)
	waitPasses(t, c, []int{1, 2, 3}, 3)
	expectMembers(t, c, cli, "after the flap", 1, 2, 3)
	if n := countChanges(c, "remove") + countChanges(c, "move-leader"); n != 0 {
		t.Errorf("%d removals or leader moves for a list that flapped", n)
	}
	for n := 1; n <= 3; n++ {
		if moved := movedAside(t, c, n); len(moved) != 0 {
			t.Errorf("agent %d moved its data aside: %v", n, moved)
		}
	}
}

// Two hosts that hold different lists for good: nothing flips, and every
// agent says which node holds which list (ListsDisagree in status and the
// log, etcdlet_lists_differing).
func TestListsThatDisagreeForGood(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netListsDisagree, 3, ownLists)
	c.WriteMembersOn([]int{3, 4}, 1, 2, 3, 4)
	c.Start(4)
	waitMetric(t, c.Agent(1), "etcdlet_lists_differing", "2 (agents 3 and 4)", equals(2))
	waitPasses(t, c, []int{1, 2, 3, 4}, 3)
	expectMembers(t, c, cli, "while the lists disagree", 1, 2, 3)
	if n := countChanges(c, "add-learner"); n != 0 {
		t.Errorf("%d adds while the lists disagree", n)
	}
	r, _, _ := statusJSON(t, c, 3)
	waiting := strings.Join(r.Plan.Waiting, "\n")
	if !strings.Contains(waiting, "ListsDisagree") || !strings.Contains(waiting, c.IP(4)) {
		t.Errorf("status of agent 3 does not say the add of %s waits for the lists:\n%s", c.IP(4), waiting)
	}
	differ := 0
	for _, l := range r.Lists {
		if l.Differs {
			differ++
		}
	}
	if len(r.Lists) != 4 || differ != 2 {
		t.Errorf("status shows the lists %+v, want all four agents' with agents 1 and 2 differing", r.Lists)
	}
	if c.Agent(3).CountLog("other agents hold another member list; changes about the addresses they disagree on wait until the lists agree", nil) == 0 {
		t.Error("agent 3 did not log that the lists disagree")
	}

	// Once the lists agree, the add goes ahead.
	c.WriteMembersOn([]int{1, 2}, 1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)
}

// A host whose member was removed while its agent was down comes back
// holding the old list, which still names it: it moves its stale data
// aside once and never adds itself back, for its member was removed under
// a newer list than the one it holds.
func TestARemovedHostWithAnOldListStaysOut(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netStaleList, 3, ownLists)
	c.Agent(3).Stop()
	c.WriteMembersOn([]int{1, 2}, 1, 2)
	c.Wait(cli, convergeTimeout, 1, 2)

	c.Agent(3).Restart()
	harness.Eventually(t, convergeTimeout, "agent 3 moves its stale data aside", func() error {
		if n := len(movedAside(t, c, 3)); n != 1 {
			return errorf("moved aside %d times", n)
		}
		return nil
	})
	waitPasses(t, c, []int{1, 2, 3}, 3)
	expectMembers(t, c, cli, "after agent 3 came back with the old list", 1, 2)
	if n := countChanges(c, "add-learner"); n != 0 {
		t.Errorf("%d adds of the removed host", n)
	}
	if n := len(movedAside(t, c, 3)); n != 1 {
		t.Errorf("agent 3 moved its data aside %d times, want once", n)
	}
}

// An agent started with the node.address of a healthy voter (a cloned
// host, a configuration copied with the address) never evicts it: the
// member answers in raft as itself, so it is not stale, and the claimant
// refuses, saying that another node serves its address. Before, its
// writer moved leadership away and removed the healthy voter within 2 s.
func TestASecondClaimantNeverEvictsALiveMember(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netClaimant, 3)
	claimant(t, c, 3, 4)
	c.Start(4)
	harness.Eventually(t, convergeTimeout, "the claimant refuses, naming the live member", func() error {
		if n := c.Agent(4).CountLog("local member", map[string]string{"decision": "refuse"}); n == 0 {
			return errorf("no refusal logged yet")
		}
		if !logMentions(c.Agent(4), "another node serves this address") {
			return errorf("the refusal does not say another node serves the address")
		}
		return nil
	})
	waitPasses(t, c, []int{1, 2, 3, 4}, 3)
	expectMembers(t, c, cli, "with a second claimant of 3's address", 1, 2, 3)
	if n := c.Agent(4).CountLog("membership change", nil); n != 0 {
		t.Errorf("the claimant made %d membership changes", n)
	}
}

// A node configured with another cluster.name, listed by address, never
// joins: the learner the agents add for its address is never started
// under a name they do not expect, and never promoted.
func TestAnotherClusterNameNeverJoins(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netOtherName, 3, func(o *harness.Options) { o.AgentConfig = "  learnerTimeout: 5s\n" })
	other := c.ConfigPath(4)
	c.WriteConfig(4)
	content, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Replace(string(content), "name: etcd-main", "name: other-cluster", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	harness.Eventually(t, convergeTimeout, "agent 4 refuses to join", func() error {
		if !logMentions(c.Agent(4), "is not the cluster's; not joining") {
			return errorf("no refusal logged yet")
		}
		return nil
	})
	waitPasses(t, c, []int{1, 2, 3, 4}, 5)
	members, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if strings.Contains(strings.Join(m.PeerURLs, " "), c.IP(4)) && (!m.IsLearner || m.Name != "") {
			t.Errorf("member for %s: learner %t, name %q: it joined", c.IP(4), m.IsLearner, m.Name)
		}
	}
	if n := c.Agent(4).CountLog("membership change", nil); n != 0 {
		t.Errorf("the misconfigured agent made %d membership changes", n)
	}
}

func ownLists(o *harness.Options) { o.OwnLists = true }

// expectMembers asserts that the members are exactly the agents ns, all
// voting.
func expectMembers(t *testing.T, c *harness.Cluster, cli *clientv3.Client, when string, ns ...int) {
	t.Helper()
	if err := c.Expect(cli, ns...); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// countChanges counts the membership calls of one action that the agents
// made and etcd applied.
func countChanges(c *harness.Cluster, action string) int {
	n := 0
	for i := 1; i <= 9; i++ {
		if a := c.Agent(i); a != nil {
			n += a.CountLog("membership change", map[string]string{"action": action, "outcome": "done"})
			n += a.CountLog("membership change already applied", map[string]string{"action": action, "outcome": "done"})
		}
	}
	return n
}

// claimant writes agent n's configuration as agent of's, with its own
// data dir, state dir and agent listener: another host configured with
// the address of of.
func claimant(t *testing.T, c *harness.Cluster, of, n int) {
	t.Helper()
	c.WriteConfig(of)
	content, err := os.ReadFile(c.ConfigPath(of))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(content), fmt.Sprintf("/n%d/", of), fmt.Sprintf("/n%d/", n))
	s = strings.Replace(s, fmt.Sprintf("listen: \"%s:", c.IP(of)), fmt.Sprintf("listen: \"%s:", c.IP(n)), 1)
	if err := os.MkdirAll(strings.TrimSuffix(c.ConfigPath(n), "/config.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.ConfigPath(n), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
