package campaign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// unlisted are the hosts the list in force does not name.
func (cp *campaign) unlisted() []int {
	var out []int
	for n := 1; n <= hosts; n++ {
		if !slices.Contains(cp.list, n) {
			out = append(out, n)
		}
	}
	return out
}

// listChange changes the list every host has, host by host; it says
// what it did, or why it did nothing.
func (cp *campaign) listChange(kind string) string {
	listed, unlisted := slices.Clone(cp.list), cp.unlisted()
	add := func() (int, bool) {
		if len(unlisted) == 0 {
			return 0, false
		}
		return unlisted[cp.rng.IntN(len(unlisted))], true
	}
	remove := func(min int) (int, bool) {
		if len(listed) <= min {
			return 0, false
		}
		return listed[cp.rng.IntN(len(listed))], true
	}
	switch kind {
	case "list-add":
		n, ok := add()
		if !ok {
			return "every host is listed already"
		}
		if cp.kube != nil && len(unlisted) == 1 {
			// The Etcd's list never shrinks: the last host is kept
			// unlisted, so that a replacement has a host to bring in.
			return "four hosts are listed in the Etcd, the fifth kept for replacements"
		}
		cp.rollout(append(listed, n), true)
		return fmt.Sprintf("host %d added: %v", n, cp.list)
	case "list-remove":
		n, ok := remove(3)
		if !ok {
			return "three hosts are listed: none removed"
		}
		cp.rollout(without(listed, n), true)
		return fmt.Sprintf("host %d removed: %v", n, cp.list)
	case "list-replace":
		out, ok1 := remove(0)
		in, ok2 := add()
		if !ok1 || !ok2 {
			return "every host is listed: none replaced"
		}
		cp.rollout(append(without(listed, out), in), true)
		return fmt.Sprintf("host %d replaced by host %d: %v", out, in, cp.list)
	case "list-flap":
		n, ok := add()
		if !ok {
			return "every host is listed: none flapped"
		}
		changed := append(slices.Clone(listed), n)
		what := fmt.Sprintf("host %d added and removed again: %v", n, listed)
		if cp.kube != nil {
			// A shorter list is refused: the Etcd flaps by a replacement
			// taken back.
			out, _ := remove(0)
			changed = append(without(listed, out), n)
			what = fmt.Sprintf("host %d replaced by host %d and back again: %v", out, n, listed)
		}
		cp.rollout(changed, true)
		time.Sleep(time.Duration(cp.rng.IntN(2000)) * time.Millisecond)
		cp.rollout(listed, true)
		return what
	case "list-refuse":
		// A list every agent must refuse (an address twice): the last good
		// one stays in force.
		twice := hostAddr(listed[0])
		what := "a list with an address twice written and refused, then the good one again"
		if cp.kube != nil {
			if err := cp.kube.setList([]string{twice, twice}); err != nil {
				what = fmt.Sprintf("a list with an address twice refused by the API server (%v)", err)
			}
		} else {
			cp.c.WriteMembersRawOn(cp.allHosts(), twice+"\n"+twice+"\n")
		}
		time.Sleep(cp.hold())
		cp.rollout(listed, false)
		return what
	}
	panic("unknown fault " + kind)
}

// rollout writes list to every host, with lag one host after another,
// in a random order, up to a second apart; without lag all at once. With
// SourceResource it writes the Etcd, which every agent watches: the watch
// events reach the hosts when they do.
func (cp *campaign) rollout(list []int, lag bool) {
	slices.Sort(list)
	cp.list = list
	cp.result.ListChanges++
	if cp.kube != nil {
		cp.must(cp.kube.setList(addrs(list)))
		return
	}
	if !lag {
		cp.c.WriteMembers(list...)
		return
	}
	for _, i := range cp.rng.Perm(hosts) {
		cp.c.WriteMembersOn([]int{i + 1}, list...)
		time.Sleep(time.Duration(cp.rng.IntN(1000)) * time.Millisecond)
	}
}

// pauseHolder changes the list so that an agent takes the writer lock to
// act on it, and stops that agent (SIGSTOP) the moment the lock is seen
// held, past the lock's lease: Jepsen's case of a holder that wakes up
// believing it still holds the lock while another agent took it. The
// call it was about to make is never sent (TestAPausedHolderSendsNoCall,
// daemon/etcdclient); here the whole campaign's invariants must hold
// around it.
func (cp *campaign) pauseHolder() string {
	listed, unlisted := slices.Clone(cp.list), cp.unlisted()
	var change []int
	switch {
	case len(unlisted) > 1 || len(unlisted) == 1 && cp.kube == nil:
		change = append(listed, unlisted[cp.rng.IntN(len(unlisted))])
	case len(unlisted) == 1: // the Etcd's list never shrinks: a replacement
		change = append(without(listed, listed[cp.rng.IntN(len(listed))]), unlisted[0])
	default:
		change = without(listed, listed[cp.rng.IntN(len(listed))])
	}
	cp.rollout(change, false)
	n, err := cp.lockHolder(10 * time.Second)
	if err != nil {
		return fmt.Sprintf("list %v; no agent was seen holding the writer lock: %v", cp.list, err)
	}
	d := lockTTL + 2*time.Second + time.Duration(cp.rng.IntN(2000))*time.Millisecond
	cp.setStopped(n, "paused")
	cp.signal(n, syscall.SIGSTOP)
	time.Sleep(d)
	cp.signal(n, syscall.SIGCONT)
	cp.setStopped(n, "")
	cp.result.HoldersPaused++
	return fmt.Sprintf("list %v; host %d, holding the writer lock for it, paused for %s", cp.list, n, d)
}

// lockHolder waits until an agent holds the writer lock and says which.
func (cp *campaign) lockHolder(within time.Duration) (int, error) {
	var holder int
	_, err := eventually.Within(within, 10*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		id, err := etcdclient.ClusterIDOf(ctx, cp.cli)
		if err != nil {
			return err
		}
		st, err := etcdclient.ReadLock(ctx, cp.cli, etcdclient.WriterLockKey(id))
		if err != nil {
			return err
		}
		if !st.Held || st.Holder == nil {
			return errors.New("the writer lock is free")
		}
		for n := 1; n <= hosts; n++ {
			if cp.c.Agent(n).PID() == st.Holder.PID {
				holder = n
				return nil
			}
		}
		return fmt.Errorf("the writer lock's holder %s (pid %d) is no host's agent", st.Holder.Holder, st.Holder.PID)
	})
	return holder, err
}

func without(list []int, n int) []int {
	return slices.DeleteFunc(slices.Clone(list), func(m int) bool { return m == n })
}
