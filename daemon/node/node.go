// Package node is the controller of one control-plane node. Every pass it
// looks (Look: the member list, the node's own member and data dir, the
// cluster, and, when a bootstrap could happen, the other listed nodes'
// consent), decides (localmember.Decide, membership.MakePlan), records its
// intent, and acts: starts, stops or moves aside the local member, and
// lets the writer make at most one membership change. Look is the one
// snapshot the agent, `etcdlet status` and `etcdlet render` share.
//
// The controller starts no goroutine and reads the time only through its
// Now: the agent drives it on a timer, the simulator on a schedule. All
// input and output go through small interfaces (Deps).
package node

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// ListSource is the desired member list (memberlist.Source).
type ListSource interface {
	// Refresh re-reads the source; it reports whether the list in force
	// changed.
	Refresh() bool
	// Current is the list in force, and whether there is one.
	Current() ([]netip.Addr, bool)
	// Err is why the latest read was rejected; nil when it was accepted.
	Err() error
}

// DataDir is the local member's data dir (datadir.Dir).
type DataDir interface {
	Inspect() (datadir.Contents, error)
	// Identity is the member and cluster the data belongs to, from its
	// write-ahead log; datadir.ErrNoIdentity without one.
	Identity() (datadir.Identity, error)
	// InUse: an etcd process holds the data (a static pod still stopping).
	InUse() (bool, error)
	// MoveAside renames the data dir aside (never deleting it) and returns
	// where it went ("" when there was nothing to move).
	MoveAside(now time.Time) (string, error)
	// MovedSince counts the data dirs moved aside at or after since.
	MovedSince(since time.Time) (int, error)
	// MountPoint reports whether the data dir is a mount point.
	MountPoint() (bool, error)
	// FreeBytes is the free space on the data dir's filesystem
	// (datadir.FreeBytes).
	FreeBytes() (uint64, error)
	// Survey reads how far the data goes (datadir.ReadSurvey).
	Survey() (datadir.Survey, error)
	// ClusterVersion is the cluster version the backend recorded; "" when
	// not known (datadir.ReadClusterVersion).
	ClusterVersion() (string, error)
}

// Store persists the agent's state and its bootstrap promise, and reads
// what the operator told it (state.Store).
type Store interface {
	Load() (state.State, error)
	Save(state.State) error
	LoadOperator() (state.Operator, error)
	LoadPromise() (*state.Promise, error)
	SavePromise(*state.Promise) error
	LoadRetirement() (*state.Retirement, error)
	SaveRetirement(*state.Retirement) error
	LoadWitness() (*state.Witness, error)
	SaveWitness(*state.Witness) error
}

// Peers reaches the other listed nodes' agents (consent.Client).
type Peers interface {
	// Ask asks a node for its answer, changing nothing there.
	Ask(ctx context.Context, node netip.Addr) (consent.Answer, error)
	// Promise asks a node to agree to a bootstrap of list.
	Promise(ctx context.Context, node netip.Addr, list []string) (consent.Answer, error)
	// Wake asks a node's agent for a pass now. It must not block the
	// caller: a node that is down costs nothing here.
	Wake(node netip.Addr)
}

// Deps is everything a node controller works through.
type Deps struct {
	Settings Settings
	Log      *slog.Logger
	// Now is the clock; time.Now when nil.
	Now     func() time.Time
	Cluster etcdclient.Cluster
	Locker  etcdclient.Locker
	Runtime runtime.Runtime
	DataDir DataDir
	Store   Store
	Peers   Peers
	List    ListSource
	// Detect finds the one local address among the candidates (nodeaddr);
	// used when node.address is not set.
	Detect func(candidates []netip.Addr) (netip.Addr, error)
	// Metrics may be nil (a read-only look).
	Metrics *metrics.Metrics
	// OnChange, when set, hears of every membership call this agent made
	// and its outcome; OnMoveAside of every data dir moved aside (where
	// to, and why). The agent turns them into Kubernetes Events.
	OnChange    func(membership.Action, etcdclient.Result)
	OnMoveAside func(to, reason string)
	// OnSettled, when set, hears when the loop slows to its idle pace:
	// the node is settled, and the work that got it there is done.
	OnSettled func()
	// Policy is the retry policy of membership calls; the agent's default
	// when zero. Its Failed is the node's own (it counts failed attempts).
	Policy etcdclient.Policy
	// InOrder makes every look ask one endpoint after the other: the
	// simulator's deterministic replay (membership.Observer.InOrder).
	InOrder bool
	// PeerListening tells whether the peer listener of a member that does
	// not answer accepts connections; a TCP dial when nil.
	PeerListening func(ctx context.Context, peerURLs []string) bool

	// The two-node failover (daemon/twonode), when pacemaker is
	// configured: Pacemaker is its latest view (nil and why when unknown),
	// BootID the host's boot ID, ForceAlone forces the stopped member's
	// data dir to a one-member cluster (restore.ForceAlone), and
	// OnForcedAlone, when set, hears of each failover and why.
	Pacemaker     func() (*model.Cluster, string)
	BootID        func() string
	ForceAlone    func(ctx context.Context, name string) (moved string, kept uint64, err error)
	OnForcedAlone func(reason string)
}

