package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fill writes about size bytes of 8 KiB values that compress like
// Kubernetes objects do (3-4x) under /registry/pods/, from eight writers
// at once, for benchmarks that need a keyspace of a given size.
func Fill(ctx context.Context, cli *clientv3.Client, size int) error {
	const valueSize = 8 << 10
	n := size / valueSize
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1)) //nolint:gosec // G404: test data, not a secret
			for i := w; i < n; i += 8 {
				var v strings.Builder
				for v.Len() < valueSize {
					fmt.Fprintf(&v, `{"name":"pod-%x","uid":"%016x","phase":"Running"},`, r.Uint32(), r.Uint64())
				}
				if _, err := cli.Put(ctx, fmt.Sprintf("/registry/pods/ns/%08d", i), v.String()[:valueSize]); err != nil {
					errs <- fmt.Errorf("fill the keyspace: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
