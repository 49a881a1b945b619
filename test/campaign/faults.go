package campaign

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/etcdlet/etcdlet/internal/eventually"
)

// The kinds of fault, with their weights in the schedule.
var faultKinds = []struct {
	name   string
	weight int
}{
	{"kill", 18},        // kill -9 of an agent and its member, restarted after a while
	{"pause", 14},       // SIGSTOP, sometimes past the writer lock's lease, then SIGCONT
	{"pause-holder", 6}, // a list change, and the agent that takes the writer lock for it stopped past its lease
	{"isolate", 10},     // one host cut from every other, clients included
	{"split", 10},       // a minority and a majority of the hosts cut from each other
	{"asymmetric", 8},   // a host's packets to one other host dropped, the other way open
	{"loss", 10},        // a host loses a share of its packets
	{"delay", 8},        // a host's peer traffic delayed, both ways (delay.go)
	{"wipe", 6},         // a host's data dir deleted or emptied while it is down
	{"full", 6},         // a host's disk full
	{"list-add", 8},     // a host added to the list, reaching the hosts one after another
	{"list-remove", 8},  // a listed host removed the same way
	{"list-replace", 6},
	{"list-flap", 4}, // a host added and removed again before the change settled
	{"list-refuse", 4},
	{"apiserver", 4}, // the API server serving the Etcd stopped, then started (SourceResource only)
}

// pick draws the next fault's kind, among Options.Only when set.
func (cp *campaign) pick() string {
	total := 0
	for _, k := range faultKinds {
		if cp.allowed(k.name) {
			total += k.weight
		}
	}
	r := cp.rng.IntN(total)
	for _, k := range faultKinds {
		if !cp.allowed(k.name) {
			continue
		}
		if r < k.weight {
			return k.name
		}
		r -= k.weight
	}
	panic("unreachable")
}

func (cp *campaign) allowed(kind string) bool {
	// The Etcd's list is only grown or edited in place: druid's rules
	// refuse a shorter one (kube.go). Its API server is a fault only
	// when it serves the list.
	if kind == "apiserver" && cp.kube == nil || kind == "list-remove" && cp.kube != nil {
		return false
	}
	return len(cp.opts.Only) == 0 || slices.Contains(cp.opts.Only, kind)
}

// FaultKinds are the names of the kinds of fault.
func FaultKinds() []string {
	names := make([]string, len(faultKinds))
	for i, k := range faultKinds {
		names[i] = k.name
	}
	return names
}

// hold is how long a fault lasts: one to three seconds.
func (cp *campaign) hold() time.Duration {
	return time.Second + time.Duration(cp.rng.IntN(2000))*time.Millisecond
}

// inject runs faults one after another until the duration is over and at
// least MinFaults ran; every fault is healed before the next. After each,
// the cluster must answer a quorum read again within quorumAfterHeal: one
// fault at a time takes at most one host, or a minority of the five, and
// once it healed every host runs and reaches every other, so a cluster
// without quorum then lost it through a membership that etcdlet changed
// (or data it lost). That ends the injection, for every fault after it
// would only pile onto the loss.
func (cp *campaign) inject() {
	start := time.Now()
	for n := 0; time.Since(start) < cp.opts.Duration || n < cp.opts.MinFaults; n++ {
		for h := 1; h <= hosts; h++ {
			cp.result.MovedAsidePruned += cp.pruneMovedAside(h)
		}
		kind := cp.pick()
		cp.result.Faults[kind]++
		began := time.Now()
		what := cp.fault(kind)
		took, err := eventually.Within(quorumAfterHeal, 100*time.Millisecond, cp.quorumRead)
		cp.t.Logf("%9s fault %3d %-12s %s (%s in all, quorum %s after)", began.Sub(start).Round(time.Millisecond), n+1, kind, what,
			time.Since(began).Round(time.Millisecond), took.Round(time.Millisecond))
		if err != nil {
			cp.violation(fmt.Sprintf("no quorum read %s after fault %d (%s: %s) healed: %v", quorumAfterHeal, n+1, kind, what, err))
			return
		}
		cp.result.LongestQuorumLoss = max(cp.result.LongestQuorumLoss, took)
		time.Sleep(time.Duration(cp.rng.IntN(1000)) * time.Millisecond)
	}
}

// quorumAfterHeal is how long the cluster may take to answer a quorum
// read once a fault healed: an election, a restarted member's replay.
const quorumAfterHeal = 30 * time.Second

// quorumRead is a linearizable read through any member: it succeeds only
// while a quorum of the voters answers.
func (cp *campaign) quorumRead() error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := cp.cli.Get(ctx, keyPrefix+"quorum")
	return err
}

// killMidBootstrap kills, in half the campaigns, one of the three listed
// agents (its member with it) at a random moment of the cluster's
// bootstrap, and starts it again after a while: a node that dies half-way
// through forming a cluster must neither keep the others from forming it
// nor found a second one.
func (cp *campaign) killMidBootstrap() {
	if cp.rng.IntN(2) == 0 {
		return
	}
	n := cp.list[cp.rng.IntN(len(cp.list))]
	after := time.Duration(cp.rng.IntN(3000)) * time.Millisecond
	time.Sleep(after)
	cp.c.Agent(n).Kill()
	d := cp.hold()
	time.Sleep(d)
	cp.c.Agent(n).Restart()
	cp.result.Faults["kill"]++
	cp.t.Logf("%9s fault   0 kill         host %d killed %s after the agents started, while the cluster forms, for %s", "", n, after, d)
}

