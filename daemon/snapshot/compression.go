package snapshot

import (
	"compress/lzw"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// Compression is BR's --compression-policy, plus "none" for BR's
// --compress-snapshots=false. The name suffix tells a reader which one a
// snapshot used.
type Compression string

// The compressions BR writes and reads. gzip and zlib are
// klauspost/compress's: the same formats (RFC 1952 and 1950) that BR and
// every other reader read, written and read several times faster than the
// standard library's (BenchmarkFullSnapshot, TestEtcdbrctlRestoresEtcdletSnapshots).
const (
	Gzip Compression = "gzip" // ".gz", BR's default
	LZW  Compression = "lzw"  // ".Z", LSB order, literal width 8
	Zlib Compression = "zlib" // ".zlib"
	None Compression = "none" // no suffix
)

// lzwLiteralWidth is BR's LzwLiteralWidth; a reader must use the same.
const lzwLiteralWidth = 8

// ParseCompression parses a policy name; "" is the default, gzip.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case "":
		return Gzip, nil
	case Gzip, LZW, Zlib, None:
		return c, nil
	}
	return "", fmt.Errorf("unknown compression %q (want gzip, lzw, zlib or none)", s)
}

// Suffix is the name suffix of the compression; the zero value is gzip.
func (c Compression) Suffix() string {
	switch c {
	case LZW:
		return ".Z"
	case Zlib:
		return ".zlib"
	case None:
		return ""
	}
	return ".gz"
}

// compressionOf maps a name suffix back to its compression.
func compressionOf(suffix string) (Compression, error) {
	for _, c := range []Compression{Gzip, LZW, Zlib, None} {
		if c.Suffix() == suffix {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown compression suffix %q (want .gz, .Z, .zlib or none)", suffix)
}

// deflateLevel is the gzip and zlib level. BR writes level 6, the
// default; every reader reads every level. On data that compresses like
// Kubernetes objects (3-4x), level 2 compresses three times as fast as 6
// and 1.6 times as fast as 3, and to a smaller size than 3 does; a full
// snapshot is compressed as it arrives, so at level 2 the compression
// keeps up with etcd's stream (BenchmarkFullSnapshot).
const deflateLevel = 2

// compressor returns a writer compressing into w; closing it flushes the
// compressed stream but leaves w open.
func (c Compression) compressor(w io.Writer) io.WriteCloser {
	switch c {
	case LZW:
		return lzw.NewWriter(w, lzw.LSB, lzwLiteralWidth)
	case Zlib:
		zw, _ := zlib.NewWriterLevel(w, deflateLevel) // errs only for a bad level
		return zw
	case None:
		return nopWriteCloser{w}
	}
	gw, _ := gzip.NewWriterLevel(w, deflateLevel)
	return gw
}

// decompressor returns the decompressed content of r, compressed as the
// name suffix says. Closing it does not close r.
func decompressor(suffix string, r io.Reader) (io.ReadCloser, error) {
	c, err := compressionOf(suffix)
	if err != nil {
		return nil, err
	}
	switch c {
	case LZW:
		return lzw.NewReader(r, lzw.LSB, lzwLiteralWidth), nil
	case Zlib:
		zr, err := zlib.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("zlib: %w", err)
		}
		return zr, nil
	case None:
		return io.NopCloser(r), nil
	}
	gr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return gr, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
