package kube

import (
	"testing"
	"time"
)

func TestBackoffDoublesToItsCapAndResets(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 8 * time.Second}
	want := []time.Duration{1, 2, 4, 8, 8, 8}
	for i, w := range want {
		got := b.Next()
		hi := w * time.Second
		if got > hi || got < hi*3/4 {
			t.Errorf("failure %d: wait %s, want within [%s, %s]", i+1, got, hi*3/4, hi)
		}
	}
	b.Reset()
	if got := b.Next(); got > time.Second {
		t.Errorf("after Reset: wait %s, want at most the base 1s", got)
	}
}
