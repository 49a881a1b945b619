package reach

import (
	"slices"
	"testing"
)

type inner struct {
	hidden string
	raw    []byte
}

type outer struct {
	Name  string
	ptr   *inner
	Map   map[string]any
	List  []*inner
	Array [1]string
	self  *outer
}

func TestStringsFindsEverything(t *testing.T) {
	shared := &inner{hidden: "behind a pointer", raw: []byte("bytes")}
	o := &outer{
		Name:  "name",
		ptr:   shared,
		Map:   map[string]any{"key": &inner{hidden: "in a map"}},
		List:  []*inner{shared, nil},
		Array: [1]string{"in an array"},
	}
	o.self = o // a cycle must not loop
	got := Strings(o)
	for _, want := range []string{"name", "behind a pointer", "bytes", "key", "in a map", "in an array"} {
		if !slices.Contains(got, want) {
			t.Errorf("%q not found in %q", want, got)
		}
	}
	if n := len(got); n != 7 { // the shared pointer's two strings once each, plus the map's empty raw
		t.Errorf("found %d strings %q, want 7 (each pointer followed once)", n, got)
	}
}
