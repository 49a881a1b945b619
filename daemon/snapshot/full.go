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

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Options are the settings of a snapshot taken.
type Options struct {
	Compression Compression // "" is gzip
	TempDir     string      // "" is os.TempDir()
	// Final marks the last full snapshot before the cluster stops (BR's
	// ?final=true): the name ends in ".final".
	Final bool
	Now   func() time.Time // nil is time.Now
	// Ignore names keys whose events alone do not make a delta: a delta
	// whose events are all on such keys is not stored (TakeDelta returns
	// nil). When a delta is stored it holds every event, these too, so
	// that its revisions stay contiguous for a restore.
	Ignore func(key []byte) bool
	// BeforeUpload is told the snapshot's name before anything is stored
	// under it, so that a caller killed during the upload can look for
	// the object afterwards instead of taking another snapshot.
	BeforeUpload func(Snapshot) error
}

func (o Options) beforeUpload(s Snapshot) error {
	if o.BeforeUpload == nil {
		return nil
	}
	return o.BeforeUpload(s)
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) compression() (Compression, error) {
	return ParseCompression(string(o.Compression))
}

// TakeFull streams a snapshot of the member cli is bound to into a
// temporary file, checks etcd's sha256 trailer, and stores the whole file,
// trailer included, compressed, as BR does. The caller picks the member
// (the least-lagging non-leader spares the leader the disk and network
// load).
//
// LastRevision is the revision read just before the snapshot, as BR reads
// it: the snapshot holds at least that revision, maybe a few more, which
// the next delta then repeats (a restore skips them).
func TakeFull(ctx context.Context, cli *clientv3.Client, store Store, o Options) (Snapshot, error) {
	c, err := o.compression()
	if err != nil {
		return Snapshot{}, fmt.Errorf("full snapshot: %w", err)
	}
	rev, err := currentRevision(ctx, cli)
	if err != nil {
		return Snapshot{}, fmt.Errorf("full snapshot: %w", err)
	}
	s := newSnapshot(KindFull, 0, rev, c, o.Final, o.now())
	if err := o.beforeUpload(s); err != nil {
		return Snapshot{}, fmt.Errorf("full snapshot %s: %w", s.SnapName, err)
	}
	if err := takeFull(ctx, cli, store, c, o.TempDir, s); err != nil {
		return Snapshot{}, fmt.Errorf("full snapshot %s: %w", s.SnapName, err)
	}
	return s, nil
}

func takeFull(ctx context.Context, cli *clientv3.Client, store Store, c Compression, tempDir string, s Snapshot) error {
	// The temporary file holds the snapshot compressed: the stream is
	// compressed as it arrives, while the next megabytes are received
	// (readAhead), so a full snapshot takes about as long as the slower
	// of etcd's stream and the compressor, not the two in turn. Nothing
	// is stored before the trailer has been checked.
	f, err := os.CreateTemp(tempDir, "etcdlet-full-*.db"+c.Suffix())
	if err != nil {
		return err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("start the snapshot stream: %w", err)
	}
	ahead := readAhead(rc, 8, 1<<20)
	defer ahead.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	zw := c.compressor(w)
	t := newTrailerHash()
	if _, err := io.Copy(io.MultiWriter(zw, t), ahead); err != nil {
		return fmt.Errorf("receive the snapshot: %w", err)
	}
	if err := t.verifyDB(); err != nil {
		return fmt.Errorf("the snapshot received from etcd is corrupt: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress the snapshot: %w", err)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return store.Put(ctx, s, f)
}

// currentRevision is the cluster's revision now. BR reads it with
// Get("", WithLastRev()), which sorts the whole keyspace on the server to
// return one key; any linearizable read carries the same revision in its
// header, so this one reads a single key that is never written.
func currentRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read the current revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// putCompressed compresses src into the store as it uploads.
func putCompressed(ctx context.Context, store Store, s Snapshot, c Compression, src io.Reader) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Buffered, so the uploader reads in large pieces rather than in
		// every small write the compressor makes.
		bw := bufio.NewWriterSize(pw, 1<<20)
		zw := c.compressor(bw)
		_, err := io.Copy(zw, src)
		if err == nil {
			err = zw.Close()
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	err := store.Put(ctx, s, pr)
	// Stops the compressor if Put returned without reading everything.
	pr.CloseWithError(errors.New("the upload ended"))
	<-done
	return err
}

// ReadFull writes the decompressed database of a full snapshot, with its
// sha256 trailer (etcd's snapshot restore checks it), to w, and checks the
// trailer. On error, what was written to w must be discarded.
func ReadFull(ctx context.Context, store Store, s Snapshot, w io.Writer) error {
	if s.Kind != KindFull {
		return fmt.Errorf("read full snapshot %s: it is a %s snapshot", s.name(), s.Kind)
	}
	if err := readFull(ctx, store, s, w); err != nil {
		return fmt.Errorf("read full snapshot %s: %w", s.name(), err)
	}
	return nil
}

func readFull(ctx context.Context, store Store, s Snapshot, w io.Writer) error {
	rc, err := store.Get(ctx, s)
	if err != nil {
		return err
	}
	defer rc.Close()
	dr, err := decompressor(s.CompressionSuffix, ctxReader{ctx, rc})
	if err != nil {
		return err
	}
	defer dr.Close()
	t := newTrailerHash()
	if _, err := io.Copy(io.MultiWriter(w, t), dr); err != nil {
		return err
	}
	return t.verifyDB()
}

// trailerHash hashes everything written to it but the last sha256.Size
// bytes, which it keeps: etcd's snapshot stream ends with the sha256 of
// the database before it, and the check needs no second pass.
type trailerHash struct {
	h     hash.Hash
	tail  [sha256.Size]byte
	n     int // bytes held in tail
	total int64
}

func newTrailerHash() *trailerHash { return &trailerHash{h: sha256.New()} }

func (t *trailerHash) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	if len(p) >= sha256.Size {
		t.h.Write(t.tail[:t.n])
		t.h.Write(p[:len(p)-sha256.Size])
		t.n = copy(t.tail[:], p[len(p)-sha256.Size:])
		return len(p), nil
	}
	// The held bytes that p pushes out of the last sha256.Size.
	if out := t.n + len(p) - sha256.Size; out > 0 {
		t.h.Write(t.tail[:out])
		t.n = copy(t.tail[:], t.tail[out:t.n])
	}
	t.n += copy(t.tail[t.n:], p)
	return len(p), nil
}

// verify checks that the trailer is the sha256 of what came before it.
func (t *trailerHash) verify() error {
	if t.n < sha256.Size {
		return fmt.Errorf("%d bytes are too few to end in a sha256", t.total)
	}
	if sum := t.h.Sum(nil); string(sum) != string(t.tail[:]) {
		return fmt.Errorf("sha256 mismatch: the content hashes to %x, its trailer says %x", sum, t.tail)
	}
	return nil
}

// verifyDB also checks the size: a bolt database is whole pages (a
// multiple of 512 bytes), so a stream without the trailer shows in its
// size, as BR checks.
func (t *trailerHash) verifyDB() error {
	if t.total%512 != sha256.Size {
		return fmt.Errorf("size %d is not a multiple of 512 plus a 32-byte sha256 trailer", t.total)
	}
	return t.verify()
}
