package snapshot

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// scheduled is what a schedule leaves in a store from from to now: a full
// snapshot every fullEvery, a delta every deltaEvery in between, sorted
// by revision as a store lists them.
func scheduled(from, now time.Time, fullEvery, deltaEvery time.Duration) []Snapshot {
	var list []Snapshot
	rev := int64(0)
	for at := from; !at.After(now); at = at.Add(deltaEvery) {
		s := Snapshot{Kind: KindDelta, StartRevision: rev + 1, LastRevision: rev + 10, CreatedOn: at}
		if at.Sub(from)%fullEvery == 0 {
			s.Kind, s.StartRevision = KindFull, 0
		}
		rev += 10
		list = append(list, s)
	}
	return list
}

func kept(list, deleted []Snapshot) []Snapshot {
	return slices.DeleteFunc(slices.Clone(list), func(s Snapshot) bool {
		return slices.ContainsFunc(deleted, func(d Snapshot) bool { return d.LastRevision == s.LastRevision })
	})
}

func describe(list []Snapshot) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Kind+" "+s.CreatedOn.Format("Mon Jan 2 15:04"))
	}
	return out
}

// The exponential policy on six weeks of hourly full snapshots with a
// delta every 20 minutes, pruned on Friday 27 November 2026 at 10:20 UTC:
// every snapshot of the last hour stays (with the full its deltas build
// on), the newest full of each hour of the last day, of each day of the
// last week and of each week (from Monday, UTC) of the last four.
func TestExponentialPolicy(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 20, 0, 0, time.UTC)
	list := scheduled(time.Date(2026, 10, 16, 0, 5, 0, 0, time.UTC), now, time.Hour, 20*time.Minute)
	got := describe(kept(list, pruned(list, Retention{Policy: PolicyExponential}, now)))

	var want []string
	full := func(month time.Month, day, hour int) {
		want = append(want, KindFull+" "+time.Date(2026, month, day, hour, 5, 0, 0, time.UTC).Format("Mon Jan 2 15:04"))
	}
	full(11, 8, 23)  // the newest of the week from Monday 2 November
	full(11, 15, 23) // of the week from Monday 9 November
	for day := 21; day <= 25; day++ {
		full(11, day, 23) // of each day of the last week, Saturday to Wednesday
	}
	for hour := 11; hour <= 23; hour++ {
		full(11, 26, hour) // of each hour of the last day (Thursday's 23:05 is also its day's newest)
	}
	for hour := 0; hour <= 9; hour++ {
		full(11, 27, hour)
	}
	want = append(want, // the last hour: the deltas after 9:05, which stays as their base
		KindDelta+" "+time.Date(2026, 11, 27, 9, 25, 0, 0, time.UTC).Format("Mon Jan 2 15:04"),
		KindDelta+" "+time.Date(2026, 11, 27, 9, 45, 0, 0, time.UTC).Format("Mon Jan 2 15:04"))
	full(11, 27, 10) // the newest full: it and the deltas after it always stay
	if !slices.Equal(got, want) {
		t.Errorf("kept:\n  %v\nwant:\n  %v", got, want)
	}
}

// However many full snapshots are taken now (an API called in a loop),
// the exponential policy keeps everything the schedule alone kept; the
// limit-based one lets a burst roll the whole history out.
func TestExponentialPolicyKeepsHistoryThroughABurst(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 20, 0, 0, time.UTC)
	list := scheduled(time.Date(2026, 10, 16, 0, 5, 0, 0, time.UTC), now, time.Hour, 20*time.Minute)
	for _, tc := range []struct {
		name     string
		r        Retention
		wantKept bool
	}{
		{"exponential", Retention{Policy: PolicyExponential}, true},
		{"limit-based", Retention{Policy: PolicyLimitBased, KeepFull: 7}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := kept(list, pruned(list, tc.r, now))
			burst := slices.Clone(before)
			rev := before[len(before)-1].LastRevision
			for i := range 50 {
				rev += 10
				burst = append(burst, Snapshot{Kind: KindFull, LastRevision: rev, CreatedOn: now.Add(time.Duration(i) * time.Second)})
			}
			after := kept(burst, pruned(burst, tc.r, now.Add(time.Minute)))
			var lost []string
			for _, s := range before {
				if !slices.ContainsFunc(after, func(a Snapshot) bool { return a.LastRevision == s.LastRevision }) {
					lost = append(lost, fmt.Sprint(describe([]Snapshot{s})))
				}
			}
			if tc.wantKept && len(lost) > 0 {
				t.Errorf("the burst pushed out %d snapshots the schedule kept: %v", len(lost), lost)
			}
			if !tc.wantKept && len(lost) < len(before)-1 {
				t.Errorf("the burst pushed out %d of %d snapshots; limit-based retention loses them all", len(lost), len(before))
			}
		})
	}
}
