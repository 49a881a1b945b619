package snapshot_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

const t0 = 1764000000

// history is a store's content: short names for snapshots taken an hour
// apart. F3 has no delta before it (a gap the next full closes).
var history = map[string]string{
	"F1": fmt.Sprintf("Full-00000000-00000100-%d.gz", t0),
	"D1": fmt.Sprintf("Incr-00000101-00000150-%d.gz", t0+1*3600),
	"D2": fmt.Sprintf("Incr-00000151-00000200-%d.gz", t0+2*3600),
	"F2": fmt.Sprintf("Full-00000000-00000200-%d.gz", t0+3*3600),
	"D3": fmt.Sprintf("Incr-00000201-00000250-%d.gz", t0+4*3600),
	"F3": fmt.Sprintf("Full-00000000-00000300-%d.gz.final", t0+5*3600),
	"D4": fmt.Sprintf("Incr-00000301-00000350-%d.Z", t0+6*3600),
	"D5": fmt.Sprintf("Incr-00000351-00000400-%d.zlib", t0+7*3600),
	// Odd ones: a delta before any full, one overlapping D1, one after a gap.
	"D0":  fmt.Sprintf("Incr-00000050-00000100-%d.gz", t0-3600),
	"D1x": fmt.Sprintf("Incr-00000140-00000160-%d.gz", t0+1*3600+60),
	"D2g": fmt.Sprintf("Incr-00000160-00000200-%d.gz", t0+2*3600),
}

// storeWith is a LocalStore holding the named snapshots of history.
func storeWith(t *testing.T, short ...string) snapshot.Store {
	t.Helper()
	st, err := snapshot.NewLocalStore(t.TempDir(), "etcd")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range short {
		if err := st.Put(t.Context(), named(t, history[s]), strings.NewReader(s)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// short maps listed snapshots back to their short names.
func short(list []snapshot.Snapshot) string {
	var out []string
	for _, s := range list {
		for k, v := range history {
			if v == s.SnapName {
				out = append(out, k)
			}
		}
	}
	return strings.Join(out, " ")
}

func TestPrune(t *testing.T) {
	all := []string{"F1", "D1", "D2", "F2", "D3", "F3", "D4", "D5"}
	now := time.Unix(t0+8*3600, 0)
	for _, tc := range []struct {
		name    string
		have    []string
		r       snapshot.Retention
		deleted string
	}{
		{"no limits", all, snapshot.Retention{}, ""},
		{"newest full only", all, snapshot.Retention{KeepFull: 1}, "F1 D1 D2 F2 D3"},
		{"two fulls", all, snapshot.Retention{KeepFull: 2}, "F1 D1 D2"},
		{"more fulls than there are", all, snapshot.Retention{KeepFull: 5}, ""},
		{"max age drops the deltas of a dropped full", all, snapshot.Retention{MaxAge: 4*time.Hour + 30*time.Minute}, "F1 D1 D2 F2 D3"},
		{"max age inside the second chain", all, snapshot.Retention{MaxAge: 5*time.Hour + 30*time.Minute}, "F1 D1 D2"},
		{"everything too old keeps the latest chain", all, snapshot.Retention{KeepFull: 3, MaxAge: time.Minute}, "F1 D1 D2 F2 D3"},
		{"count and age, the stricter wins", all, snapshot.Retention{KeepFull: 2, MaxAge: 4*time.Hour + 30*time.Minute}, "F1 D1 D2 F2 D3"},
		{"no full: nothing to anchor, nothing deleted", []string{"D1", "D2"}, snapshot.Retention{KeepFull: 1, MaxAge: time.Minute}, ""},
		{"a delta before every full is no use", []string{"D0", "F1", "D1"}, snapshot.Retention{}, "D0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storeWith(t, tc.have...)
			deleted, err := snapshot.Prune(t.Context(), st, tc.r, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := short(deleted); got != tc.deleted {
				t.Errorf("deleted %q, want %q", got, tc.deleted)
			}
			list, err := st.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, s := range tc.have {
				if !slices.Contains(strings.Fields(tc.deleted), s) {
					want = append(want, s)
				}
			}
			if got := short(list); got != strings.Join(want, " ") {
				t.Errorf("left %q, want %q", got, strings.Join(want, " "))
			}
		})
	}
}

func TestLatestAndChain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		have   []string
		upTo   string // short name, "" for the latest
		full   string
		deltas string
		err    string
	}{
		{"latest", []string{"F1", "D1", "D2", "F2", "D3"}, "", "F2", "D3", ""},
		{"latest is a full", []string{"F1", "D1", "D2", "F2"}, "", "F2", "", ""},
		{"up to a delta", []string{"F1", "D1", "D2", "F2", "D3"}, "D2", "F1", "D1 D2", ""},
		{"up to the first delta", []string{"F1", "D1", "D2", "F2", "D3"}, "D1", "F1", "D1", ""},
		{"up to a full", []string{"F1", "D1", "D2", "F2", "D3"}, "F2", "F2", "", ""},
		{"a gap", []string{"F1", "D2"}, "", "", "", "gap: " + history["F1"] + " ends at revision 100 but the next, " + history["D2"] + ", starts at 151: revisions 101-150 are missing"},
		{"an overlap", []string{"F1", "D1", "D2g", "D1x"}, "", "", "", "overlap: " + history["D1"] + " ends at revision 150 but the next, " + history["D1x"] + ", starts at 140"},
		{"no full", []string{"D1", "D2"}, "", "", "", "no full snapshot to start from"},
		{"unknown name", []string{"F1"}, "D5", "", "", "no snapshot is named " + history["D5"]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storeWith(t, tc.have...)
			full, deltas, err := snapshot.Chain(t.Context(), st, history[tc.upTo])
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if short([]snapshot.Snapshot{full}) != tc.full || short(deltas) != tc.deltas {
				t.Errorf("chain %s [%s], want %s [%s]", short([]snapshot.Snapshot{full}), short(deltas), tc.full, tc.deltas)
			}
		})
	}

	// Latest answers even where Chain refuses, as BR's /snapshot/latest.
	for _, tc := range []struct {
		name         string
		have         []string
		full, deltas string
	}{
		{"full and deltas", []string{"F1", "D1", "F2", "D3"}, "F2", "D3"},
		{"no full", []string{"D1", "D2"}, "", "D1 D2"},
		{"empty", nil, "", ""},
		{"a delta overlapping the full is not after it", []string{"F1", "D0", "D1"}, "F1", "D1"},
	} {
		t.Run("latest/"+tc.name, func(t *testing.T) {
			full, deltas, err := snapshot.Latest(t.Context(), storeWith(t, tc.have...))
			if err != nil {
				t.Fatal(err)
			}
			gotFull := ""
			if full != nil {
				gotFull = short([]snapshot.Snapshot{*full})
			}
			if gotFull != tc.full || short(deltas) != tc.deltas {
				t.Errorf("latest %s [%s], want %s [%s]", gotFull, short(deltas), tc.full, tc.deltas)
			}
		})
	}
}
