package snapshot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// brJSON is BR's marshalled Snapshot (docs: shared reference, produced by
// marshalling pkg/types.Snapshot): field order, the "Expriy" typo and null
// versionID must match byte for byte, as druid and BR clients read it.
const brJSON = `{"createdOn":"2025-11-24T16:00:00.123456789Z","immutabilityExpriyTime":"0001-01-01T00:00:00Z","versionID":null,"kind":"Full","snapDir":"","snapName":"Full-00000000-00000042-1764000000.gz.final","prefix":"","compressionSuffix":".gz","startRevision":0,"lastRevision":42,"isChunk":false,"isFinal":true}`

func TestSnapshotJSONIsBRs(t *testing.T) {
	s := newSnapshot(KindFull, 0, 42, Gzip, true, time.Date(2025, 11, 24, 16, 0, 0, 123456789, time.UTC))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != brJSON {
		t.Errorf("got\n%s\nwant\n%s", b, brJSON)
	}
	var back Snapshot
	if err := json.Unmarshal([]byte(brJSON), &back); err != nil {
		t.Fatal(err)
	}
	if !back.CreatedOn.Equal(s.CreatedOn) || back.SnapName != s.SnapName || back.VersionID != nil || !back.IsFinal {
		t.Errorf("unmarshal: %+v", back)
	}
}

func TestGenerateName(t *testing.T) {
	at := time.Unix(1764000000, 999).UTC()
	for _, tc := range []struct {
		kind        string
		start, last int64
		c           Compression
		final       bool
		want        string
	}{
		{KindFull, 0, 42, Gzip, false, "Full-00000000-00000042-1764000000.gz"},
		{KindFull, 0, 42, Gzip, true, "Full-00000000-00000042-1764000000.gz.final"},
		{KindDelta, 43, 50, LZW, false, "Incr-00000043-00000050-1764000000.Z"},
		{KindDelta, 43, 50, Zlib, false, "Incr-00000043-00000050-1764000000.zlib"},
		{KindFull, 0, 7, None, false, "Full-00000000-00000007-1764000000"},
		{KindFull, 0, 7, None, true, "Full-00000000-00000007-1764000000.final"},
		{KindDelta, 123456789, 1234567890, Gzip, false, "Incr-123456789-1234567890-1764000000.gz"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			s := newSnapshot(tc.kind, tc.start, tc.last, tc.c, tc.final, at)
			if s.SnapName != tc.want || s.GenerateName() != tc.want {
				t.Fatalf("name %q, GenerateName %q, want %q", s.SnapName, s.GenerateName(), tc.want)
			}
			for _, key := range []string{tc.want, "v2/" + tc.want, "etcd/v2/" + tc.want, "a/b/v2/" + tc.want} {
				p, err := ParseName(key)
				if err != nil {
					t.Fatal(err)
				}
				wantPrefix := strings.TrimSuffix(key, tc.want)
				if p.Kind != tc.kind || p.StartRevision != tc.start || p.LastRevision != tc.last ||
					p.CompressionSuffix != tc.c.Suffix() || p.IsFinal != tc.final || p.SnapName != tc.want ||
					!p.CreatedOn.Equal(time.Unix(1764000000, 0)) || p.CreatedOn.Location() != time.UTC || p.Prefix != wantPrefix {
					t.Errorf("ParseName(%q) = %+v", key, p)
				}
			}
		})
	}
}

func TestParseNameRefuses(t *testing.T) {
	for _, tc := range []struct{ key, reason string }{
		{"Full-00000000-00000042.gz", "needs 4 '-'-separated parts"},
		{"Full-00000000-00000042-1764000000-x.gz", "needs 4 '-'-separated parts"},
		{"Chunk-00000000-00000042-1764000000.gz", `unknown kind "Chunk"`},
		{"full-00000000-00000042-1764000000.gz", `unknown kind "full"`},
		{"Full-0000000x-00000042-1764000000.gz", "start revision"},
		{"Full-00000000-+0000042-1764000000.gz", "last revision"},
		{"Incr-00000050-00000043-1764000000.gz", "start revision 50 is after last revision 43"},
		{"Full-00000000-00000042-1764000000.bz2", `unknown compression suffix ".bz2"`},
		{"Full-00000000-00000042-1764000000.gz.gz", `unknown compression suffix ".gz.gz"`},
		{"Full-00000000-00000042-17640x0000.gz", "not a unix time"},
		{"Full-00000000-00000042-.gz", "not a unix time"},
		{"etcd/v1/Backup-1764000000/Full-00000000-00000042-1764000000", "legacy v1 layout"},
		{"etcd/v2/Full-00000000-00000042-1764000000.gz/0000001", "chunk objects"},
		{"etcd/v3/Full-00000000-00000042-1764000000.gz", "not directly under a v2/"},
		{"etcd/v2/.Full-00000000-00000042-1764000000.gz.partial-123", "needs 4 '-'-separated parts"},
		{"etcd/v2/.Full-00000000-00000042-1764000000.gz.partial", `unknown kind ".Full"`},
	} {
		t.Run(tc.key, func(t *testing.T) {
			_, err := ParseName(tc.key)
			if err == nil {
				t.Fatal("parsed")
			}
			if !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q should name the key and say %q", err, tc.reason)
			}
		})
	}
}

func TestSortSnapshots(t *testing.T) {
	mk := func(name string) Snapshot {
		s, err := ParseName(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	list := []Snapshot{
		mk("Full-00000000-00000100-1764000300.gz"),
		mk("Incr-00000101-00000120-1764000400.gz"),
		mk("Incr-00000043-00000100-1764000200.gz"),
		mk("Full-00000000-00000042-1764000000.gz"),
	}
	sortSnapshots(list)
	var got []string
	for _, s := range list {
		got = append(got, s.SnapName)
	}
	// A full taken at a delta's last revision sorts after it (by time).
	want := "Full-00000000-00000042-1764000000.gz Incr-00000043-00000100-1764000200.gz Full-00000000-00000100-1764000300.gz Incr-00000101-00000120-1764000400.gz"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}