// Node is the controller of one node.
type Node struct {
	Deps
	scheme   identity.Scheme
	observer *membership.Observer
	writer   *membership.Reconciler

	// Pass-owned bookkeeping: only Pass touches these.
	state        state.State
	saved        state.State // what is on disk
	self         identity.Member
	lastMembers  []membership.Member
	logged       map[string]string // logOnce: category -> last key
	seenExits    uint64            // runtime exit count already accounted for
	exits        int               // consecutive failed starts and exits of the local member
	restartAfter time.Time         // no restart before this (crash-loop backoff)
	settling     int               // passes since the last progress, for settle()
	calmPasses   int               // settled passes in a row, for pace()
	witness      *state.Witness    // the two-node witness, as last written or read
	applied      bool              // the local decision was carried out once (for READY)
	listDigest   string            // the list this node acts on (membership.ListDigest)
	listInForce  time.Time         // since when it is (the removal hold-down)
	// refusing are the last pass's refusals to act, for recordRefusals.
	refusing map[string]localmember.Refusal
	// boardRead is the pass's read of the posted lists; watching the one
	// a watch of them started from, stopWatch ends it (watchLists).
	boardRead, watching boardRead
	stopWatch           context.CancelFunc
	// listsChanged hears from that watch (ListsChanged).
	listsChanged chan struct{}

	// Published for other goroutines (HTTP handlers, the notifier).
	mu     sync.Mutex
	last   Snapshot
	answer consent.Answer
	// promiseMu orders the reads and writes of the bootstrap promise
	// (the peer endpoint's handler and the pass).
	promiseMu sync.Mutex
	// retireMu does the same for the promise not to start the member
	// (Retire).
	retireMu sync.Mutex
}

// New builds a node controller; st is the state loaded from the store.
func New(d Deps, st state.State) *Node {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Policy.Attempts == 0 {
		d.Policy = DefaultPolicy(d.Settings.CallTimeout)
	}
	n := &Node{Deps: d, scheme: d.Settings.Scheme, state: st, saved: st.Clone(), logged: map[string]string{},
		listsChanged: make(chan struct{}, 1)}
	n.observer = &membership.Observer{Cluster: d.Cluster, Timeout: d.Settings.CallTimeout, Scheme: n.scheme, InOrder: d.InOrder,
		PeerListening: d.PeerListening}
	policy := d.Policy
	policy.Failed = n.callFailed
	n.writer = &membership.Reconciler{
		Cluster: d.Cluster, Locker: d.Locker, Observer: n.observer, Log: d.Log, Policy: policy,
		Section: d.Settings.LockSection, LearnerTimeout: d.Settings.LearnerTimeout, Now: d.Now,
		OnChange: n.changed,
	}
	n.answer = consent.Answer{Cluster: d.Settings.Cluster, Token: d.Settings.Token, Phase: consent.Starting}
	return n
}

// DefaultPolicy is how membership calls are retried under the lock:
// quickly at first (a learner that just started catches up in
// milliseconds, and promotion is what a join waits for), then backing off,
// for about two seconds in all.
func DefaultPolicy(callTimeout time.Duration) etcdclient.Policy {
	return etcdclient.Policy{Attempts: 12, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
		Jitter: 0.3, AttemptTimeout: callTimeout}
}

// Close ends the watch of the lists and releases the writer lock's
// session.
func (n *Node) Close() {
	n.watchLists(context.Background(), false)
	n.writer.Close()
}

