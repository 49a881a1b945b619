package kube

import (
	"math/rand/v2"
	"time"
)

// Backoff spaces out the retries of a failing target: Base, doubling up to
// Max, each with up to a quarter of random jitter, so that the agents of a
// cluster whose API server comes back do not all call it in the same
// instant. Not safe for concurrent use: one per target loop.
type Backoff struct {
	Base, Max time.Duration
	failures  int
}

// Next returns the wait after one more failure.
func (b *Backoff) Next() time.Duration {
	d := b.Base
	for i := 0; i < b.failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	b.failures++
	return d - time.Duration(rand.Int64N(int64(d)/4+1)) //nolint:gosec // G404: jitter, not a secret
}

// Reset starts over after a success.
func (b *Backoff) Reset() { b.failures = 0 }
