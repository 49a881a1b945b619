package snapshot

import (
	"bytes"
	"compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseCompression(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Compression
		err  string
	}{
		{"", Gzip, ""},
		{"gzip", Gzip, ""},
		{"lzw", LZW, ""},
		{"zlib", Zlib, ""},
		{"none", None, ""},
		{"gz", "", `unknown compression "gz" (want gzip, lzw, zlib or none)`},
		{"GZIP", "", `unknown compression "GZIP"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCompression(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v, want %q", got, err, tc.want)
			}
		})
	}
}

// TestCompressionRoundTrip compresses with the package and decompresses
// with the standard library readers BR uses (and back), so the streams are
// the ones BR reads and writes.
func TestCompressionRoundTrip(t *testing.T) {
	// Compressible, like a database of keys and values.
	var db bytes.Buffer
	r := rand.New(rand.NewPCG(1, 2))
	for db.Len() < 3<<20 {
		fmt.Fprintf(&db, "/registry/pods/ns-%d/pod-%d {\"phase\":\"Running\"}\n", r.IntN(100), r.IntN(1000))
	}
	data := db.Bytes()
	brReaders := map[Compression]func(io.Reader) (io.Reader, error){
		Gzip: func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) },
		LZW:  func(r io.Reader) (io.Reader, error) { return lzw.NewReader(r, lzw.LSB, 8), nil },
		Zlib: func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) },
		None: func(r io.Reader) (io.Reader, error) { return r, nil },
	}
	brWriters := map[Compression]func(io.Writer) io.WriteCloser{
		Gzip: func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		LZW:  func(w io.Writer) io.WriteCloser { return lzw.NewWriter(w, lzw.LSB, 8) },
		Zlib: func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) },
		None: func(w io.Writer) io.WriteCloser { return nopWriteCloser{w} },
	}
	for _, c := range []Compression{Gzip, LZW, Zlib, None} {
		t.Run(string(c), func(t *testing.T) {
			var ours bytes.Buffer
			zw := c.compressor(&ours)
			if _, err := zw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			if c != None && ours.Len() >= len(data)/2 {
				t.Errorf("%d bytes compressed to %d", len(data), ours.Len())
			}
			br, err := brReaders[c](bytes.NewReader(ours.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(br); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("BR's reader: %d bytes, %v", len(got), err)
			}

			var theirs bytes.Buffer
			bw := brWriters[c](&theirs)
			if _, err := bw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := bw.Close(); err != nil {
				t.Fatal(err)
			}
			dr, err := decompressor(c.Suffix(), &theirs)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(dr); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("our reader of BR's stream: %d bytes, %v", len(got), err)
			}
		})
	}
}
