package state

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/config/trust/trusttest"
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

// A file of the state dir is read only if it is a regular file of at most
// MaxFileBytes, the path itself: anything else is an error that names the
// file and the rule, never an absent (zero) state, and nothing blocks.
func TestStateFilesAreReadWithinTheRules(t *testing.T) {
	loaders := []struct {
		name string
		file string
		load func(Store) error
	}{
		{"state", FileName, func(s Store) error { _, err := s.Load(); return err }},
		{"operator", OperatorFile, func(s Store) error { _, err := s.LoadOperator(); return err }},
		{"promise", PromiseFile, func(s Store) error { _, err := s.LoadPromise(); return err }},
		{"retirement", RetireFile, func(s Store) error { _, err := s.LoadRetirement(); return err }},
		{"two-node witness", WitnessFile, func(s Store) error { _, err := s.LoadWitness(); return err }},
	}
	// padded is a valid JSON object of n bytes.
	padded := func(n int) string { return "{}" + strings.Repeat(" ", n-2) }
	tests := []struct {
		name    string
		place   func(t *testing.T, path string)
		wantErr string // "": loads
		wantIs  error
	}{
		{name: "at the cap", place: func(t *testing.T, path string) { writeFile(t, path, padded(MaxFileBytes)) }},
		{name: "over the cap", place: func(t *testing.T, path string) { writeFile(t, path, padded(MaxFileBytes+1)) },
			wantErr: "is 1048577 bytes, must be at most 1048576 bytes (a state file holds a few KiB; etcdlet does not read a larger one)",
			wantIs:  config.ErrTooLarge},
		{name: "FIFO", place: func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is a named pipe, want a regular file", wantIs: config.ErrNotRegular},
		{name: "symlink", place: func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			writeFile(t, target, "{}")
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is a symbolic link, want a regular file", wantIs: config.ErrNotRegular},
		{name: "dangling symlink", place: func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "nowhere.json"), path); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is a symbolic link, want a regular file", wantIs: config.ErrNotRegular},
	}
	for _, l := range loaders {
		for _, tt := range tests {
			t.Run(l.name+"/"+tt.name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, l.file)
				tt.place(t, path)
				done := make(chan error, 1)
				go func() { done <- l.load(Store{Dir: dir}) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("loading %s blocked", l.file)
				}
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("load: %v", err)
					}
					return
				}
				want := "state file " + path + " " + tt.wantErr
				if err == nil || err.Error() != want || !errors.Is(err, tt.wantIs) {
					t.Errorf("load error:\n%v\nwant:\n%s\n(errors.Is %v)", err, want, tt.wantIs)
				}
			})
		}
	}
}

// The state is read only from a state dir, and files, that only root can
// change: a planted operator.json approved a bootstrap of a node whose
// listed peer was silent. Refused, never read as an absent file.
func TestStateDirMustBeTrusted(t *testing.T) {
	trusttest.RequireRoot(t)
	const nobody = trusttest.Nobody
	approval := `{"bootstrapApproval": {"list": ["192.0.2.1", "192.0.2.2"], "at": "2026-11-21T00:00:00Z"}}`
	tests := []struct {
		name string
		// place makes the layout under root and returns the state dir.
		place   func(t *testing.T, root string) string
		wantErr string // "": loads
	}{
		{"private state dir", func(t *testing.T, root string) string {
			dir := trusttest.Dir(t, filepath.Join(root, "state"), 0o700)
			writeFile(t, filepath.Join(dir, OperatorFile), approval)
			return dir
		}, ""},
		{"planted in another user's state dir", func(t *testing.T, root string) string {
			dir := trusttest.Dir(t, filepath.Join(root, "state"), 0o700)
			writeFile(t, filepath.Join(dir, OperatorFile), approval)
			trusttest.Chown(t, dir, nobody, nobody)
			trusttest.Chown(t, filepath.Join(dir, OperatorFile), nobody, nobody)
			return dir
		}, "state dir (agent.stateDir) must be a directory only root can change: ROOT/state: ROOT/state is owned by uid 65534"},
		{"group-writable state dir", func(t *testing.T, root string) string {
			dir := trusttest.Dir(t, filepath.Join(root, "state"), 0o770)
			writeFile(t, filepath.Join(dir, OperatorFile), approval)
			return dir
		}, "state dir (agent.stateDir) must be a directory only root can change: ROOT/state: ROOT/state is writable by group (mode 0770)"},
		{"state dir not created yet, in another user's directory", func(t *testing.T, root string) string {
			home := trusttest.Dir(t, filepath.Join(root, "home"), 0o755)
			trusttest.Chown(t, home, nobody, nobody)
			return filepath.Join(home, "state")
		}, "state dir (agent.stateDir) must be a directory only root can change: ROOT/home/state does not exist yet; ROOT/home, where it would be created: ROOT/home is owned by uid 65534"},
		{"another user's file in a private state dir", func(t *testing.T, root string) string {
			dir := trusttest.Dir(t, filepath.Join(root, "state"), 0o700)
			writeFile(t, filepath.Join(dir, OperatorFile), approval)
			trusttest.Chown(t, filepath.Join(dir, OperatorFile), nobody, nobody)
			return dir
		}, "state file must be a file only root can change: ROOT/state/operator.json: ROOT/state/operator.json is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			op, err := Store{Dir: tt.place(t, root)}.LoadOperator()
			want := strings.ReplaceAll(tt.wantErr, "ROOT", root)
			switch {
			case want == "" && (err != nil || op.BootstrapApproval == nil):
				t.Fatalf("LoadOperator = %+v, %v; want the approval", op, err)
			case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
				t.Fatalf("LoadOperator = %+v, %v; want an error starting %q", op, err, want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// An approval and an acknowledgement of moves are two commands an
// operator may run in either order: neither forgets the other.
func TestOperatorRecordsKeepEachOther(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	acked := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	approved := acked.Add(time.Minute)
	if err := s.AcknowledgeMoves(acked); err != nil {
		t.Fatal(err)
	}
	if err := s.ApproveBootstrap([]string{"192.0.2.1", "2001:db8::2"}, approved); err != nil {
		t.Fatal(err)
	}
	op, err := s.LoadOperator()
	if err != nil {
		t.Fatal(err)
	}
	if !op.MovesAcknowledged.Equal(acked) {
		t.Errorf("moves acknowledged %v after an approval, want %v", op.MovesAcknowledged, acked)
	}
	if a := op.BootstrapApproval; a == nil || !a.At.Equal(approved) || !slices.Equal(a.List, []string{"192.0.2.1", "2001:db8::2"}) {
		t.Errorf("approval %+v, want the list at %v", a, approved)
	}
	later := approved.Add(time.Hour)
	if err := s.AcknowledgeMoves(later); err != nil {
		t.Fatal(err)
	}
	if op, err = s.LoadOperator(); err != nil || op.BootstrapApproval == nil || !op.MovesAcknowledged.Equal(later) {
		t.Errorf("after a second acknowledgement: %+v, %v; want the approval kept and the new time", op, err)
	}
}
