package snapshot

import (
	"context"
	"fmt"
	"time"
)

// Retention says which snapshots Prune keeps.
type Retention struct {
	// KeepFull is how many of the newest full snapshots to keep, with the
	// deltas after the oldest of them; 0 keeps all.
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
	tooOld := func(s Snapshot) bool { return r.MaxAge > 0 && s.CreatedOn.Before(now.Add(-r.MaxAge)) }
	// The oldest full kept, counting from the newest.
	oldest := *newest
	count := 0
	for i := len(list) - 1; i >= 0; i-- {
		s := list[i]
		if s.Kind != KindFull {
			continue
		}
		if (r.KeepFull > 0 && count == r.KeepFull) || tooOld(s) {
			break
		}
		count++
		oldest = s
	}
	var out []Snapshot
	for _, s := range list {
		keep := false
		switch {
		case s.Kind == KindFull && s.LastRevision >= newest.LastRevision:
			keep = true // the newest, and any full listed after it
		case s.Kind == KindDelta && s.StartRevision > newest.LastRevision:
			keep = true // the deltas after the newest full
		case tooOld(s):
		case s.Kind == KindFull:
			keep = s.LastRevision >= oldest.LastRevision
		default:
			keep = s.StartRevision > oldest.LastRevision
		}
		locked := !s.ImmutabilityExpiryTime.IsZero() && now.Before(s.ImmutabilityExpiryTime)
		if !keep && !locked {
			out = append(out, s)
		}
	}
	return out
}
