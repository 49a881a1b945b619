// Package snapshot takes, stores, lists, reads, prunes and restores etcd
// snapshots in etcd-backup-restore's (BR) format and object naming, so that
// BR and etcdlet read each other's backups: a full snapshot is the
// compressed Maintenance.Snapshot stream with its sha256 trailer, a delta
// is the compressed JSON array of watch events followed by the sha256 of
// that JSON, and both live under <prefix>/v2/ with names such as
// Full-00000000-00000042-1764000000.gz.
package snapshot

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The kinds of snapshot, as BR spells them in names and JSON.
const (
	KindFull  = "Full"
	KindDelta = "Incr"
)

// finalSuffix marks the last full snapshot BR takes before its etcd stops.
const finalSuffix = ".final"

// Snapshot is the metadata of one snapshot. The field order and JSON names
// are BR's pkg/types.Snapshot, typo included, because BR's HTTP API
// (/snapshot/full, /snapshot/latest) returns it marshalled as is.
type Snapshot struct {
	CreatedOn              time.Time `json:"createdOn"`
	ImmutabilityExpiryTime time.Time `json:"immutabilityExpriyTime"`
	// VersionID is the S3 object version, set when listing a versioned
	// bucket; Get and Delete then address that version.
	VersionID         *string `json:"versionID"`
	Kind              string  `json:"kind"`
	SnapDir           string  `json:"snapDir"`
	SnapName          string  `json:"snapName"`
	Prefix            string  `json:"prefix"`
	CompressionSuffix string  `json:"compressionSuffix"`
	StartRevision     int64   `json:"startRevision"`
	LastRevision      int64   `json:"lastRevision"`
	IsChunk           bool    `json:"isChunk"`
	IsFinal           bool    `json:"isFinal"`
}

// GenerateName is the object name BR gives the snapshot.
func (s Snapshot) GenerateName() string {
	name := fmt.Sprintf("%s-%08d-%08d-%d%s", s.Kind, s.StartRevision, s.LastRevision, s.CreatedOn.Unix(), s.CompressionSuffix)
	if s.IsFinal {
		name += finalSuffix
	}
	return name
}

// name is the object name: SnapName as listed, or the generated one for a
// Snapshot built by hand.
func (s Snapshot) name() string {
	if s.SnapName != "" {
		return s.SnapName
	}
	return s.GenerateName()
}

// newSnapshot is a fresh snapshot as BR makes one: created now in UTC,
// named, with neither directory nor prefix.
func newSnapshot(kind string, start, last int64, c Compression, final bool, now time.Time) Snapshot {
	s := Snapshot{
		CreatedOn: now.UTC(), Kind: kind, StartRevision: start, LastRevision: last,
		CompressionSuffix: c.Suffix(), IsFinal: final,
	}
	s.SnapName = s.GenerateName()
	return s
}

// ParseName parses an object key, "<prefix>/v2/<name>", or a bare name.
// Prefix is set to the key up to and including "v2/", as BR sets it.
func ParseName(key string) (Snapshot, error) {
	s, err := parseName(key)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse snapshot key %q: %w", key, err)
	}
	return s, nil
}

func parseName(key string) (Snapshot, error) {
	var s Snapshot
	name := key
	if i := strings.LastIndex(key, "/"); i >= 0 {
		dir := key[:i]
		name = key[i+1:]
		switch {
		case path.Base(dir) == "v2":
			s.Prefix = dir + "/"
		case strings.HasPrefix(path.Base(dir), "Backup-") || path.Base(dir) == "v1":
			return Snapshot{}, fmt.Errorf("legacy v1 layout (<prefix>/v1/Backup-<unix>/<name>) is not read")
		case path.Base(path.Dir(dir)) == "v2":
			return Snapshot{}, fmt.Errorf("chunk objects (<prefix>/v2/<name>/<part>) are not snapshots")
		default:
			return Snapshot{}, fmt.Errorf("the name is not directly under a v2/ directory")
		}
	}
	tokens := strings.Split(name, "-")
	if len(tokens) != 4 {
		return Snapshot{}, fmt.Errorf("the name needs 4 '-'-separated parts (Kind-Start-Last-Unix[suffix]), it has %d", len(tokens))
	}
	switch tokens[0] {
	case KindFull, KindDelta:
		s.Kind = tokens[0]
	default:
		return Snapshot{}, fmt.Errorf("unknown kind %q (want %s or %s)", tokens[0], KindFull, KindDelta)
	}
	var err error
	if s.StartRevision, err = parseRevision(tokens[1]); err != nil {
		return Snapshot{}, fmt.Errorf("start revision: %w", err)
	}
	if s.LastRevision, err = parseRevision(tokens[2]); err != nil {
		return Snapshot{}, fmt.Errorf("last revision: %w", err)
	}
	if s.StartRevision > s.LastRevision {
		return Snapshot{}, fmt.Errorf("start revision %d is after last revision %d", s.StartRevision, s.LastRevision)
	}
	// "<unix>[.gz|.Z|.zlib][.final]"
	rest := tokens[3]
	if strings.HasSuffix(rest, finalSuffix) {
		s.IsFinal = true
		rest = strings.TrimSuffix(rest, finalSuffix)
	}
	unix := rest
	if i := strings.Index(rest, "."); i >= 0 {
		unix, s.CompressionSuffix = rest[:i], rest[i:]
		if _, err := compressionOf(s.CompressionSuffix); err != nil {
			return Snapshot{}, err
		}
	}
	secs, err := strconv.ParseInt(unix, 10, 64)
	if err != nil || secs < 0 {
		return Snapshot{}, fmt.Errorf("creation time %q is not a unix time in seconds", unix)
	}
	s.CreatedOn = time.Unix(secs, 0).UTC()
	s.SnapName = name
	return s, nil
}

func parseRevision(tok string) (int64, error) {
	rev, err := strconv.ParseInt(tok, 10, 64)
	if err != nil || rev < 0 || strings.HasPrefix(tok, "+") {
		return 0, fmt.Errorf("%q is not a non-negative decimal number", tok)
	}
	return rev, nil
}

// sortSnapshots orders as BR's SnapList does: by last revision, then by
// creation time, so a full taken at a delta's last revision comes after it.
func sortSnapshots(list []Snapshot) {
	slices.SortStableFunc(list, func(a, b Snapshot) int {
		return cmp.Or(cmp.Compare(a.LastRevision, b.LastRevision), cmp.Compare(a.CreatedOn.Unix(), b.CreatedOn.Unix()))
	})
}
