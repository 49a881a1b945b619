package snapshot

import (
	"context"
	"fmt"
	"time"
)

// Retention policies, named as etcd-backup-restore names its
// garbage-collection policies (--garbage-collection-policy).
const (
	// PolicyExponential keeps every snapshot of the last hour, and the
	// newest full snapshot of each hour of the last day, of each day of
	// the last week and of each week of the last four weeks. Snapshots
	// added now never push out older ones: however many are taken, the
	// store can still go back hours, days and weeks.
	PolicyExponential = "Exponential"
	// PolicyLimitBased keeps the KeepFull newest full snapshots and the
	// deltas after the oldest of them. Every full snapshot taken pushes
	// the oldest out, whoever ordered it.
	PolicyLimitBased = "LimitBased"
)

// The windows of PolicyExponential: within span of now, the newest full
// snapshot of each calendar bucket of size (UTC) stays. Calendar buckets,
// not ages, so that a snapshot's bucket never changes as time passes and
// a kept snapshot is not dropped for a neighbour that slid into its
// bucket.
var exponentialWindows = []struct{ size, span time.Duration }{
	{time.Hour, 24 * time.Hour},
	{24 * time.Hour, 7 * 24 * time.Hour},
	{7 * 24 * time.Hour, 4 * 7 * 24 * time.Hour},
}

// keepAllWithin is PolicyExponential's window in which every snapshot,
// delta or full, stays.
const keepAllWithin = time.Hour

// Retention says which snapshots Prune keeps.
type Retention struct {
	// Policy is PolicyExponential or PolicyLimitBased (also when empty).
	Policy string
	// KeepFull is, with PolicyLimitBased, how many of the newest full
	// snapshots to keep, with the deltas after the oldest of them; 0
	// keeps all.
	KeepFull int
	// MaxAge drops snapshots created longer ago; 0 keeps all.
	MaxAge time.Duration
}

// Prune deletes the snapshots the retention does not keep, oldest first,
// and returns them. The newest full snapshot and the deltas after it are
// always kept, whatever the retention says: they are the backup. So are
// snapshots still under an object lock, which the store would refuse to
// delete. Without any full snapshot nothing is deleted.
func Prune(ctx context.Context, store Store, r Retention, now time.Time) (deleted []Snapshot, err error) {
	list, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	for _, s := range pruned(list, r, now) {
		if err := store.Delete(ctx, s); err != nil {
			return deleted, fmt.Errorf("prune: %w", err)
		}
		deleted = append(deleted, s)
	}
	return deleted, nil
}

// pruned is what Prune deletes from a sorted list.
func pruned(list []Snapshot, r Retention, now time.Time) []Snapshot {
	newest, _ := latestIn(list)
	if newest == nil {
		return nil
	}
	base := bases(list)
	var fulls map[int]bool
	if r.Policy == PolicyExponential {
		fulls = exponentialFulls(list, base, now)
	} else {
		fulls = newestFulls(list, r.KeepFull)
	}
	tooOld := func(s Snapshot) bool { return r.MaxAge > 0 && s.CreatedOn.Before(now.Add(-r.MaxAge)) }
	var out []Snapshot
	for i, s := range list {
		keep := false
		switch {
		case s.Kind == KindFull && s.LastRevision >= newest.LastRevision:
			keep = true // the newest, and any full listed after it
		case s.Kind == KindDelta && s.StartRevision > newest.LastRevision:
			keep = true // the deltas after the newest full
		case tooOld(s):
		case s.Kind == KindFull:
			keep = fulls[i]
		case base[i] < 0 || !fulls[base[i]] || tooOld(list[base[i]]):
			// a delta is no use without the full snapshot it builds on
		case r.Policy == PolicyExponential:
			keep = now.Sub(s.CreatedOn) < keepAllWithin
		default:
			keep = true
		}
		locked := !s.ImmutabilityExpiryTime.IsZero() && now.Before(s.ImmutabilityExpiryTime)
		if !keep && !locked {
			out = append(out, s)
		}
	}
	return out
}

// bases maps each delta of a sorted list to the index of the full
// snapshot it builds on (the last full before it that it starts after),
// -1 when there is none; fulls map to themselves.
func bases(list []Snapshot) []int {
	base := make([]int, len(list))
	last := -1
	for i, s := range list {
		switch {
		case s.Kind == KindFull:
			last = i
			base[i] = i
		case last >= 0 && s.StartRevision > list[last].LastRevision:
			base[i] = last
		default:
			base[i] = -1
		}
	}
	return base
}

// newestFulls is PolicyLimitBased: the indexes of the keep newest full
// snapshots (all when keep is 0).
func newestFulls(list []Snapshot, keep int) map[int]bool {
	kept := map[int]bool{}
	for i := len(list) - 1; i >= 0 && (keep == 0 || len(kept) < keep); i-- {
		if list[i].Kind == KindFull {
			kept[i] = true
		}
	}
	return kept
}

// exponentialFulls is PolicyExponential: the indexes of the full
// snapshots of the last hour, of the newest full of each bucket of the
// windows, and of the fulls that a delta of the last hour builds on.
func exponentialFulls(list []Snapshot, base []int, now time.Time) map[int]bool {
	kept := map[int]bool{}
	type bucket struct {
		window int
		start  time.Time
	}
	newestIn := map[bucket]int{}
	for i, s := range list {
		recent := now.Sub(s.CreatedOn) < keepAllWithin
		if s.Kind == KindDelta {
			if recent && base[i] >= 0 {
				kept[base[i]] = true
			}
			continue
		}
		if recent {
			kept[i] = true
		}
		for w, window := range exponentialWindows {
			start := s.CreatedOn.UTC().Truncate(window.size)
			if now.Sub(start) < window.span {
				// The list is sorted by revision: a later entry is newer.
				newestIn[bucket{w, start}] = i
			}
		}
	}
	for _, i := range newestIn {
		kept[i] = true
	}
	return kept
}
