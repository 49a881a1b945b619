package snapshot

import (
	"context"
	"fmt"
)

// Latest returns the newest full snapshot and the deltas after it, in
// order, as BR's /snapshot/latest does: everything listed after the last
// full. Without a full snapshot, full is nil and deltas are all the deltas.
func Latest(ctx context.Context, store Store) (full *Snapshot, deltas []Snapshot, err error) {
	list, err := store.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("latest snapshot: %w", err)
	}
	full, deltas = latestIn(list)
	return full, deltas, nil
}

// Newest is what a snapshot of kind would follow: for a full one, the
// newest full snapshot; for a delta, the newest object of the chain (the
// full snapshot or its last delta). ok is false without a full snapshot.
func Newest(ctx context.Context, store Store, kind string) (newest *Snapshot, ok bool, err error) {
	full, deltas, err := Latest(ctx, store)
	if err != nil || full == nil {
		return nil, false, err
	}
	if kind == KindDelta && len(deltas) > 0 {
		return &deltas[len(deltas)-1], true, nil
	}
	return full, true, nil
}

// latestIn is Latest on a sorted list.
func latestIn(list []Snapshot) (*Snapshot, []Snapshot) {
	var full *Snapshot
	start := 0
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Kind == KindFull {
			full, start = &list[i], i+1
			break
		}
	}
	var deltas []Snapshot
	for _, s := range list[start:] {
		if s.Kind == KindDelta && (full == nil || s.StartRevision > full.LastRevision) {
			deltas = append(deltas, s)
		}
	}
	return full, deltas
}

// Chain returns what to restore to reach the snapshot named upTo (the
// latest when ""): a full snapshot and the deltas after it, each starting
// where the one before ends. A gap is an error naming it.
func Chain(ctx context.Context, store Store, upTo string) (full Snapshot, deltas []Snapshot, err error) {
	list, err := store.List(ctx)
	if err != nil {
		return Snapshot{}, nil, fmt.Errorf("chain to %s: %w", chainTarget(upTo), err)
	}
	full, deltas, err = chainIn(list, upTo)
	if err != nil {
		return Snapshot{}, nil, fmt.Errorf("chain to %s in %s: %w", chainTarget(upTo), store, err)
	}
	return full, deltas, nil
}

func chainTarget(upTo string) string {
	if upTo == "" {
		return "the latest snapshot"
	}
	return upTo
}

// chainIn is Chain on a sorted list.
func chainIn(list []Snapshot, upTo string) (Snapshot, []Snapshot, error) {
	end := len(list)
	if upTo != "" {
		end = -1
		for i, s := range list {
			if s.SnapName == upTo {
				end = i + 1
			}
		}
		if end < 0 {
			return Snapshot{}, nil, fmt.Errorf("no snapshot is named %s", upTo)
		}
	}
	full, deltas := latestIn(list[:end])
	if full == nil {
		return Snapshot{}, nil, fmt.Errorf("no full snapshot to start from")
	}
	if err := checkChain(*full, deltas); err != nil {
		return Snapshot{}, nil, err
	}
	return *full, deltas, nil
}
