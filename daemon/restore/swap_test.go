package restore

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// A restore (or recovery) that a crash interrupts at any step once its
// data dir is complete is finished by ResumeRestored: the restored data
// dir ends up in place, the old one kept aside, the agent pinned to the
// restored cluster, the restore recorded for the agent to report. A
// restored dir not marked complete is never used.
func TestResumeRestoredFinishesAnInterruptedSwap(t *testing.T) {
	// A real member's data stands for the restored data dir.
	member := etcdtest.Start(t, 1)[0]
	restoredFrom, memberID, clusterID := member.Etcd.Config().Dir, member.ID(), member.ClusterID()
	member.Close()
	self := identity.Member{Name: member.Name, PeerURL: member.PeerURL, IP: netip.MustParseAddr("127.0.0.1")}

	for _, tc := range []struct {
		name string
		// crash prepares the node as a crash left it.
		crash      func(t *testing.T, s Settings, staging string)
		wantResume bool
		wantMoved  bool // the old data dir goes aside now
	}{
		{"after the mark, before the old data dir went aside", func(t *testing.T, s Settings, staging string) {
			mark(t, s, self)
		}, true, true},
		{"after the old data dir went aside", func(t *testing.T, s Settings, staging string) {
			mark(t, s, self)
			if _, err := datadir.MoveAside(s.DataDir, time.Now()); err != nil {
				t.Fatal(err)
			}
		}, true, false},
		{"after the swap, before the state was pinned", func(t *testing.T, s Settings, staging string) {
			mark(t, s, self)
			if _, err := datadir.MoveAside(s.DataDir, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := swapIn(staging, s.DataDir); err != nil {
				t.Fatal(err)
			}
		}, true, false},
		{"before the mark: the restored dir may be half-built", func(t *testing.T, s Settings, staging string) {}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := Settings{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "state")}
			staging := s.DataDir + stagingSuffix
			if err := datadir.Copy(restoredFrom, staging); err != nil {
				t.Fatal(err)
			}
			oldWAL := filepath.Join(s.DataDir, "member", "wal", "0000000000000000-0000000000000000.wal")
			if err := os.MkdirAll(filepath.Dir(oldWAL), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(oldWAL, []byte("the lost cluster's"), 0o600); err != nil {
				t.Fatal(err)
			}
			tc.crash(t, s, staging)

			resumed, moved, err := ResumeRestored(s, time.Now())
			if err != nil || resumed != tc.wantResume || (moved != "") != tc.wantMoved {
				t.Fatalf("ResumeRestored = %v, %q, %v; want resumed %v, moved aside now %v", resumed, moved, err, tc.wantResume, tc.wantMoved)
			}
			if !tc.wantResume {
				if old, _ := os.ReadFile(oldWAL); string(old) != "the lost cluster's" {
					t.Errorf("the data dir holds %q, want its own data untouched", old)
				}
				if _, err := os.Stat(staging); err != nil {
					t.Errorf("the unmarked restored dir was touched: %v", err)
				}
				return
			}
			id, err := datadir.ReadIdentity(s.DataDir)
			if err != nil || id.MemberID != memberID || id.ClusterID != clusterID {
				t.Errorf("the data dir holds member %x of cluster %x (%v), want the restored %x of %x", id.MemberID, id.ClusterID, err, memberID, clusterID)
			}
			st, err := state.Store{Dir: s.StateDir}.Load()
			if err != nil || st.ClusterID != strconv.FormatUint(clusterID, 16) || !st.WasMember || st.InitialCluster != self.Name+"="+self.PeerURL {
				t.Errorf("state %+v (%v): want it pinned to the restored cluster %x", st, err, clusterID)
			}
			// The agent reports it at its next start.
			if r, want := st.Restored, (state.Restored{Kind: state.RecoveredFromData, ClusterID: st.ClusterID, Revision: 1000000042, MovedAside: moved}); r == nil || r.At.IsZero() {
				t.Errorf("no restore recorded for the agent: %+v", r)
			} else if r.At = (time.Time{}); *r != want {
				t.Errorf("recorded restore %+v, want %+v", *r, want)
			}
			kept, _ := filepath.Glob(s.DataDir + ".etcdlet-moved-*")
			if len(kept) != 1 {
				t.Errorf("old data dirs kept aside: %v, want one", kept)
			}
			if _, err := os.Stat(s.DataDir + restoredSuffix); !os.IsNotExist(err) {
				t.Errorf("the mark is left behind: %v", err)
			}
			// Once finished there is nothing left to resume.
			if again, _, err := ResumeRestored(s, time.Now()); again || err != nil {
				t.Errorf("a second ResumeRestored = %v, %v; want nothing to do", again, err)
			}
		})
	}
}

// A restore does not start while an interrupted one waits to be put in
// place: it would remove the complete restored dir.
func TestRunRefusesWhileARestoredDirWaits(t *testing.T) {
	dir := t.TempDir()
	s := Settings{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "state")}
	mark(t, s, identity.Member{Name: "etcd-main-127.0.0.1", PeerURL: "http://127.0.0.1:2380", IP: netip.MustParseAddr("127.0.0.1")})
	if err := os.MkdirAll(s.DataDir+stagingSuffix, 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err := Run(context.Background(), s, nil, Plan{DataDir: s.DataDir, Full: snapshot.Snapshot{}}, nil, time.Now())
	if err == nil {
		t.Fatal("Run went ahead while a complete restored dir waits")
	}
	if _, err := os.Stat(s.DataDir + stagingSuffix); err != nil {
		t.Errorf("the waiting restored dir is gone: %v", err)
	}
}

func mark(t *testing.T, s Settings, self identity.Member) {
	t.Helper()
	data := `{"name":"` + self.Name + `","peerURL":"` + self.PeerURL + `","ip":"` + self.IP.String() + `","kind":"recover","revision":1000000042}`
	if err := os.WriteFile(s.DataDir+restoredSuffix, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
