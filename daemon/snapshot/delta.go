package snapshot

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrCompacted is returned (wrapped) by TakeDelta when the revisions since
// the previous snapshot are compacted away: only a full snapshot can
// continue the chain.
var ErrCompacted = errors.New("the revisions since the previous snapshot are compacted: a full snapshot is needed")

// progressInterval is how often TakeDelta asks etcd how far the watch has
// got. Every revision etcd makes has events today, so the events reach the
// target; the progress notification keeps a watch from waiting forever
// should one ever have none.
const progressInterval = time.Second

// TakeDelta stores the events from prev.LastRevision+1 up to the revision
// current when it is called, in BR's delta format. It returns nil, nil
// when nothing happened since prev (or only events on keys o.Ignore
// names).
func TakeDelta(ctx context.Context, cli *clientv3.Client, store Store, prev Snapshot, o Options) (*Snapshot, error) {
	c, err := o.compression()
	if err != nil {
		return nil, fmt.Errorf("delta snapshot after %s: %w", prev.name(), err)
	}
	s, err := takeDelta(ctx, cli, store, prev, c, o)
	if err != nil {
		return nil, fmt.Errorf("delta snapshot after %s: %w", prev.name(), err)
	}
	return s, nil
}

func takeDelta(ctx context.Context, cli *clientv3.Client, store Store, prev Snapshot, c Compression, o Options) (*Snapshot, error) {
	target, err := currentRevision(ctx, cli)
	if err != nil {
		return nil, err
	}
	switch {
	case target == prev.LastRevision:
		return nil, nil
	case target < prev.LastRevision:
		return nil, fmt.Errorf("the cluster is at revision %d, before the snapshot's %d (a restored or another cluster): a full snapshot is needed", target, prev.LastRevision)
	}
	f, err := os.CreateTemp(o.TempDir, "etcdlet-delta-*.json")
	if err != nil {
		return nil, err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	dw := newDeltaWriter(f)
	changes := 0 // events on keys not ignored
	last, err := watchEvents(ctx, cli, prev.LastRevision+1, target, func(ev *mvccpb.Event) error {
		if o.Ignore == nil || !o.Ignore(ev.Kv.Key) {
			changes++
		}
		return dw.add(ev, o.now())
	})
	if err != nil {
		return nil, err
	}
	if changes == 0 {
		return nil, nil
	}
	if err := dw.close(); err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	s := newSnapshot(KindDelta, prev.LastRevision+1, last, c, false, o.now())
	if err := o.beforeUpload(s); err != nil {
		return nil, fmt.Errorf("%s: %w", s.SnapName, err)
	}
	if err := putCompressed(ctx, store, s, c, f); err != nil {
		return nil, fmt.Errorf("%s: %w", s.SnapName, err)
	}
	return &s, nil
}

// watchEvents hands every event from revision from up to target to add, in
// order, and returns the last event's revision. It stops at the event of
// the target revision, or when a progress notification says the watch has
// passed it without one.
func watchEvents(ctx context.Context, cli *clientv3.Client, from, target int64, add func(*mvccpb.Event) error) (int64, error) {
	// WithRequireLeader: a member cut off from the others ends the watch
	// rather than wait for events that cannot come.
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from))
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-tick.C:
			// Answered once the watch has sent every event it has.
			if err := cli.RequestProgress(ctx); err != nil && ctx.Err() == nil {
				return 0, fmt.Errorf("request watch progress: %w", err)
			}
		case wr, ok := <-wch:
			if !ok {
				if err := context.Cause(ctx); err != nil {
					return 0, fmt.Errorf("watch from revision %d: %w", from, err)
				}
				return 0, fmt.Errorf("watch from revision %d: closed before revision %d", from, target)
			}
			if wr.CompactRevision != 0 {
				return 0, fmt.Errorf("watch from revision %d: etcd compacted up to revision %d: %w", from, wr.CompactRevision, ErrCompacted)
			}
			if err := wr.Err(); err != nil {
				return 0, fmt.Errorf("watch from revision %d: %w", from, err)
			}
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision > target {
					return last, nil
				}
				if err := add(ev); err != nil {
					return 0, err
				}
				last = ev.Kv.ModRevision
			}
			// Events of one revision (a transaction) arrive in one response,
			// so reaching the target here means all of it is in.
			if last >= target || (wr.IsProgressNotify() && wr.Header.Revision >= target) {
				return last, nil
			}
		}
	}
}

// ReadDelta returns the events of a delta snapshot in order, after
// checking its sha256 trailer.
func ReadDelta(ctx context.Context, store Store, s Snapshot) ([]*mvccpb.Event, error) {
	if s.Kind != KindDelta {
		return nil, fmt.Errorf("read delta snapshot %s: it is a %s snapshot", s.name(), s.Kind)
	}
	events, err := readDelta(ctx, store, s)
	if err != nil {
		return nil, fmt.Errorf("read delta snapshot %s: %w", s.name(), err)
	}
	return events, nil
}

func readDelta(ctx context.Context, store Store, s Snapshot) ([]*mvccpb.Event, error) {
	rc, err := store.Get(ctx, s)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	dr, err := decompressor(s.CompressionSuffix, ctxReader{ctx, rc})
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	data, err := io.ReadAll(dr)
	if err != nil {
		return nil, err
	}
	if len(data) <= sha256.Size {
		return nil, fmt.Errorf("%d bytes are too few for events and a sha256", len(data))
	}
	body, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(body); string(sum[:]) != string(trailer) {
		return nil, fmt.Errorf("sha256 mismatch: the events hash to %x, the trailer says %x", sum, trailer)
	}
	events, err := unmarshalEvents(body)
	if err != nil {
		return nil, err
	}
	// A restore applies the events in this order and checks the revision
	// it reaches against the name: events out of order or out of the
	// named range mean the wrong object.
	var prev int64
	for i, ev := range events {
		rev := ev.Kv.ModRevision
		if rev < prev || rev < s.StartRevision || rev > s.LastRevision {
			return nil, fmt.Errorf("event %d has revision %d, out of order or outside the snapshot's revisions %d-%d", i, rev, s.StartRevision, s.LastRevision)
		}
		prev = rev
	}
	return events, nil
}

// deltaWriter writes BR's delta content: the JSON array of the events, one
// json.Marshal of each joined by commas as BR joins them, then the raw
// sha256 of that JSON.
type deltaWriter struct {
	w      *bufio.Writer
	json   io.Writer // w and h
	h      hash.Hash
	events int
}

func newDeltaWriter(w io.Writer) *deltaWriter {
	bw := bufio.NewWriterSize(w, 1<<20)
	h := sha256.New()
	return &deltaWriter{w: bw, json: io.MultiWriter(bw, h), h: h}
}

func (d *deltaWriter) add(ev *mvccpb.Event, t time.Time) error {
	b, err := marshalEvent(ev, t)
	if err != nil {
		return err
	}
	sep := []byte{','}
	if d.events == 0 {
		sep[0] = '['
	}
	d.events++
	if _, err := d.json.Write(sep); err != nil {
		return err
	}
	_, err = d.json.Write(b)
	return err
}

// close ends the array and appends the sha256; it needs one event at least
// (BR stores no delta without events).
func (d *deltaWriter) close() error {
	if _, err := d.json.Write([]byte{']'}); err != nil {
		return err
	}
	if _, err := d.w.Write(d.h.Sum(nil)); err != nil {
		return err
	}
	return d.w.Flush()
}
