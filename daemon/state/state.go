// Package state persists what etcdlet must remember across restarts: the
// last member list it accepted, the local member's identity, whether this
// node has ever been a member (which forbids bootstrapping a new cluster),
// and the data dirs it moved aside.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/config/trust"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// FileName is the state file inside agent.stateDir.
const FileName = "state.json"

// State is the persisted agent state.
type State struct {
	// LastAppliedList is the last valid member list; it stays in force
	// when the list source is missing or invalid after a restart.
	LastAppliedList []string `json:"lastAppliedList,omitempty"`
	// SelfAddress is the node address in use, so a node that left the
	// list still knows which member was its own.
	SelfAddress string `json:"selfAddress,omitempty"`
	// MemberID and ClusterID (lower-case hex) of the local member.
	MemberID  string `json:"memberID,omitempty"`
	ClusterID string `json:"clusterID,omitempty"`
	// WasMember is set once the local member was seen in a cluster that
	// had quorum. Such a node never bootstraps a new cluster again.
	WasMember bool `json:"wasMember,omitempty"`
	// InitialCluster and InitialClusterState are what the local member was
	// started with. They are rendered again for a running member so that
	// its static-pod manifest stays byte-identical (a changed manifest
	// restarts etcd); etcd ignores them once it has a WAL anyway.
	InitialCluster      string `json:"initialCluster,omitempty"`
	InitialClusterState string `json:"initialClusterState,omitempty"`
	// InitialClusterToken is the token the local member was started with,
	// rendered again like InitialCluster; empty: cluster.token. A founded
	// cluster's token is its own (Founding.Token).
	InitialClusterToken string `json:"initialClusterToken,omitempty"`
	// MemberSince is when this node was last seen to become a member of a
	// cluster (WasMember, ClusterID): an operator's approval given before
	// it is used up.
	MemberSince time.Time   `json:"memberSince,omitzero"`
	Tombstones  []Tombstone `json:"tombstones,omitempty"`
	// Bootstrap is set from the moment this node starts a bootstrap until
	// it is a member of the cluster it formed: its answer to the other
	// listed nodes is then "bootstrapping this list", not "has data".
	Bootstrap *Bootstrap `json:"bootstrap,omitempty"`
	// Founded records that this node founded a cluster on an operator's
	// act (cluster.bootstrap explicit). It is never cleared: a node that
	// founded a cluster never founds another on that act, whatever happens
	// to its data; only a later approval (etcdlet bootstrap --approve) can
	// make it found again.
	Founded *Founding `json:"founded,omitempty"`
	// Seen are the other addresses of every list that named this node
	// while it had never been a member: lists change, and hosts see a
	// change at different times, so a node that may bootstrap asks them
	// too whether they started a cluster. Cleared once it is a member.
	Seen []string `json:"seen,omitempty"`
	// Posted is the list this node last posted for the other agents (its
	// digest, in which cluster, and the revision it was first posted at):
	// a restart posts the same list with the same revision, so that an
	// old list never passes for a newer one.
	Posted *PostedList `json:"posted,omitempty"`
	// Restored records the last time etcdlet restore or recover put a new
	// cluster's data dir in place on this node, until the agent reported
	// it (an Event and a metric at its next start) and after.
	Restored *Restored `json:"restored,omitempty"`
}

// Kinds of Restored.
const (
	RestoredFromSnapshots = "restore" // etcdlet restore
	RecoveredFromData     = "recover" // etcdlet recover
)

// Restored is a restore or a recovery that made this node the only member
// of a new cluster.
type Restored struct {
	Kind      string    `json:"kind"`
	At        time.Time `json:"at"`
	ClusterID string    `json:"clusterID"`
	// Revision is the restored revision, the bump included.
	Revision int64 `json:"revision"`
	// MovedAside is where the data dir it replaced went ("" when there
	// was none).
	MovedAside string `json:"movedAside,omitempty"`
	// Reported is set once an agent reported it.
	Reported bool `json:"reported,omitempty"`
}

// PostedList is what State.Posted records.
type PostedList struct {
	ClusterID string `json:"clusterID"`
	Digest    string `json:"digest"`
	Since     int64  `json:"since"`
}

// MaxSeen bounds State.Seen.
const MaxSeen = 64

// Bootstrap records a bootstrap this node started.
type Bootstrap struct {
	List           []string  `json:"list"`
	InitialCluster string    `json:"initialCluster"`
	Token          string    `json:"token"`
	Started        time.Time `json:"started"`
}

// Founding records a founding of a one-member cluster by this node.
type Founding struct {
	// At is when the founding was decided: an approval given at or before
	// it is spent.
	At time.Time `json:"at"`
	// Via is the operator's act: "approval" (etcdlet bootstrap --approve)
	// or "cluster.founder".
	Via string `json:"via"`
	// Token is the new cluster's initial-cluster-token: cluster.token and
	// the time, so that a cluster founded again is another cluster (new
	// member and cluster IDs), never mistaken for the one before.
	Token string   `json:"token"`
	List  []string `json:"list"`
	// Started: the runtime took the founding member's spec, so the member
	// may have run. Until then (a crash in between) the founding can be
	// completed with the same token: no member of it ever ran.
	Started bool `json:"started,omitempty"`
}

