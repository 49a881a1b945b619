package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/daemon/twonode"
)

// Snapshot is what one look found and decided. The agent acts on it;
// `etcdlet status` and `etcdlet render` show it.
type Snapshot struct {
	// List is the member list in force; ListOK says there is one, ListErr
	// why the latest read was rejected.
	List    []netip.Addr
	ListOK  bool
	ListErr error
	// Self is this node's identity; SelfErr says why it is not known.
	Self    identity.Member
	SelfErr error
	Desired []identity.Member
	// Orphaning, when set, says why the list is refused: it shares no
	// address with the cluster's voters. The last list this node applied
	// stays in force meanwhile (Desired is that list).
	Orphaning string
	Runtime   runtime.Status
	Data      datadir.Contents
	// DataIdentity is the data dir's own member and cluster, when it has
	// a write-ahead log.
	DataIdentity datadir.Identity
	// Pinned is the cluster this node belongs to (0: none yet).
	Pinned   uint64
	View     membership.View
	Consent  consent.Verdict
	Decision localmember.Decision
	Plan     membership.Plan
	// TwoNode is the two-node failover's verdict, when it was asked: the
	// cluster of two listed nodes has no quorum, and pacemaker is
	// configured.
	TwoNode *twonode.Verdict
	// HeldChange, when set, is a change of the running member's spec that
	// this node holds: applied, it would restart a member that serves in
	// a cluster of three voters or more. A member-restart task carries it
	// out under the cluster-wide task lock (heldChange).
	HeldChange *HeldChange
}

// Look is the read-only snapshot: it reads the list, the node's member
// and data dir and the cluster, asks the listed nodes' consent when a
// bootstrap could happen, and decides, but changes nothing.
func (n *Node) Look(ctx context.Context) Snapshot { return n.look(ctx, false) }

// look builds the snapshot; in the agent's pass (acting) it also learns
// this node's identity and list for good (state) and logs what it sees.
func (n *Node) look(ctx context.Context, acting bool) Snapshot {
	var s Snapshot
	// The watch reacts at once; this re-read catches what a watch can miss
	// (a file that existed before the watch, a directory replaced).
	n.List.Refresh()
	s.List, s.ListOK = n.List.Current()
	s.ListErr = n.List.Err()
	if !s.ListOK {
		if acting {
			if s.ListErr != nil {
				n.logOnce("list", s.ListErr.Error(), slog.LevelWarn, "waiting for a valid member list", "error", s.ListErr)
			} else {
				n.logOnce("list", "", slog.LevelDebug, "waiting for the members file to settle before the first read")
			}
		}
		return s
	}
	s.Self, s.SelfErr = n.resolveSelf(s.List, acting)
	s.Desired = n.scheme.ForAll(s.List)
	if s.SelfErr != nil {
		// Nothing is decided for a node that cannot tell its own member,
		// but the cluster is still looked at: status must not blame the
		// cluster for what is this host's problem.
		s.View = n.observer.Observe(ctx, membership.Target{Endpoints: membership.Endpoints(s.Desired, n.lastMembers),
			Listed: membership.ClientURLs(s.Desired), Pinned: s.Pinned})
		return s
	}
	s.Runtime = n.Runtime.Status()
	if !s.Runtime.Running {
		// A stopped member is its data's (DataIdentity, the state). The
		// embedded runtime remembers the member it ran last, which is
		// stale once that data went aside (a removal, a recovery on
		// another node): it would pin this node to the cluster it left.
		// The static pod's runtime never knows it at all.
		s.Runtime.MemberID, s.Runtime.ClusterID = 0, 0
	}
	n.lookAtData(&s, acting)

	// Besides the list: this node's own address, the last list it applied
	// and the one it promised to bootstrap, so that a cluster the list no
	// longer names (or does not name yet) is still seen.
	known := []string{s.Self.ClientURL}
	for _, ip := range n.state.AppliedList() {
		known = append(known, n.scheme.For(ip).ClientURL)
	}
	if p, _ := n.Store.LoadPromise(); p != nil {
		for _, ip := range identity.ParseAddrs(p.List) {
			known = append(known, n.scheme.For(ip).ClientURL)
		}
	}
	s.View = n.observer.Observe(ctx, membership.Target{
		Endpoints: membership.Endpoints(s.Desired, n.lastMembers, known...),
		Listed:    membership.ClientURLs(s.Desired),
		Pinned:    s.Pinned,
	})
	n.refuseOrphaning(&s)
	s.Decision = n.decide(ctx, &s)
	s.HeldChange = n.heldChange(&s)
	if acting {
		n.noteList(&s)
	}
	n.lists(ctx, &s, acting)
	stale := []uint64(nil)
	if s.Decision.Kind == localmember.DeclareStale {
		stale = []uint64{s.Decision.StaleID}
	}
	obs := s.View.Observation
	obs.Stale, obs.Local = stale, n.localMemberID(&s)
	s.Plan = membership.MakePlan(s.Desired, obs)
	if !s.View.Reached {
		s.Plan = membership.Plan{}
	}
	return s
}

