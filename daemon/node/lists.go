package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// The agents' lists (membership/lists.go): every pass that reaches the
// cluster posts the list this node acts on, on its lease, then reads the
// others' posts, which the planner weighs; the writer reads them again
// under the lock.

// noteList records when the list this node acts on took force: the
// removal of a healthy voter waits until it held for the hold-down. A
// restart counts as a change (the hold-down starts again).
func (n *Node) noteList(s *Snapshot) {
	digest := membership.ListDigest(desiredList(s))
	if digest != n.listDigest {
		n.listDigest, n.listInForce = digest, n.Now()
	}
}

// ownPost is this node's post of the list it acts on (Since from the
// state when this list was posted before, in this cluster).
func (n *Node) ownPost(s Snapshot) membership.PostedList {
	p := membership.PostedList{Node: s.Self.IP.String(), List: desiredList(&s), ReadAt: n.listInForce.UTC()}
	if d := s.Decision; d.Kind == localmember.Refuse && (d.Refusal == localmember.RefuseMovesAside || d.Refusal == localmember.RefuseDiskSpace) {
		p.Refusing = d.Reason
	}
	if st := n.state.Posted; st != nil && st.ClusterID == membership.IDString(s.View.ClusterID) && st.Digest == p.Digest() {
		p.Since = st.Since
	}
	return p
}

// lists reads the agents' posts into the view and, when acting (the
// agent's pass), first posts this node's list unless the Board has it as
// it is. A node posts only to the cluster it belongs to, or, before it
// belongs to one, to the one it reached.
func (n *Node) lists(ctx context.Context, s *Snapshot, acting bool) {
	v := &s.View
	if n.Locker == nil || !v.Reached || v.ClusterID == 0 || (s.Pinned != 0 && s.Pinned != v.ClusterID) {
		return
	}
	var endpoints []string
	for _, m := range v.Members {
		if m.InRaft() && !m.IsLearner && len(m.ClientURLs) > 0 {
			endpoints = append(endpoints, m.ClientURLs[0])
		}
	}
	posts, err := membership.ReadBoard(ctx, n.Locker, endpoints, v.ClusterID)
	if err != nil {
		if acting {
			n.logOnce("board", err.Error(), slog.LevelWarn, "cannot read the other agents' member lists", "error", err)
		}
		return
	}
	if acting {
		n.boardRead = boardRead{endpoints: endpoints, clusterID: v.ClusterID, self: s.Self.IP.String(), revision: posts.Revision}
	}
	own := n.ownPost(*s)
	a := membership.Agreement{Known: true, Own: own, Removals: posts.Removals,
		Stable: n.Now().Sub(n.listInForce), HoldDown: n.Settings.RemovalHoldDown}
	a.Own.Since = 0
	var onBoard *membership.PostedList
	for _, p := range posts.Lists {
		switch {
		case p.Node != own.Node:
			a.Others = append(a.Others, p)
		case p.Digest() == own.Digest():
			onBoard = &p
		}
	}
	switch {
	case onBoard != nil && !acting:
		a.Own = *onBoard // a look (status) shows the post as the agent made it
	case onBoard != nil && postedValue(*onBoard) == postedValue(own):
		a.Own.Since = onBoard.Since
	}
	if acting && a.Own.Since == 0 {
		err := n.post(ctx, endpoints, v.ClusterID, &own)
		switch {
		case etcdclient.RefusesWrites(err):
			// An alarm (NOSPACE, CORRUPT): no agent can post, and only the
			// leading member's agent changes membership (LeaderLock), on
			// its own list alone, as before there was a Board: replacing
			// a corrupt member is what ends a CORRUPT alarm.
			n.logOnce("post", err.Error(), slog.LevelWarn, "the cluster refuses writes (an alarm): the agents' lists cannot be posted or compared; only the leading member's agent changes membership, on its own list, until the alarm is cleared", "error", err)
			v.Lists = membership.Agreement{}
			return
		case err != nil:
			n.logOnce("post", err.Error(), slog.LevelWarn, "cannot post this node's member list for the other agents; no membership change follows it meanwhile", "error", err)
		default:
			a.Own.Since = own.Since
		}
	}
	v.Lists = a
	if acting {
		n.noteDisagreement(a)
	}
}

