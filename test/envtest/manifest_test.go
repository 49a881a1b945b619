package envtest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod/manifest"
)

// TestRenderedManifestsAreAccepted runs every golden static-pod manifest
// (IPv4, IPv6 with TLS, extra args) through the real API server's
// validation and admission as a server-side dry-run create, the way the
// kubelet's mirror pod would be checked.
func TestRenderedManifestsAreAccepted(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	goldens, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "..", "daemon", "runtime", "staticpod", "manifest", "testdata", "*.yaml"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden manifests found (%v)", err)
	}
	env := Start(t, Options{})
	for _, path := range goldens {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := manifest.Unmarshal(data)
			if err != nil {
				t.Fatal(err)
			}
			// A mirror pod is named after the node, as the kubelet does.
			pod.Name += "-node-1"
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Errorf("the API server rejects the rendered manifest: %v", err)
			}
		})
	}
}