// fault injects one fault of kind, holds it and heals it; it says what it
// did.
func (cp *campaign) fault(kind string) string {
	n := 1 + cp.rng.IntN(hosts)
	d := cp.hold()
	switch kind {
	case "kill":
		cp.setStopped(n, "killed")
		cp.c.Agent(n).Kill()
		time.Sleep(d)
		cp.c.Agent(n).Restart()
		cp.setStopped(n, "")
		return fmt.Sprintf("host %d killed for %s", n, d)
	case "pause":
		if cp.rng.IntN(4) == 0 {
			d = lockTTL + 2*time.Second + time.Duration(cp.rng.IntN(2000))*time.Millisecond
		}
		cp.setStopped(n, "paused")
		cp.signal(n, syscall.SIGSTOP)
		time.Sleep(d)
		cp.signal(n, syscall.SIGCONT)
		cp.setStopped(n, "")
		return fmt.Sprintf("host %d paused for %s", n, d)
	case "isolate":
		for m := 1; m <= clientNS; m++ {
			if m != n {
				cp.net.cut(n, m)
			}
		}
		cp.must(cp.net.apply())
		time.Sleep(d)
		cp.healNetwork()
		return fmt.Sprintf("host %d isolated for %s", n, d)
	case "split":
		perm := cp.rng.Perm(hosts)
		minority := perm[:1+cp.rng.IntN(2)]
		for _, a := range minority {
			for _, b := range perm[len(minority):] {
				cp.net.cut(a+1, b+1)
			}
		}
		cp.must(cp.net.apply())
		time.Sleep(d)
		cp.healNetwork()
		return fmt.Sprintf("hosts %v cut from the others for %s", plusOne(minority), d)
	case "asymmetric":
		m := 1 + (n+cp.rng.IntN(hosts-1))%hosts
		cp.net.dropTo(n, m)
		cp.must(cp.net.apply())
		time.Sleep(d)
		cp.healNetwork()
		return fmt.Sprintf("host %d cannot reach host %d for %s (the other way open)", n, m, d)
	case "loss":
		p := 10 + cp.rng.IntN(31)
		cp.net.lose(n, p)
		cp.must(cp.net.apply())
		time.Sleep(d)
		cp.healNetwork()
		return fmt.Sprintf("host %d loses %d%% of its packets for %s", n, p, d)
	case "wipe":
		// Only a whole cluster loses one member's data: wiped one after
		// another before they rejoined, a majority's data would be gone,
		// which no agent may repair by itself (it never bootstraps over a
		// cluster that existed).
		if err := cp.converged(cp.cli); err != nil {
			cp.result.WipesSkipped++
			return fmt.Sprintf("host %d not wiped: the cluster is not whole (%v)", n, err)
		}
		cp.setStopped(n, "killed")
		cp.c.Agent(n).Kill()
		what := cp.wipe(n)
		time.Sleep(d)
		cp.c.Agent(n).Restart()
		cp.setStopped(n, "")
		return fmt.Sprintf("host %d down for %s, its data dir %s", n, d, what)
	case "delay":
		latency := time.Duration(20+cp.rng.IntN(481)) * time.Millisecond
		cp.must(cp.delays.delay(n, latency))
		time.Sleep(d)
		cp.must(cp.delays.undelay(n))
		return fmt.Sprintf("host %d's peer traffic delayed by %s ± %s for %s", n, latency, latency/5, d)
	case "full":
		return cp.fullDisk(n, d)
	case "pause-holder":
		return cp.pauseHolder()
	case "apiserver":
		cp.kube.restartAPIServer(cp.t, d)
		return fmt.Sprintf("the API server stopped for %s", d)
	default:
		return cp.listChange(kind)
	}
}

// fullDisk fills host n's disk for d, then frees it. An agent whose
// member cannot write its log may stop (etcd exits on a failed write to
// its write-ahead log): it is started again, and the report counts it.
func (cp *campaign) fullDisk(n int, d time.Duration) string {
	cp.setStopped(n, "disk full")
	filler, err := fill(filepath.Dir(cp.c.DataDir(n)))
	cp.must(err)
	time.Sleep(d)
	cp.must(os.Remove(filler))
	// An exit caused by the full disk comes within moments of the
	// failed write; it shows by now.
	time.Sleep(time.Second)
	what := fmt.Sprintf("host %d's disk full for %s", n, d)
	if !cp.c.Agent(n).Running() {
		cp.result.ExitsOnFullDisk++
		cp.c.Agent(n).Restart()
		what += "; its agent exited and was started again"
	}
	cp.setStopped(n, "")
	return what
}

// wipe deletes host n's data dir, or empties it, as a lost or replaced
// disk does; the journal forgets it, for the campaign deleted it.
func (cp *campaign) wipe(n int) string {
	dir := cp.c.DataDir(n)
	if cp.rng.IntN(2) == 0 {
		cp.obs.wipe(dir, func() { cp.must(os.RemoveAll(dir)) })
		return "deleted"
	}
	cp.obs.wipe(dir, func() {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			cp.t.Fatal(err)
		}
		for _, e := range entries {
			cp.must(os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	})
	return "emptied"
}

// healAll ends every fault: the network whole, every agent running.
func (cp *campaign) healAll() {
	cp.healNetwork()
	for n := 1; n <= hosts; n++ {
		cp.signal(n, syscall.SIGCONT)
		if !cp.c.Agent(n).Running() {
			cp.c.Agent(n).Restart()
		}
		cp.setStopped(n, "")
	}
}

func (cp *campaign) healNetwork() { cp.must(cp.net.heal()) }

func (cp *campaign) setStopped(n int, how string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if how == "" {
		delete(cp.stopped, n)
	} else {
		cp.stopped[n] = how
	}
}

func (cp *campaign) must(err error) {
	if err != nil {
		cp.t.Fatal(err)
	}
}

func plusOne(idx []int) []int {
	out := make([]int, len(idx))
	for i, v := range idx {
		out[i] = v + 1
	}
	slices.Sort(out)
	return out
}
