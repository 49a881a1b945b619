package snapshot

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadAheadPassesTheStreamThrough checks that what comes out is what
// went in, through Read and through WriteTo (io.Copy), for streams that
// end on and off a chunk's edge and arrive in odd pieces, and that an
// error of the stream reaches the reader after the data before it.
func TestReadAheadPassesTheStreamThrough(t *testing.T) {
	data := make([]byte, 1<<20+123)
	for i := range data {
		data[i] = byte(rand.N(256))
	}
	for _, size := range []int{0, 1, 4096, 1 << 16, len(data)} {
		for _, viaCopy := range []bool{true, false} {
			src := io.NopCloser(iotest.HalfReader(bytes.NewReader(data[:size])))
			ra := readAhead(src, 3, 4096)
			var got []byte
			var err error
			if viaCopy {
				var out bytes.Buffer
				_, err = io.Copy(&out, ra)
				got = out.Bytes()
			} else {
				got, err = io.ReadAll(iotest.OneByteReader(ra))
			}
			if err != nil || !bytes.Equal(got, data[:size]) {
				t.Errorf("size %d (copy %v): %d bytes, %v; want the %d bytes in", size, viaCopy, len(got), err, size)
			}
			if err := ra.Close(); err != nil {
				t.Error(err)
			}
		}
	}

	broken := errors.New("the stream broke")
	src := io.NopCloser(io.MultiReader(bytes.NewReader(data[:10000]), iotest.ErrReader(broken)))
	ra := readAhead(src, 3, 4096)
	var out bytes.Buffer
	if _, err := io.Copy(&out, ra); !errors.Is(err, broken) || out.Len() != 10000 {
		t.Errorf("a broken stream: %d bytes, %v; want 10000 and %v", out.Len(), err, broken)
	}
	ra.Close()
}

// blockingReader blocks in Read until it is closed, as a stream whose
// sender went silent does.
type blockingReader struct{ closed chan struct{} }

func (b blockingReader) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("closed")
}

func (b blockingReader) Close() error { close(b.closed); return nil }

// TestReadAheadCloseEndsABlockedRead: a consumer that gives up (its
// compressor failed) must not wait for ever on a silent stream.
func TestReadAheadCloseEndsABlockedRead(t *testing.T) {
	ra := readAhead(blockingReader{closed: make(chan struct{})}, 2, 16)
	done := make(chan struct{})
	go func() { ra.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while the stream was silent")
	}
}
