// Package state persists what etcdlet must remember across restarts: the
// last member list it accepted, the local member's identity, whether this
// node has ever been a member (which forbids bootstrapping a new cluster),
// and the data dirs it moved aside.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdlet/etcdlet/daemon/atomicfile"
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
	InitialCluster      string      `json:"initialCluster,omitempty"`
	InitialClusterState string      `json:"initialClusterState,omitempty"`
	Tombstones          []Tombstone `json:"tombstones,omitempty"`
}

// Tombstone records a data dir moved aside.
type Tombstone struct {
	Time     time.Time `json:"time"`
	MemberID string    `json:"memberID,omitempty"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Reason   string    `json:"reason"`
}

// Store reads and writes the state file.
type Store struct {
	Dir string
}

// Load returns the stored state; an absent file is the zero state.
func (s Store) Load() (State, error) {
	var st State
	data, err := os.ReadFile(filepath.Join(s.Dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("parse state %s: %w", filepath.Join(s.Dir, FileName), err)
	}
	return st, nil
}

// Save writes the state atomically: temp file, fsync, rename, fsync of
// the directory. A crash leaves the old or the new state, never a mix.
func (s Store) Save(st State) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return atomicfile.Write(filepath.Join(s.Dir, FileName), append(data, '\n'), 0o600)
}
