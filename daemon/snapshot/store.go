package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Store is an object store of snapshots under a prefix: a snapshot named N
// is the object path.Join(prefix, "v2", N), where BR puts it for the same
// --store-prefix.
type Store interface {
	// Put stores the content under the snapshot's name; a reader never
	// sees a partial object under that name.
	Put(ctx context.Context, s Snapshot, r io.Reader) error
	// Get opens the stored content; errors.Is(err, ErrNotFound) when absent.
	Get(ctx context.Context, s Snapshot) (io.ReadCloser, error)
	// List returns every snapshot under <prefix>/v2/, sorted by last
	// revision then creation time; objects whose names do not parse are
	// left out.
	List(ctx context.Context) ([]Snapshot, error)
	// Delete removes the snapshot; an absent one is not an error.
	Delete(ctx context.Context, s Snapshot) error
	// String names the store for logs.
	String() string
}

// ErrNotFound is returned (wrapped) by Get for a snapshot not in the store.
var ErrNotFound = errors.New("snapshot not found")

// cleanPrefix normalises a store prefix ("/a/b/" is "a/b") and refuses one
// that climbs out of the store's root.
func cleanPrefix(prefix string) (string, error) {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return "", nil
	}
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("prefix %q leaves the store's root", prefix)
	}
	return p, nil
}

// objectKey is where a snapshot lives under a (clean) prefix. The name must
// be one List would parse back, so that nothing is stored out of sight and
// no name walks out of <prefix>/v2/.
func objectKey(prefix string, s Snapshot) (string, error) {
	name := s.name()
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("snapshot name %q contains '/'", name)
	}
	if _, err := ParseName(name); err != nil {
		return "", err
	}
	return path.Join(prefix, "v2", name), nil
}

// parseKeys turns listed object keys into sorted snapshots, leaving out the
// keys that are not snapshot names (temporary files, foreign objects).
func parseKeys(keys []string, versions []*string) []Snapshot {
	list := make([]Snapshot, 0, len(keys))
	for i, key := range keys {
		s, err := parseName(key)
		if err != nil {
			continue
		}
		if versions != nil {
			s.VersionID = versions[i]
		}
		list = append(list, s)
	}
	sortSnapshots(list)
	return list
}

// ctxReader fails reads once ctx is done, so a copy from a reader that
// knows nothing of contexts stops when the caller gives up.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