// lookAtData reads the data dir and what pins this node to a cluster:
// its state, the data's write-ahead log, or the running member.
func (n *Node) lookAtData(s *Snapshot, acting bool) {
	var err error
	if s.Data, err = n.DataDir.Inspect(); err != nil && acting {
		n.logOnce("data", err.Error(), slog.LevelError, "cannot inspect the data dir", "error", err)
	}
	if s.Data.WAL {
		if s.DataIdentity, err = n.DataDir.Identity(); err != nil && acting {
			n.logOnce("identity", err.Error(), slog.LevelWarn, "cannot read the data dir's member and cluster ID", "error", err)
		}
	}
	s.Pinned = parseID(n.state.ClusterID)
	for _, id := range []uint64{s.DataIdentity.ClusterID, s.Runtime.ClusterID} {
		if s.Pinned == 0 {
			s.Pinned = id
		}
	}
}

// refuseOrphaning keeps the last applied list in force when the new one
// shares no address with the cluster's voters.
func (n *Node) refuseOrphaning(s *Snapshot) {
	if !s.View.Reached {
		return
	}
	probe := membership.MakePlan(s.Desired, s.View.Observation)
	if len(probe.Waiting) == 0 || probe.Waiting[0].Reason != membership.WaitOrphaningList {
		return
	}
	s.Orphaning = fmt.Sprintf("the list %v shares no address with the cluster's voters: following it would orphan the cluster", s.List)
	previous := n.state.AppliedList()
	if len(previous) > 0 {
		s.Desired = n.scheme.ForAll(previous)
	}
}

// decide gathers the local member's inputs, asks the listed nodes'
// consent when a bootstrap could happen, and decides.
func (n *Node) decide(ctx context.Context, s *Snapshot) localmember.Decision {
	in := localmember.Inputs{
		Cluster: n.Settings.Cluster, Self: s.Self, Desired: s.Desired, InList: contains(s.Desired, s.Self),
		Running: s.Runtime.Running, Data: s.Data, LocalID: n.localMemberID(s),
		Pinned: s.Pinned, WasMember: n.state.WasMember, View: s.View, Mode: n.Settings.Bootstrap,
		Founder: n.Settings.Founder == s.Self.IP.String(),
		Founded: n.state.Founded != nil && n.state.Founded.Started,
	}
	op, err := n.Store.LoadOperator()
	if err != nil {
		n.logOnce("operator", err.Error(), slog.LevelError, "cannot read what the operator told the agent", "error", err)
	}
	in.Approved = n.approved(op, s.List)
	in.DataProblem = n.dataProblem(s)
	in.JoinSpace = n.joinSpaceProblem(s, in.InList)
	in.VersionChange = n.versionChangeProblem(s)
	in.Flapping = n.flapping(op)
	in.Retired = n.retirement(s.Pinned)
	if n.twoNode(*s) && !s.View.Reached && s.Pinned != 0 && (in.Running || in.Data.WAL) {
		v := n.twoNodeVerdict(*s)
		s.TwoNode = &v
		if v.Force {
			in.ForceAlone = v.Reason
		}
	}
	if in.InList && !in.Running && !in.Data.HasData() && !s.View.Reached && !s.View.Established && !s.View.Ambiguous() {
		switch {
		case in.Mode == config.BootstrapNever:
		case in.Approved || (in.Mode == config.BootstrapExplicit && in.Founder && !in.WasMember && !in.Founded):
			s.Consent = n.askFounding(ctx, s, in.Approved)
		case in.Mode == config.BootstrapConsent:
			s.Consent = n.askConsent(ctx, s)
		}
		in.Consent = s.Consent
	}
	d := localmember.Decide(in)
	if d.Kind == localmember.Found {
		d.Token = n.foundingToken()
	}
	return d
}

