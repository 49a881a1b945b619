package restore

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/state"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// restoredSuffix names the file beside the data dir that says a restored
// (or recovered) data dir is complete and waits to be swapped in: a crash
// after the old data dir went aside must not leave the node without data.
// It holds the member the restored data belongs to.
const restoredSuffix = ".etcdlet-restore.done"

// restoredMember is what the mark records: enough to pin the agent's
// state to the restored cluster without the plan, and what the agent
// reports of it.
type restoredMember struct {
	Name     string `json:"name"`
	PeerURL  string `json:"peerURL"`
	IP       string `json:"ip"`
	Kind     string `json:"kind,omitempty"`
	Revision int64  `json:"revision,omitempty"`
}

// swapRestored puts the complete restored dir staging in place of the
// data dir (which goes aside, kept) and pins the agent's state to the
// restored cluster. The mark comes first and goes last: a crash anywhere
// in between is finished by ResumeRestored.
func swapRestored(s Settings, p Plan, staging string, revision int64, now time.Time) (moved string, err error) {
	m := restoredMember{Name: p.Self.Name, PeerURL: p.Self.PeerURL, IP: p.Self.IP.String(), Kind: p.Kind, Revision: revision}
	mark, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(filepath.Clean(p.DataDir)+restoredSuffix, append(mark, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("mark the restored data dir complete: %w", err)
	}
	return finishRestored(s, p.DataDir, m, staging, now)
}

// ResumeRestored finishes a restore or a recovery that a crash
// interrupted once the restored data dir was complete: the old data dir
// goes aside if it is still there, the restored one takes its place, and
// the agent's state is pinned to the restored cluster. It reports whether
// there was one to finish, and where the old data dir went.
func ResumeRestored(s Settings, now time.Time) (resumed bool, moved string, err error) {
	data, err := os.ReadFile(filepath.Clean(s.DataDir) + restoredSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return false, "", nil
	} else if err != nil {
		return false, "", err
	}
	var m restoredMember
	if err := json.Unmarshal(data, &m); err != nil {
		return false, "", fmt.Errorf("read %s%s: %w", s.DataDir, restoredSuffix, err)
	}
	if _, err := netip.ParseAddr(m.IP); err != nil {
		return false, "", fmt.Errorf("read %s%s: ip: %w", s.DataDir, restoredSuffix, err)
	}
	moved, err = finishRestored(s, s.DataDir, m, filepath.Clean(s.DataDir)+stagingSuffix, now)
	return true, moved, err
}

// finishRestored swaps the marked restored dir in, when it is still
// beside the data dir, pins the state and drops the mark. Each step can
// be done again: the staging dir is gone once it is in place, and the
// pinning reads the identity from the data dir.
func finishRestored(s Settings, dataDir string, m restoredMember, staging string, now time.Time) (moved string, err error) {
	if _, err := os.Stat(staging); err == nil {
		c, err := datadir.Inspect(dataDir)
		if err != nil {
			return "", err
		}
		if c.HasData() || c.WAL {
			if moved, err = datadir.MoveAside(dataDir, now); err != nil {
				return "", err
			}
		}
		if err := swapIn(staging, dataDir); err != nil {
			return moved, err
		}
		if err := atomicfile.SyncDir(filepath.Dir(filepath.Clean(dataDir))); err != nil {
			return moved, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := pinRestored(s, dataDir, m, moved, now); err != nil {
		return moved, err
	}
	if err := os.Remove(filepath.Clean(dataDir) + restoredSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return moved, err
	}
	return moved, nil
}

// pinRestored pins the agent's state to the cluster the restored data dir
// belongs to, this node its only member, and records the restore for the
// agent to report. A mark written by an etcdlet before the kinds were
// recorded is a restore.
func pinRestored(s Settings, dataDir string, m restoredMember, moved string, now time.Time) error {
	id, err := datadir.ReadIdentity(dataDir)
	if err != nil {
		return fmt.Errorf("read the restored member's identity: %w", err)
	}
	store := state.Store{Dir: s.StateDir}
	st, err := store.Load()
	if err != nil {
		return err
	}
	// The node now belongs to the restored cluster, as its only member;
	// the agent adds the other listed nodes as learners once they are
	// cleared (Rejoin).
	st.SelfAddress = m.IP
	st.MemberID = fmt.Sprintf("%x", id.MemberID)
	st.ClusterID = fmt.Sprintf("%x", id.ClusterID)
	st.WasMember = true
	st.InitialCluster = m.Name + "=" + m.PeerURL
	if r := st.Restored; r == nil || r.ClusterID != st.ClusterID {
		// Pinning again (a resumed swap) keeps the first record.
		st.Restored = &state.Restored{Kind: cmp.Or(m.Kind, state.RestoredFromSnapshots), At: now.UTC(), ClusterID: st.ClusterID,
			Revision: m.Revision, MovedAside: moved}
	}
	st.InitialClusterState = "new"
	st.Tombstones, st.Bootstrap, st.Seen = nil, nil, nil
	if err := store.Save(st); err != nil {
		return err
	}
	// A promise not to start the old member, made to a recovery that the
	// operator then named gone, binds nothing on the new cluster.
	return store.SaveRetirement(nil)
}

// swapIn puts the restored dir in place of the data dir; when the data dir
// is a mount point (it stays, emptied by MoveAside), its contents.
func swapIn(staging, dataDir string) error {
	if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
		return os.Rename(staging, dataDir)
	}
	entries, err := os.ReadDir(staging)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(staging, e.Name()), filepath.Join(dataDir, e.Name())); err != nil {
			return fmt.Errorf("move the restored %s into %s: %w", e.Name(), dataDir, err)
		}
	}
	return os.Remove(staging)
}
