package membership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

// A list change never reaches every host at the same instant, so agents
// hold different lists for a while. Each agent posts the list it acts on
// (PostedList) on the Board, on its lease, and plans with the others'
// posts: a change about an address that the lists disagree on waits
// (WaitListsDisagree) until they agree, so that no agent undoes what
// another did under another list. An agent whose lease expired (it is
// down, or cannot reach the cluster) has no post and cannot act either:
// it blocks nobody. The writer re-reads the posts under the lock.

// PostedList is what one agent posted: the member list it acts on.
type PostedList struct {
	// Node is the posting agent's node address.
	Node string `json:"node"`
	// List is the member list, sorted canonical addresses.
	List []string `json:"list"`
	// Since is the revision at which this agent first posted this list:
	// lists posted in one cluster are ordered by it, whatever the hosts'
	// clocks say.
	Since int64 `json:"since"`
	// ReadAt is when the agent took the list in force, by its clock: for
	// people.
	ReadAt time.Time `json:"readAt"`
	// Refusing, when set, says why this node will not join (the
	// moves-aside limit, too little disk space for the copy of the
	// keyspace): it is not added, and a learner for it that does not run
	// is removed, so that it does not hold etcd's learner slot.
	Refusing string `json:"refusing,omitempty"`
}

// Digest names the list in a few characters, for logs, status and
// metrics: the same list has the same digest on every host.
func (p PostedList) Digest() string { return ListDigest(p.List) }

// Has reports whether the list names addr.
func (p PostedList) Has(addr string) bool { return slices.Contains(p.List, addr) }

func (p PostedList) String() string {
	s := fmt.Sprintf("%s holds %s [%s] since %s", p.Node, p.Digest(), strings.Join(p.List, " "), p.ReadAt.UTC().Format(time.RFC3339))
	if p.Refusing != "" {
		s += " (refusing to join: " + p.Refusing + ")"
	}
	return s
}

// ListDigest names a list (sorted canonical addresses): the first 12 hex
// digits of the SHA-256 of the addresses joined by commas.
func ListDigest(list []string) string {
	sum := sha256.Sum256([]byte(strings.Join(list, ",")))
	return hex.EncodeToString(sum[:6])
}

// SortedList is a list as the agents post and compare it.
func SortedList(addrs []netip.Addr) []string {
	return slices.Sorted(slices.Values(identity.AddrStrings(addrs)))
}

// Removal records that a writer removed a member under a list: an agent
// whose list is older (posted at a lower revision) never adds it back.
type Removal struct {
	Address  string    `json:"address"`
	MemberID string    `json:"memberID"`
	By       string    `json:"by"`
	Digest   string    `json:"digest"`
	Since    int64     `json:"since"`
	At       time.Time `json:"at"`
}

// Board keys of a cluster (etcdclient.ClusterKeys).
func listsPrefix(clusterID uint64) string    { return etcdclient.ClusterKeys(clusterID) + "lists/" }
func removalsPrefix(clusterID uint64) string { return etcdclient.ClusterKeys(clusterID) + "removed/" }

// ListKey is where node posts its list.
func ListKey(clusterID uint64, node string) string { return listsPrefix(clusterID) + node }

// RemovalKey is where the removal of the member of addr is recorded.
func RemovalKey(clusterID uint64, addr string) string { return removalsPrefix(clusterID) + addr }

// Post puts own on the Board. A list posted without a Since gets the
// revision of its first post as its Since (a second put then says so):
// the same list posted again by the same agent (a new lease, a restart)
// must keep its Since, so that an old list never passes for a new one.
func Post(ctx context.Context, b etcdclient.Board, endpoints []string, clusterID uint64, own *PostedList) error {
	key := ListKey(clusterID, own.Node)
	value, err := json.Marshal(own)
	if err != nil {
		return err
	}
	rev, err := b.Post(ctx, endpoints, clusterID, key, value)
	if err != nil || own.Since != 0 {
		return err
	}
	posted := *own
	posted.Since = rev
	if value, err = json.Marshal(posted); err != nil {
		return err
	}
	if _, err := b.Post(ctx, endpoints, clusterID, key, value); err != nil {
		return err
	}
	own.Since = rev
	return nil
}