// approved reports whether the operator approved a bootstrap of list on
// this node (etcdlet bootstrap --approve), and neither a founding of this
// node nor its joining a cluster since used that approval up: an approval
// founds one cluster, never a second one after the data is lost (two
// approvals given at once: one node founds, the other joins, and its
// approval must not found later).
func (n *Node) approved(op state.Operator, list []netip.Addr) bool {
	a := op.BootstrapApproval
	return a != nil && slices.Equal(a.List, addrStrings(list)) && !n.state.Founded.Spent(a.At) && a.At.After(n.state.MemberSince)
}

// foundingToken is the initial-cluster-token of a cluster this node
// founds: cluster.token and the time, so that a cluster founded again is
// another cluster, with its own member and cluster IDs, which the members
// of the one before never take for theirs. A founding that was recorded
// but never started is completed with its own token.
func (n *Node) foundingToken() string {
	if f := n.state.Founded; f != nil && !f.Started && f.Token != "" {
		return f.Token
	}
	return n.Settings.Token + "-founded-" + n.Now().UTC().Format("20060102T150405Z")
}

// askFounding asks every other listed node, in parallel, for its answer
// (changing nothing there), and whether any of them stands against this
// node founding a cluster (consent.EvaluateFounding).
func (n *Node) askFounding(ctx context.Context, s *Snapshot, approved bool) consent.Verdict {
	self := n.ownAnswer(*s)
	self.Approved = approved
	ctx, cancel := context.WithTimeout(ctx, n.Settings.CallTimeout)
	defer cancel()
	return consent.EvaluateFounding(self, n.askAll(ctx, s.Self.IP, s.List, false, nil))
}

// dataProblem says why the data dir may not be used: its identity and
// the state disagree, or it must be a mount point and is not.
func (n *Node) dataProblem(s *Snapshot) localmember.Problem {
	if known := parseID(n.state.ClusterID); known != 0 && s.DataIdentity.ClusterID != 0 && known != s.DataIdentity.ClusterID {
		return localmember.Problem{Refusal: localmember.RefuseDataMismatch, Reason: fmt.Sprintf("the data dir %s belongs to cluster %s, but this node joined cluster %s: not starting and not moving anything; look at both by hand",
			n.Settings.DataDir, membership.IDString(s.DataIdentity.ClusterID), membership.IDString(known))}
	}
	if p := n.versionProblem(s); p.Reason != "" {
		return p
	}
	if !n.Settings.DataDirMustBeMount {
		return localmember.Problem{}
	}
	mounted, err := n.DataDir.MountPoint()
	switch {
	case err != nil:
		return localmember.Problem{Refusal: localmember.RefuseNotMounted,
			Reason: fmt.Sprintf("etcd.dataDirMustBeMount: cannot tell whether %s is a mount point: %v", n.Settings.DataDir, err)}
	case !mounted:
		return localmember.Problem{Refusal: localmember.RefuseNotMounted,
			Reason: fmt.Sprintf("etcd.dataDirMustBeMount: %s is not a mount point; a disk that failed to mount must not pass for lost data: mount it, or set dataDirMustBeMount false", n.Settings.DataDir)}
	}
	return localmember.Problem{}
}

