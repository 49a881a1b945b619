package daemon

import (
	"log/slog"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/state"
)

// A restore that etcdlet restore or recover recorded is reported at the
// agent's next start, once: it is marked reported in the state first.
func TestTakeRestoredReportsOnce(t *testing.T) {
	store := state.Store{Dir: t.TempDir()}
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	st := state.State{ClusterID: "c1", Restored: &state.Restored{Kind: state.RecoveredFromData, At: at, ClusterID: "c1", Revision: 1000000042}}
	if err := store.Save(st); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for i, want := range []string{state.RecoveredFromData, ""} {
		loaded, err := store.Load()
		if err != nil {
			t.Fatal(err)
		}
		got := takeRestored(store, &loaded, log)
		if got.Kind != want || (want != "" && (got.Revision != 1000000042 || !got.At.Equal(at))) {
			t.Errorf("start %d: took %+v, want kind %q", i+1, got, want)
		}
	}
	none := state.State{}
	if got := takeRestored(store, &none, log); got.Kind != "" {
		t.Errorf("no restore recorded: took %+v", got)
	}
}