// post puts own on the Board (membership.Post), and keeps the Since of a
// list posted for the first time in the state.
func (n *Node) post(ctx context.Context, endpoints []string, clusterID uint64, own *membership.PostedList) error {
	first := own.Since == 0
	if err := membership.Post(ctx, n.Locker, endpoints, clusterID, own); err != nil {
		return err
	}
	if first {
		n.state.Posted = &state.PostedList{ClusterID: membership.IDString(clusterID), Digest: own.Digest(), Since: own.Since}
		n.Log.Info("posted this node's member list for the other agents", "digest", own.Digest(), "list", own.List, "since", own.Since)
	}
	return nil
}

// boardRead is where, as whom and at which revision a pass read the
// posted lists.
type boardRead struct {
	endpoints []string
	clusterID uint64
	self      string
	revision  int64
}

func (b boardRead) equal(o boardRead) bool {
	return b.clusterID == o.clusterID && b.self == o.self && b.revision == o.revision && slices.Equal(b.endpoints, o.endpoints)
}

// watchLists keeps a watch of the posted lists while the plan waits for
// them to agree (on), from the revision this pass read them at, so that
// another agent's post wakes this one at once (ListsChanged) instead of a
// backed-off pass later: a list change reaches the hosts within
// milliseconds of each other, and the last to post decides when the
// change can go ahead. A new read starts the watch again from its own
// revision (what came before, the read saw); off ends it.
func (n *Node) watchLists(ctx context.Context, on bool) {
	if n.stopWatch != nil && (!on || !n.watching.equal(n.boardRead)) {
		n.stopWatch()
		n.stopWatch = nil
	}
	if !on || n.stopWatch != nil || n.boardRead.revision == 0 {
		return
	}
	b := n.boardRead
	wctx, stop := context.WithCancel(ctx)
	n.watching, n.stopWatch = b, stop
	membership.WatchLists(wctx, n.Locker, b.endpoints, b.clusterID, b.self, b.revision, func() {
		select {
		case n.listsChanged <- struct{}{}:
		default:
		}
	})
}

// ListsChanged receives when another agent posted or withdrew a list
// while this node's plan waited for the lists to agree.
func (n *Node) ListsChanged() <-chan struct{} { return n.listsChanged }

// postedValue is what a post says, for telling whether the Board has this
// node's post as it is.
func postedValue(p membership.PostedList) string {
	return fmt.Sprintf("%s|%d|%s|%s", p.Digest(), p.Since, p.ReadAt.UTC().Format(time.RFC3339Nano), p.Refusing)
}

// noteDisagreement logs, once per change, which agents hold another list,
// and counts them.
func (n *Node) noteDisagreement(a membership.Agreement) {
	var differ []membership.PostedList
	for _, p := range a.Others {
		if p.Digest() != a.Own.Digest() {
			differ = append(differ, p)
		}
	}
	if n.Metrics != nil {
		n.Metrics.ListsDiffering.Set(float64(len(differ)))
	}
	key := ""
	for _, p := range differ {
		key += p.Node + "=" + p.Digest() + " "
	}
	if key == "" {
		n.logOnce("lists", "", slog.LevelInfo, "the agents' member lists agree", "digest", a.Own.Digest())
		return
	}
	desc := make([]string, len(differ))
	for i, p := range differ {
		desc[i] = p.String()
	}
	n.logOnce("lists", key, slog.LevelWarn, "other agents hold another member list; changes about the addresses they disagree on wait until the lists agree",
		"digest", a.Own.Digest(), "list", a.Own.List, "others", desc)
}

// listState is what the writer needs of this node's list for a step.
func (n *Node) listState(s Snapshot) membership.ListState {
	listed := slices.Clone(s.List)
	return membership.ListState{Own: n.ownPost(s), InForce: n.listInForce, HoldDown: n.Settings.RemovalHoldDown,
		Unchanged: func() error {
			n.List.Refresh()
			now, ok := n.List.Current()
			if !ok || !slices.Equal(now, listed) {
				return fmt.Errorf("%w: planned with %v, the list in force is now %v", etcdclient.ErrListChanged, listed, now)
			}
			return nil
		}}
}

// desiredList is the list this node acts on, as the agents post it.
func desiredList(s *Snapshot) []string {
	list := identity.IPs(s.Desired)
	slices.Sort(list)
	return list
}