// flapping says why the node does not rejoin: it moved its data aside
// etcd.moveAsideLimit times within etcd.moveAsideWindow, counting only
// moves after the operator's last acknowledgement, and not the moves
// that a list caused (it no longer named this node, and a writer removed
// the member): that is a list doing its work, no sign that something keeps
// removing this member. It names the reasons the moves were made for.
func (n *Node) flapping(op state.Operator) string {
	window := n.Settings.MoveAsideWindow
	since := n.Now().Add(-window)
	if op.MovesAcknowledged.After(since) {
		since = op.MovesAcknowledged
	}
	reasons := map[string]int{}
	moved := 0
	for _, t := range n.state.Tombstones {
		if !t.Time.Before(since) && t.DroppedByList == "" {
			moved++
			reasons[t.Reason]++
		}
	}
	if onDisk, err := n.DataDir.MovedSince(since); err == nil && len(n.state.Tombstones) == 0 && onDisk > moved {
		moved = onDisk // the state was lost: whatever the disk shows counts
	}
	if moved < n.Settings.MoveAsideLimit {
		return ""
	}
	var why []string
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		why = append(why, fmt.Sprintf("%s (%d×)", r, reasons[r]))
	}
	if len(why) == 0 {
		why = []string{"reasons not recorded (the agent's state was lost)"}
	}
	return fmt.Sprintf("the data dir was moved aside %d times within %s, not counting removals by a list that dropped this node (etcd.moveAsideLimit %d): %s. Something removes this member again and again although the list names it, or destroys its data: the agents' logs name each removal ('membership change', with the writer's node), an operator or another tool may be at work. Find out what, then run 'etcdlet ack-moves' to let the node rejoin",
		moved, window, n.Settings.MoveAsideLimit, strings.Join(why, "; "))
}

// askConsent asks every other listed node, in parallel, to agree to a
// bootstrap of this list; and every node of an earlier list that named
// this node, and that the list no longer names, to promise the same: it
// must hold no data and have started no bootstrap (hosts see a list
// change at different times, and such a node may be bootstrapping the
// list it still reads).
func (n *Node) askConsent(ctx context.Context, s *Snapshot) consent.Verdict {
	self := n.ownAnswer(*s)
	ctx, cancel := context.WithTimeout(ctx, n.Settings.CallTimeout)
	defer cancel()
	asked := n.askAll(ctx, s.Self.IP, s.List, true, self.List)
	v := consent.Evaluate(self, asked)
	var seen []netip.Addr
	for _, ip := range identity.ParseAddrs(n.state.Seen) {
		if !slices.Contains(s.List, ip) {
			seen = append(seen, ip)
		}
	}
	for _, a := range n.askAll(ctx, s.Self.IP, seen, true, self.List) {
		why := startedNothing(a)
		switch {
		case why == "" && !slices.Equal(a.Answer.Promised, self.List):
			v.Refusing = append(v.Refusing, fmt.Sprintf("%s (of an earlier list; %s)", a.Node, promisedElse(a.Answer)))
		case why != "" && a.Err != nil && !consent.IsRefused(a.Err):
			v.Silent = append(v.Silent, fmt.Sprintf("%s (of an earlier list; %s)", a.Node, why))
		case why != "":
			v.Refusing = append(v.Refusing, fmt.Sprintf("%s (of an earlier list; %s)", a.Node, why))
		}
	}
	v.Granted = v.Granted && len(v.Refusing) == 0 && len(v.Silent) == 0
	return v
}

func promisedElse(a consent.Answer) string {
	if len(a.Promised) > 0 {
		return fmt.Sprintf("it promised to bootstrap [%s]", strings.Join(a.Promised, " "))
	}
	return "it made no promise"
}

