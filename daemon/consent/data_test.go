package consent

import (
	"slices"
	"testing"
)

// Survivors rank as raft elects leaders: the later last term first, then
// the longer log, then the higher revision; nodes without data last.
func TestAheadRanksAsRaftDoes(t *testing.T) {
	reports := []DataReport{
		{Node: "no data"},
		{Node: "error", MemberID: "1", LastTerm: 9, LastIndex: 900, Error: "the backend is in use"},
		{Node: "old term, long log", MemberID: "2", LastTerm: 4, LastIndex: 500, Revision: 400},
		{Node: "new term", MemberID: "3", LastTerm: 5, LastIndex: 450, Revision: 380},
		{Node: "new term, longer", MemberID: "4", LastTerm: 5, LastIndex: 451, Revision: 380},
		{Node: "new term, longer, more applied", MemberID: "5", LastTerm: 5, LastIndex: 451, Revision: 381},
		{Node: "new term, longer, revision unknown", MemberID: "6", LastTerm: 5, LastIndex: 451, RevisionUnknown: true, Running: true},
	}
	got := slices.Clone(reports)
	RankData(got)
	var order []string
	for _, r := range got {
		order = append(order, r.Node)
	}
	want := []string{"new term, longer, more applied", "new term, longer", "new term, longer, revision unknown", "new term", "old term, long log", "no data", "error"}
	if !slices.Equal(order, want) {
		t.Errorf("ranked %q, want %q", order, want)
	}
}
