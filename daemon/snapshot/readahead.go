package snapshot

import (
	"errors"
	"io"
	"sync"
)

// readAhead reads r on its own goroutine into up to depth buffers of size
// bytes, so that what consumes the data (a compressor) and what produces
// it (etcd's snapshot stream, which gRPC receives and decodes) run at the
// same time: a full snapshot then takes as long as the slower of the two,
// not their sum. Close closes r, which ends a read the goroutine is
// blocked in, and waits for the goroutine.
func readAhead(r io.ReadCloser, depth, size int) io.ReadCloser {
	ra := &readAheader{src: r, full: make(chan chunk, depth), free: make(chan []byte, depth+1), stop: make(chan struct{})}
	for range depth + 1 {
		ra.free <- make([]byte, size)
	}
	ra.wg.Go(func() { ra.fill(r) })
	return ra
}

type chunk struct {
	buf []byte
	err error
}

type readAheader struct {
	src     io.ReadCloser
	full    chan chunk
	free    chan []byte
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup

	cur  []byte // the chunk being read, and what of it is left
	rest []byte
	err  error
}

func (ra *readAheader) fill(r io.Reader) {
	for {
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.stop:
			return
		}
		n, err := io.ReadFull(r, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		select {
		case ra.full <- chunk{buf: buf[:n], err: err}:
		case <-ra.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (ra *readAheader) Read(p []byte) (int, error) {
	if !ra.more() {
		return 0, ra.err
	}
	n := copy(p, ra.rest)
	ra.rest = ra.rest[n:]
	return n, nil
}

// more makes sure some of the stream is at hand in rest, taking the next
// chunk when the current one is used up; false once the stream ended
// (ra.err says how).
func (ra *readAheader) more() bool {
	for len(ra.rest) == 0 {
		if ra.err != nil {
			return false
		}
		if ra.cur != nil {
			ra.free <- ra.cur[:cap(ra.cur)]
			ra.cur = nil
		}
		c := <-ra.full
		ra.cur, ra.rest, ra.err = c.buf, c.buf, c.err
	}
	return true
}

// WriteTo hands whole chunks to w, sparing io.Copy a copy of each.
func (ra *readAheader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for ra.more() {
		n, err := w.Write(ra.rest)
		total += int64(n)
		ra.rest = ra.rest[n:]
		if err != nil {
			return total, err
		}
	}
	if errors.Is(ra.err, io.EOF) {
		return total, nil
	}
	return total, ra.err
}

func (ra *readAheader) Close() error {
	var err error
	ra.stopped.Do(func() {
		close(ra.stop)
		err = ra.src.Close()
	})
	ra.wg.Wait()
	return err
}