// startedNothing says why a node's answer does not confirm that it holds
// no data and started no bootstrap; "" when it does.
func startedNothing(a consent.Asked) string {
	switch {
	case a.Err != nil:
		return a.Err.Error()
	case a.Answer.Phase == consent.Fresh || a.Answer.Phase == consent.NotListed || a.Answer.Phase == consent.Promised ||
		a.Answer.Phase == consent.Explicit:
		return ""
	default:
		return string(a.Answer.Phase) + ": " + a.Answer.Detail
	}
}

// AskPeers asks every other listed node, in parallel, for its answer,
// changing nothing there.
func (n *Node) AskPeers(ctx context.Context, s Snapshot) []consent.Asked {
	ctx, cancel := context.WithTimeout(ctx, n.Settings.CallTimeout)
	defer cancel()
	return n.askAll(ctx, s.Self.IP, s.List, false, nil)
}

// askAll asks every node but self, in parallel: for its answer, or, with
// promise, to agree to a bootstrap of list. The requests leave from self's
// address: the other agents take the caller for the node at the address
// it calls from.
func (n *Node) askAll(ctx context.Context, self netip.Addr, nodes []netip.Addr, promise bool, list []string) []consent.Asked {
	ctx = consent.WithSource(ctx, self)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		asked []consent.Asked
	)
	for _, ip := range nodes {
		if ip == self {
			continue
		}
		wg.Go(func() {
			var a consent.Answer
			var err error
			if promise {
				a, err = n.Peers.Promise(ctx, ip, list)
			} else {
				a, err = n.Peers.Ask(ctx, ip)
			}
			mu.Lock()
			asked = append(asked, consent.Asked{Node: ip, Answer: a, Err: err})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(asked, func(a, b consent.Asked) int { return a.Node.Compare(b.Node) })
	return asked
}

// OwnAnswer is this node's answer to "may we bootstrap?" as the snapshot
// shows it.
func (n *Node) OwnAnswer(s Snapshot) consent.Answer { return n.ownAnswer(s) }

func (n *Node) ownAnswer(s Snapshot) consent.Answer {
	a := consent.Answer{Cluster: n.Settings.Cluster, Token: n.Settings.Token, Node: s.Self.IP.String(),
		List: addrStrings(s.List), Phase: consent.Starting, Founder: n.Settings.Founder}
	if !s.ListOK || !s.Self.IP.IsValid() {
		return a
	}
	op, _ := n.Store.LoadOperator()
	if a.Approved = n.approved(op, s.List); a.Approved {
		a.ApprovedAt = op.BootstrapApproval.At
	}
	b := n.state.Bootstrap
	f := n.state.Founded
	bootstrapping := b != nil && slices.Equal(b.List, a.List) && b.Token == a.Token && !n.state.WasMember
	if s.Pinned != 0 {
		a.ClusterID = membership.IDString(s.Pinned)
	}
	switch {
	case bootstrapping:
		a.Phase, a.Detail = consent.Bootstrapping, "started at "+b.Started.UTC().Format(time.RFC3339)
	case s.Data.HasData():
		a.Phase, a.Detail = consent.HasData, "the data dir holds etcd data"
		if s.DataIdentity.MemberID != 0 {
			a.Detail = fmt.Sprintf("the data dir holds member %s of cluster %s", membership.IDString(s.DataIdentity.MemberID), membership.IDString(s.DataIdentity.ClusterID))
		}
	case s.Runtime.Running:
		a.Phase, a.Detail = consent.HasData, "its member runs"
	case f != nil && (!f.Started || n.state.ClusterID == ""):
		// The mark other founders look for before they start: of two acts
		// at once, at least one sees the other's (markFounding). It stands
		// until the founded member is seen in its cluster (noteMembership
		// pins it): between the start and that, the data dir may not show
		// a write-ahead log yet, and the spent approval no longer does.
		a.Phase, a.Detail = consent.Founding, "it founds a one-member cluster on "+f.Via+" (decided at "+f.At.UTC().Format(time.RFC3339)+")"
	case n.state.WasMember && !a.Approved:
		a.Phase, a.Detail = consent.Member, "it was a member of cluster "+n.state.ClusterID
	case !contains(n.scheme.ForAll(s.List), s.Self):
		a.Phase = consent.NotListed
	case n.Settings.Bootstrap != config.BootstrapConsent:
		a.Phase, a.Detail = consent.Explicit, "no data, never a member; it forms a cluster only on an operator's act (cluster.bootstrap "+n.Settings.Bootstrap+")"
	default:
		a.Phase = consent.Fresh
		if n.state.WasMember {
			a.Detail = "it was a member, lost its data, and the operator approved a new bootstrap"
		}
	}
	return n.promiseStands(a)
}

// resolveSelf fixes this node's member identity for the agent's lifetime:
// node.address, or the one local address among the listed ones and the
// address used before a restart.
func (n *Node) resolveSelf(listed []netip.Addr, acting bool) (identity.Member, error) {
	if n.self.IP.IsValid() {
		return n.self, nil
	}
	ip, detected, err := n.nodeAddress(listed)
	if err != nil {
		if acting {
			n.logOnce("self", err.Error(), slog.LevelError, "cannot tell which member is this node", "error", err)
		}
		return identity.Member{}, err
	}
	self := n.scheme.For(ip)
	if !acting {
		return self, nil
	}
	if detected {
		n.Log.Info("detected node address", "address", ip.String())
	}
	n.self = self
	n.Log = n.Log.With("self", self.Name)
	n.writer.Log = n.Log
	n.state.SelfAddress = ip.String()
	return self, nil
}

// nodeAddress is this host's member IP: node.address, or the one local
// address among the listed ones and the one used before a restart.
func (n *Node) nodeAddress(listed []netip.Addr) (ip netip.Addr, detected bool, err error) {
	return NodeAddress(n.Settings.Address, listed, n.state, n.Detect)
}

// NodeAddress is this host's member IP: configured (node.address, when
// valid), or the one local address among the listed ones and the one used
// before a restart (so a node that left the list still knows its member).
// detected says it was found among local addresses.
func NodeAddress(configured netip.Addr, listed []netip.Addr, st state.State, detect func([]netip.Addr) (netip.Addr, error)) (ip netip.Addr, detected bool, err error) {
	if configured.IsValid() {
		return configured, false, nil
	}
	candidates := slices.Clone(listed)
	if prev, err := netip.ParseAddr(st.SelfAddress); err == nil && !slices.Contains(candidates, prev) {
		candidates = append(candidates, prev)
	}
	if detect == nil {
		return netip.Addr{}, false, errors.New("node.address is not set and no address detection is available")
	}
	ip, err = detect(candidates)
	return ip, err == nil, err
}

// localMemberID is the local member's ID: what the runtime knows, else
// what was recorded, else what the data dir's write-ahead log says, else
// (a static pod's etcd, which only the cluster can tell about) the member
// with this node's peer URL whose own endpoint answered as that member.
func (n *Node) localMemberID(s *Snapshot) uint64 {
	for _, id := range []uint64{s.Runtime.MemberID, parseID(n.state.MemberID), s.DataIdentity.MemberID} {
		if id != 0 {
			return id
		}
	}
	if !s.Runtime.Running {
		return 0
	}
	if m, ok := s.View.Answering(s.Self.PeerURL); ok {
		return m.ID
	}
	return 0
}

func parseID(hex string) uint64 {
	id, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0
	}
	return id
}

// addrStrings is a list as the agents compare it: sorted text forms.
func addrStrings(addrs []netip.Addr) []string {
	return slices.Sorted(slices.Values(identity.AddrStrings(addrs)))
}
