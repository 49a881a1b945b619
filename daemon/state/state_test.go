package state

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestStoreRoundTripAndModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := Store{Dir: dir}
	if st, err := s.Load(); err != nil || st.WasMember || st.MemberID != "" {
		t.Fatalf("absent state: %+v, %v", st, err)
	}
	want := State{LastAppliedList: []string{"192.0.2.1"}, SelfAddress: "192.0.2.1", MemberID: "8e9e05c52164694d",
		ClusterID: "cdf818194e3a8c32", WasMember: true,
		Tombstones: []Tombstone{{Time: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), From: "/d", To: "/d.x", Reason: "removed"}}}
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got.MemberID != want.MemberID || !got.WasMember || len(got.Tombstones) != 1 || !got.Tombstones[0].Time.Equal(want.Tombstones[0].Time) {
		t.Errorf("round trip: %+v", got)
	}
	for path, mode := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, FileName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestCorruptStateIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Store{Dir: dir}).Load(); err == nil {
		t.Error("a corrupt state file must not be read as an empty state (it would allow a bootstrap)")
	}
}