// Founding acts (Founding.Via).
const (
	ViaApproval = "approval"
	ViaFounder  = "cluster.founder"
)

// Spent reports whether an approval given at at was used up by this
// founding: the founding may have run, and the approval is not younger.
// A clock set back makes a new approval look spent: the safe direction
// (approve again once the clock is right).
func (f *Founding) Spent(at time.Time) bool { return f != nil && f.Started && !at.After(f.At) }

// PromiseFile holds this node's bootstrap promise.
const PromiseFile = "bootstrap-promise.json"

// Promise records that this node agreed to bootstrap a cluster of List
// with the other listed nodes: from then on it agrees to no other list
// until that bootstrap is known to have been abandoned (every node of
// List answers that it has not started one and no longer wants it), or
// the node is a member of a cluster. A bootstrap happens only after every
// listed node agreed, so a node that agreed may be part of one whose only
// witness is now silent.
type Promise struct {
	List []string  `json:"list"`
	At   time.Time `json:"at"`
}

// RetireFile holds this node's promise not to start its member of a
// cluster again (Retirement).
const RetireFile = "retired.json"

// Retirement records that this node promised not to start its member of
// ClusterID again, because the node By recovers that cluster from its own
// data (etcdlet recover). It is kept across restarts: were the member to
// start again, it and the hosts the operator named gone for good (should
// they come back with their data) could make that cluster's quorum beside
// the recovered one. The node stops its member, keeps the data until the
// recovered cluster answers at By, then moves it aside, forgets ClusterID
// and joins the recovered cluster; the record goes then.
type Retirement struct {
	ClusterID string    `json:"clusterID"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
}

// WitnessFile holds the last time this node saw both members of its
// two-node cluster healthy (Witness).
const WitnessFile = "twonode.json"

// Witness is the last time this node saw both members of its two-voter
// cluster healthy: the cluster answered with quorum and both were voters
// in raft. The two-node failover (daemon/twonode) forces a one-member
// cluster only after pacemaker fenced the peer later than that, and only
// in the same boot of this host (BootID, /proc/sys/kernel/random/boot_id):
// a host that restarted since may hold data behind a failover the peer
// made meanwhile.
type Witness struct {
	// ClusterID (lower-case hex) and Peer (its address) are the cluster
	// and the other node seen.
	ClusterID string    `json:"clusterID"`
	Peer      string    `json:"peer"`
	BootID    string    `json:"bootID"`
	Healthy   time.Time `json:"healthy"`
}

// OperatorFile holds what the operator told the agent through the CLI
// (etcdlet bootstrap --approve, etcdlet ack-moves). Only the CLI writes
// it; the agent reads it on every pass.
const OperatorFile = "operator.json"

// Operator is the content of OperatorFile.
type Operator struct {
	// BootstrapApproval lets this node bootstrap the list it names without
	// every listed node's answer (a node that answers no still blocks).
	BootstrapApproval *Approval `json:"bootstrapApproval,omitempty"`
	// MovesAcknowledged: data dirs moved aside before this time no longer
	// count towards etcd.moveAsideLimit.
	MovesAcknowledged time.Time `json:"movesAcknowledged,omitzero"`
}

// Approval is the operator's approval of a bootstrap of List.
type Approval struct {
	List []string  `json:"list"`
	At   time.Time `json:"at"`
}

// Tombstone records a data dir moved aside.
type Tombstone struct {
	Time     time.Time `json:"time"`
	MemberID string    `json:"memberID,omitempty"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Reason   string    `json:"reason"`
	// DroppedByList, when set, is the digest of the member list under
	// which the member was removed (membership.Removal): a list that no
	// longer named this node caused the move, and the moves-aside limit
	// does not count it.
	DroppedByList string `json:"droppedByList,omitempty"`
}

// Store reads and writes the state file.
type Store struct {
	Dir string
}

// Load returns the stored state; an absent file is the zero state.
func (s Store) Load() (State, error) {
	var st State
	_, err := s.ReadJSON(FileName, &st)
	return st, err
}

// Save writes the state atomically: temp file, fsync, rename, fsync of
// the directory. A crash leaves the old or the new state, never a mix.
func (s Store) Save(st State) error { return s.WriteJSON(FileName, st) }

// LoadOperator returns what the operator told the agent; an absent file
// is the zero value.
func (s Store) LoadOperator() (Operator, error) {
	var op Operator
	_, err := s.ReadJSON(OperatorFile, &op)
	return op, err
}

// saveOperator writes the operator file atomically.
func (s Store) saveOperator(op Operator) error { return s.WriteJSON(OperatorFile, op) }

// ApproveBootstrap records the operator's approval of a bootstrap of the
// list, given at at, in the operator file; the rest of it stays.
func (s Store) ApproveBootstrap(list []string, at time.Time) error {
	return s.updateOperator(func(op *Operator) {
		op.BootstrapApproval = &Approval{List: slices.Clone(list), At: at.UTC()}
	})
}