// Pass runs one reconcile pass and returns when the next should run.
//
// A pass succeeds (etcdlet_reconcile_last_success_timestamp_seconds) when
// it had a member list and this node's address, observed the cluster with
// quorum (a linearizable member list), carried out the local decision or
// deferred it as the decision says (wait, idle, refuse, a data dir still
// in use; not a crash-loop backoff), let the writer make its change, find
// none to make or none allowed yet, or defer to the agent holding the
// writer lock, and saved its state, all without an error.
func (n *Node) Pass(ctx context.Context) time.Duration {
	start := n.Now()
	defer func() {
		if m := n.Metrics; m != nil {
			m.ReconcilePasses.Inc()
			m.ReconcileDuration.Observe(n.Now().Sub(start).Seconds())
		}
	}()
	interval := n.Settings.ReconcileInterval
	snap := n.look(ctx, true)
	n.record(snap)
	n.witnessPair(snap)
	n.logTwoNode(snap)
	// Whatever this pass does next, a bootstrap promise that no longer
	// binds is let go of: other nodes may be waiting on it.
	n.releasePromise(ctx, snap)
	if snap.waiting() {
		n.calmPasses = 0
		n.save()
		return n.settle()
	}
	requeue, localOK := n.actLocal(ctx, snap)
	writeOK := false
	if snap.View.Reached {
		var next time.Duration
		next, writeOK = n.write(ctx, snap)
		requeue = min(requeue, next)
	} else {
		n.watchLists(ctx, false)
	}
	saved := n.save()
	n.publish(snap)
	ok := localOK && writeOK && saved
	if m := n.Metrics; m != nil && ok {
		m.LastSuccessfulPass.Set(float64(n.Now().UnixNano()) / 1e9)
	}
	return n.pace(snap, min(requeue, interval), ok)
}

// Applied reports whether the local decision was carried out at least
// once (the manifest written, the embedded member started), for READY=1.
func (n *Node) Applied() bool { return n.applied }

// Last returns the latest snapshot, for the notifier and the HTTP API.
func (n *Node) Last() Snapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last
}

// Answer is this node's current answer to "may we bootstrap?", served to
// the other agents.
func (n *Node) Answer() consent.Answer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.answer
}

// Self is this node's member identity; zero until it is known.
func (n *Node) Self() identity.Member { return n.Last().Self }

func (n *Node) publish(snap Snapshot) {
	answer := n.ownAnswer(snap)
	n.mu.Lock()
	n.last, n.answer = snap, answer
	n.mu.Unlock()
}

// settle is how soon to look again while something is in motion (a join,
// a change being retried, another writer at work): fast at first, then
// slowing to the reconcile interval, so a join completes quickly but a
// state that persists (a learner whose host is down) is not polled hard.
// Progress (a list change, a change done, the local member started or
// stopped) makes it fast again.
func (n *Node) settle() time.Duration {
	d := time.Duration(float64(100*time.Millisecond) * math.Pow(1.5, float64(n.settling)))
	n.settling++
	return min(d, n.Settings.ReconcileInterval)
}

// Progress says that something changed outside the loop (the list, the
// local member): the next passes look fast again.
func (n *Node) Progress() { n.settling = 0 }

// save writes the state when it changed, and reports whether what is on
// disk is the state now. A pass saves before it acts on an intent that
// must survive a crash (a start, a bootstrap, a join) and once at its end.
func (n *Node) save() bool {
	if n.state.Equal(n.saved) {
		return true
	}
	if err := n.Store.Save(n.state); err != nil {
		n.Log.Error("cannot persist agent state", "error", err)
		return false
	}
	n.saved = n.state.Clone()
	return true
}

// logOnce logs a message only when its key differs from the previous key
// of the same category, so a condition that persists across passes is
// logged once, when it starts or changes.
func (n *Node) logOnce(category, key string, level slog.Level, msg string, attrs ...any) {
	if prev, ok := n.logged[category]; ok && prev == key {
		return
	}
	n.logged[category] = key
	n.Log.Log(context.Background(), level, msg, attrs...)
}

func contains(desired []identity.Member, self identity.Member) bool {
	return slices.ContainsFunc(desired, func(d identity.Member) bool { return d.IP == self.IP })
}

// waiting says the pass ends after looking: no list, or no node identity
// yet.
func (s Snapshot) waiting() bool { return !s.ListOK || !s.Self.IP.IsValid() }

// leaderFirst is how long an agent whose member does not lead lets the
// leader's agent go first once the last agent has posted a new list. The
// waiting agents hear that post together (ListsChanged); when all of them
// observe the cluster and race for the writer lock at once, each call
// waits on the others. The leader's agent is the natural writer (its
// calls are local to the leader); if it is slow or gone, the others
// follow this much later.
const leaderFirst = 30 * time.Millisecond

// YieldToLeader is how long to wait before the pass a post of the lists
// calls for: 0 when this node's member leads, or when no leader is known.
func (n *Node) YieldToLeader() time.Duration {
	s := n.Last()
	if !s.View.Reached || s.View.LeaderID == 0 || s.View.LeaderID == n.localMemberID(&s) {
		return 0
	}
	return leaderFirst
}
