package node

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// board is a one-member etcd holding the agents' Board, and lockers for
// agents that post on it.
func board(t *testing.T, agents int) (endpoints []string, clusterID uint64, lockers []*etcdclient.SessionLocker) {
	t.Helper()
	members := etcdtest.Start(t, 1)
	pool, err := etcdclient.NewPool(config.TLSFiles{}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for range agents {
		l := &etcdclient.SessionLocker{Pool: pool, TTL: 10 * time.Second, CallTimeout: 2 * time.Second}
		t.Cleanup(l.Close)
		lockers = append(lockers, l)
	}
	return etcdtest.ClientURLs(members), members[0].ClusterID(), lockers
}

// postAs posts a list as agent node through l. With a Since it is one
// put, one event to a watch.
func postAs(t *testing.T, l *etcdclient.SessionLocker, endpoints []string, clusterID uint64, node string) {
	t.Helper()
	p := membership.PostedList{Node: node, List: []string{"192.0.2.1", "192.0.2.2"}, ReadAt: time.Now(), Since: 1}
	if err := membership.Post(t.Context(), l, endpoints, clusterID, &p); err != nil {
		t.Fatal(err)
	}
}

// A watch of the posted lists, from the revision an agent read them at,
// hears every other agent's post after that read (also one made before
// the watch started) and every withdrawal once it runs, and neither what
// the read already saw nor this agent's own post. Against a
// real etcd: the revisions, the lease that a withdrawal is, and the order
// of the events are etcd's.
func TestWatchListsHearsTheOtherAgentsAfterARead(t *testing.T) {
	endpoints, clusterID, agents := board(t, 3)
	self, two, three := agents[0], agents[1], agents[2]
	ctx := t.Context()
	post := func(l *etcdclient.SessionLocker, node string) { postAs(t, l, endpoints, clusterID, node) }
	post(two, "192.0.2.2") // before the read: the read has it
	posts, err := membership.ReadBoard(ctx, self, endpoints, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if posts.Revision == 0 || len(posts.Lists) != 1 {
		t.Fatalf("read %d lists at revision %d, want the one posted before it at a revision", len(posts.Lists), posts.Revision)
	}
	// Posts between the read and the watch's start: this agent's own, and
	// the third agent's.
	post(self, "192.0.2.1")
	post(three, "192.0.2.3")
	var heard atomic.Int32
	membership.WatchLists(ctx, self, endpoints, clusterID, "192.0.2.1", posts.Revision, func() { heard.Add(1) })
	hears := func(want int32, after string) {
		t.Helper()
		eventually.True(t, 10*time.Second, "the watch to hear "+after, func() bool { return heard.Load() >= want })
		if got := heard.Load(); got != want {
			t.Fatalf("the watch heard %d changes after %s, want %d", got, after, want)
		}
	}
	hears(1, "the third agent's post")
	// The watch runs now. An agent that goes withdraws its post (its
	// lease is revoked); etcd delivers events in revision order, so a
	// withdrawal heard after a post of this agent means that post was
	// seen and not counted.
	post(self, "192.0.2.1")
	three.Close()
	hears(2, "the third agent's withdrawal")
	post(two, "192.0.2.2")
	hears(3, "the second agent's next post")
}

// While its plan waits for the agents' lists to agree, a node hears the
// next post of another agent at once (ListsChanged), rather than on a
// pass that backs off; a pass whose plan no longer waits ends the watch.
// A real etcd holds the Board.
func TestAWaitingNodeHearsTheNextPost(t *testing.T) {
	endpoints, clusterID, lockers := board(t, 2)
	n := &Node{Deps: Deps{Locker: lockers[0], Log: slog.New(slog.DiscardHandler)}, listsChanged: make(chan struct{}, 1)}
	other := lockers[1]
	ctx := t.Context()
	read := func() {
		t.Helper()
		posts, err := membership.ReadBoard(ctx, n.Locker, endpoints, clusterID)
		if err != nil {
			t.Fatal(err)
		}
		n.boardRead = boardRead{endpoints: endpoints, clusterID: clusterID, self: "192.0.2.1", revision: posts.Revision}
	}
	post := func(node string) { postAs(t, other, endpoints, clusterID, node) }
	heard := func() bool {
		select {
		case <-n.ListsChanged():
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}

	read()
	n.watchLists(ctx, true)
	post("192.0.2.2")
	if !heard() {
		t.Fatal("a waiting node did not hear another agent's post within 10s")
	}
	// The next pass reads again and still waits: the watch starts again
	// from that read, and hears the post after it.
	old := n.watching.revision
	read()
	n.watchLists(ctx, true)
	if n.stopWatch == nil || n.watching.revision != n.boardRead.revision || n.watching.revision == old {
		t.Fatalf("the watch runs from revision %d after a read at %d (the first read was at %d)", n.watching.revision, n.boardRead.revision, old)
	}
	post("192.0.2.3")
	if !heard() {
		t.Fatal("the watch from the second read did not hear the next post within 10s")
	}
	n.watchLists(ctx, false)
	if n.stopWatch != nil {
		t.Error("a node that no longer waits keeps its watch")
	}
}