// AcknowledgeMoves records that the moves aside made before at no longer
// count against the limit; the rest of the operator file stays.
func (s Store) AcknowledgeMoves(at time.Time) error {
	return s.updateOperator(func(op *Operator) { op.MovesAcknowledged = at.UTC() })
}

// updateOperator changes the operator file in place: only the CLI writes
// it (the agent reads it), so a read and a write need no lock.
func (s Store) updateOperator(change func(*Operator)) error {
	op, err := s.LoadOperator()
	if err != nil {
		return err
	}
	change(&op)
	return s.saveOperator(op)
}

// Clone returns a deep copy.
func (s State) Clone() State {
	c := s
	c.LastAppliedList = slices.Clone(s.LastAppliedList)
	c.Seen = slices.Clone(s.Seen)
	c.Tombstones = slices.Clone(s.Tombstones)
	if s.Bootstrap != nil {
		b := *s.Bootstrap
		b.List = slices.Clone(b.List)
		c.Bootstrap = &b
	}
	if s.Posted != nil {
		p := *s.Posted
		c.Posted = &p
	}
	if s.Founded != nil {
		f := *s.Founded
		f.List = slices.Clone(f.List)
		c.Founded = &f
	}
	return c
}

// Equal reports whether two states would be saved alike.
func (s State) Equal(o State) bool { return reflect.DeepEqual(s, o) }

// AppliedList is LastAppliedList as addresses (entries that do not parse
// are left out).
func (s State) AppliedList() []netip.Addr { return identity.ParseAddrs(s.LastAppliedList) }

// LoadPromise returns the bootstrap promise; nil when there is none.
func (s Store) LoadPromise() (*Promise, error) { return loadOptional[Promise](s, PromiseFile) }

// SavePromise writes the bootstrap promise atomically; nil removes it.
func (s Store) SavePromise(p *Promise) error { return saveOptional(s, PromiseFile, p) }

// LoadRetirement returns this node's retirement; nil when there is none.
func (s Store) LoadRetirement() (*Retirement, error) { return loadOptional[Retirement](s, RetireFile) }

// SaveRetirement writes the retirement atomically; nil removes it.
func (s Store) SaveRetirement(r *Retirement) error { return saveOptional(s, RetireFile, r) }

// LoadWitness returns the two-node witness; nil when there is none.
func (s Store) LoadWitness() (*Witness, error) { return loadOptional[Witness](s, WitnessFile) }

// SaveWitness writes the two-node witness atomically; nil removes it.
func (s Store) SaveWitness(w *Witness) error { return saveOptional(s, WitnessFile, w) }

// loadOptional reads the file name of the state dir; nil when there is
// none.
func loadOptional[T any](s Store, name string) (*T, error) {
	var v T
	if found, err := s.ReadJSON(name, &v); !found || err != nil {
		return nil, err
	}
	return &v, nil
}

// saveOptional writes v to the file name of the state dir atomically;
// nil removes the file (an absent one is fine).
func saveOptional[T any](s Store, name string, v *T) error {
	if v != nil {
		return s.WriteJSON(name, v)
	}
	if err := os.Remove(filepath.Join(s.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// MaxFileBytes bounds what is read of a file of the state dir. They hold
// a few KiB (a short member list, identities, a tombstone of a few hundred
// bytes per data dir moved aside); a larger one is refused, not read.
const MaxFileBytes = 1 << 20

// ReadJSON decodes the JSON file name in the state dir into v; found is false
// (and v untouched) when the file does not exist. The file must be what
// WriteJSON leaves: a regular file of at most MaxFileBytes, the path itself.
// Anything else is an error, never a missing file: an absent state is
// what allows a bootstrap. A FIFO does not block the read, and a symlink
// is refused rather than followed (WriteJSON would replace it by a file
// anyway, so a state read through one would be lost at the next save).
// The state dir and the file must be ones only root can change (package
// trust), checked at every read as the members file is: a planted
// operator.json approves a bootstrap, and a removed state.json reads as a
// node that was never a member.
func (s Store) ReadJSON(name string, v any) (found bool, err error) {
	if err := trust.CheckDir(s.Dir); err != nil {
		return false, fmt.Errorf("state dir (agent.stateDir) must be a directory only root can change: %w", err)
	}
	path := filepath.Join(s.Dir, name)
	data, _, err := config.ReadRegularNoFollow(path, MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if errors.Is(err, config.ErrTooLarge) {
		return false, fmt.Errorf("state file %s %w (a state file holds a few KiB; etcdlet does not read a larger one)", path, err)
	}
	if err != nil {
		return false, fmt.Errorf("state file %s %w", path, err)
	}
	if err := trust.Check(path); err != nil {
		return false, fmt.Errorf("state file must be a file only root can change: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("parse %s: %w", path, err)
	}
	return true, nil
}

// WriteJSON stores v as indented JSON in the file name of the state dir
// (0600, the dir 0700), atomically: temp file, fsync, rename, fsync of the
// directory.
func (s Store) WriteJSON(name string, v any) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return atomicfile.Write(filepath.Join(s.Dir, name), append(data, '\n'), 0o600)
}
