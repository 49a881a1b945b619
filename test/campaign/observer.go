package campaign

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etcdlet/etcdlet/test/harness"
)

// observer watches, through the whole campaign, what must hold at every
// moment: every agent that no fault stopped runs, one cluster ID answers,
// and every data dir that held a member still exists (moved aside at
// worst: etcdlet never deletes one).
type observer struct {
	cp   *campaign
	halt chan struct{}
	done chan struct{}
	once sync.Once

	mu         sync.Mutex
	clusterIDs map[uint64]string // cluster ID -> the first member seen answering for it
	dataDirs   map[uint64]string // inode -> the data dir it was first seen as
}

const observeEvery = 250 * time.Millisecond

func (cp *campaign) observe() *observer {
	o := &observer{cp: cp, halt: make(chan struct{}), done: make(chan struct{}),
		clusterIDs: map[uint64]string{}, dataDirs: map[uint64]string{}}
	cli := cp.client(cp.allHosts())
	cp.t.Cleanup(o.stop)
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.halt:
				return
			case <-time.After(observeEvery):
			}
			o.agentsRun()
			o.journal()
			for n := 1; n <= hosts; n++ {
				ctx, cancel := context.WithTimeout(context.Background(), observeEvery)
				st, err := cli.Status(ctx, cp.c.ClientURL(n))
				cancel()
				if err == nil {
					o.mu.Lock()
					if _, ok := o.clusterIDs[st.Header.ClusterId]; !ok {
						o.clusterIDs[st.Header.ClusterId] = fmt.Sprintf("%s at %s", cp.c.Name(n), time.Now().Format(time.TimeOnly))
					}
					o.mu.Unlock()
				}
			}
		}
	}()
	return o
}

// stop ends the observation; it runs again at the test's end, before
// the agents are stopped, whatever ended the test.
func (o *observer) stop() {
	o.once.Do(func() {
		close(o.halt)
		<-o.done
		o.journal()
	})
}

// agentsRun reports every agent that exited without a fault stopping it,
// once, with the end of its log.
func (o *observer) agentsRun() {
	cp := o.cp
	for n := 1; n <= hosts; n++ {
		cp.mu.Lock()
		_, stopped := cp.stopped[n]
		reported := cp.seenDown[n]
		cp.mu.Unlock()
		if stopped || reported || cp.c.Agent(n).Running() {
			continue
		}
		cp.mu.Lock()
		stoppedMeanwhile := cp.stopped[n] != ""
		if !stoppedMeanwhile {
			cp.seenDown[n] = true
		}
		cp.mu.Unlock()
		if !stoppedMeanwhile {
			cp.violation(fmt.Sprintf("agent %d exited without a fault stopping it; its log ends:\n%s", n, harness.Tail(cp.c.Agent(n).Log, 20)))
		}
	}
}

// journal records the inode of every data dir that holds a member. It
// holds the lock while it looks, so that it never records a dir that a
// fault is deleting (wipe).
func (o *observer) journal() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for n := 1; n <= hosts; n++ {
		dir := o.cp.c.DataDir(n)
		if _, err := os.Stat(filepath.Join(dir, "member")); err != nil {
			continue
		}
		if ino, ok := inode(dir); ok {
			if _, seen := o.dataDirs[ino]; !seen {
				o.dataDirs[ino] = dir
			}
		}
	}
}

// wipe lets remove delete dir, which the journal then forgets: the
// campaign deleted it, not etcdlet.
func (o *observer) wipe(dir string, remove func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ino, ok := inode(dir); ok {
		delete(o.dataDirs, ino)
	}
	remove()
}

func inode(path string) (uint64, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Ino, true
}

// check says what broke: more than one cluster ID, a data dir gone.
func (o *observer) check() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	if len(o.clusterIDs) > 1 {
		var ids []string
		for id, first := range o.clusterIDs {
			ids = append(ids, fmt.Sprintf("%x (first %s)", id, first))
		}
		slices.Sort(ids)
		out = append(out, "more than one cluster answered: "+strings.Join(ids, ", "))
	}
	present := map[uint64]bool{}
	for n := 1; n <= hosts; n++ {
		parent := filepath.Dir(o.cp.c.DataDir(n))
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if ino, ok := inode(filepath.Join(parent, e.Name())); ok && e.IsDir() {
				present[ino] = true
			}
			// The mount-point fallback moves the contents into the data dir.
			sub, _ := os.ReadDir(filepath.Join(parent, e.Name()))
			for _, s := range sub {
				if ino, ok := inode(filepath.Join(parent, e.Name(), s.Name())); ok && s.IsDir() {
					present[ino] = true
				}
			}
		}
	}
	for ino, dir := range o.dataDirs {
		if !present[ino] {
			out = append(out, fmt.Sprintf("the data dir first seen as %s (inode %d) is gone: etcdlet must never delete a data dir", dir, ino))
		}
	}
	return out
}

// keep copies what a person needs to understand a violation out of the
// test's temporary directory: the agents' logs and configurations, the
// nftables rules in force, the client history.
func (cp *campaign) keep(ops []porcupine.Operation) {
	dir := cp.keepDir()
	if dir == "" {
		return
	}
	for n := 1; n <= hosts; n++ {
		for _, f := range []string{cp.c.Agent(n).Log, cp.c.ConfigPath(n), cp.c.MembersOf(n)} {
			if b, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("host%d-%s", n, filepath.Base(f))), b, 0o600)
			}
		}
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("host%d-nftables", n)), []byte(cp.net.rules(n)), 0o600)
	}
	var b strings.Builder
	for _, op := range ops {
		ret := "∞"
		if op.Return != 1<<63-1 {
			ret = time.Duration(op.Return).String()
		}
		fmt.Fprintf(&b, "client %d [%s, %s] %s\n", op.ClientId, time.Duration(op.Call), ret, registerModel.DescribeOperation(op.Input, op.Output))
	}
	_ = os.WriteFile(filepath.Join(dir, "history.txt"), []byte(b.String()), 0o600)
	cp.t.Logf("kept the logs, the nftables rules and the history in %s", dir)
}

// keepDir is the directory that outlives the test, made on first use.
func (cp *campaign) keepDir() string {
	if cp.keptDir == "" {
		dir, err := os.MkdirTemp("", fmt.Sprintf("etcdlet-campaign-%d-", cp.opts.Seed))
		if err != nil {
			cp.t.Errorf("keep the logs: %v", err)
			return ""
		}
		cp.keptDir = dir
	}
	return cp.keptDir
}

// keepVisualization writes porcupine's visualization of a history that is
// not linearizable.
func (cp *campaign) keepVisualization(info porcupine.LinearizationInfo) {
	dir := cp.keepDir()
	if dir == "" {
		return
	}
	path := filepath.Join(dir, "linearizability.html")
	if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
		cp.t.Errorf("visualize the history: %v", err)
		return
	}
	cp.t.Logf("porcupine's visualization: %s", path)
}
