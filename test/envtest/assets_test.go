package envtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A test run without the binaries must fail with directions, never skip.
func TestBinariesErrorsSayHowToGetThem(t *testing.T) {
	nonExec := t.TempDir()
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(nonExec, name), []byte("not a binary"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, assets string
		want         []string
	}{
		{"unset", "", []string{"KUBEBUILDER_ASSETS is not set"}},
		{"empty dir", t.TempDir(), []string{"kube-apiserver", "etcd", "no such file"}},
		{"not executable", nonExec, []string{"kube-apiserver is not an executable file", "etcd is not an executable file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(assetsEnv, tc.assets)
			_, _, err := binaries()
			if err == nil {
				t.Fatalf("binaries() with %s=%q: no error", assetsEnv, tc.assets)
			}
			for _, w := range append(tc.want, "hack/envtest.sh", "make test") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestUnknownPacemakerVersionIsAnError(t *testing.T) {
	if _, err := pacemakerCRDPath("v2"); err == nil || !strings.Contains(err.Error(), `"v2"`) {
		t.Fatalf("pacemakerCRDPath(v2) = %v, want an error naming the version", err)
	}
}