// BoardPosts is what the Board holds about lists.
type BoardPosts struct {
	Lists    []PostedList
	Removals []Removal
	// Revision is the revision the lists were read at (WatchLists).
	Revision int64
}

// ReadBoard reads the posted lists and recorded removals of a cluster.
// An entry that cannot be decoded is skipped: it names nobody's list.
func ReadBoard(ctx context.Context, b etcdclient.Board, endpoints []string, clusterID uint64) (BoardPosts, error) {
	var out BoardPosts
	lists, rev, err := b.Read(ctx, endpoints, clusterID, listsPrefix(clusterID))
	if err != nil {
		return out, err
	}
	out.Revision = rev
	for _, v := range lists {
		var p PostedList
		if json.Unmarshal(v, &p) == nil && p.Node != "" {
			out.Lists = append(out.Lists, p)
		}
	}
	slices.SortFunc(out.Lists, func(a, b PostedList) int { return strings.Compare(a.Node, b.Node) })
	removals, _, err := b.Read(ctx, endpoints, clusterID, removalsPrefix(clusterID))
	if err != nil {
		return out, err
	}
	for _, v := range removals {
		var r Removal
		if json.Unmarshal(v, &r) == nil && r.Address != "" {
			out.Removals = append(out.Removals, r)
		}
	}
	slices.SortFunc(out.Removals, func(a, b Removal) int { return strings.Compare(a.Address, b.Address) })
	return out, nil
}

// WatchLists calls changed whenever an agent other than self posts or
// withdraws a list after revision after (etcdclient.Board.Watch).
func WatchLists(ctx context.Context, b etcdclient.Board, endpoints []string, clusterID uint64, self string, after int64, changed func()) {
	own := ListKey(clusterID, self)
	b.Watch(ctx, endpoints, clusterID, listsPrefix(clusterID), after, func(key string) {
		if key != own {
			changed()
		}
	})
}

// Agreement is what the planner knows of the agents' lists, besides its
// own desired list.
type Agreement struct {
	// Known says the Board was read; without it nothing is known of the
	// others' lists (a look that could not read it), and the locked step
	// never acts without having read it.
	Known bool
	// Own is this agent's post of the list it plans with; its Since is 0
	// while it is not posted.
	Own PostedList
	// Others are the other agents' posts.
	Others []PostedList
	// Removals are the recorded removals.
	Removals []Removal
	// Stable is how long this agent's list has been in force; HoldDown
	// how long it must be before a healthy voter is removed (a list that
	// flaps, or is written in two steps, must cost nobody).
	Stable, HoldDown time.Duration
}

// disagreeing lists the other agents whose list differs from own about
// addr: the one names it and the other does not.
func (a Agreement) disagreeing(addr string, own bool) []PostedList {
	var out []PostedList
	for _, p := range a.Others {
		if p.Has(addr) != own {
			out = append(out, p)
		}
	}
	return out
}

// refusing is the post of the node at addr when it refuses to join.
func (a Agreement) refusing(addr string) (PostedList, bool) {
	for _, p := range a.Others {
		if p.Node == addr && p.Refusing != "" {
			return p, true
		}
	}
	if a.Own.Node == addr && a.Own.Refusing != "" {
		return a.Own, true
	}
	return PostedList{}, false
}

// removedUnderNewer is the removal of addr's member under a list newer
// than the one this agent plans with, if any.
func (a Agreement) removedUnderNewer(addr string) (Removal, bool) {
	for _, r := range a.Removals {
		if r.Address == addr && (a.Own.Since == 0 || r.Since > a.Own.Since) {
			return r, true
		}
	}
	return Removal{}, false
}

func describeLists(ps []PostedList) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}
