package envtest

import (
	"errors"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Apply creates every object of a YAML (or JSON) file, as an operator's
// `kubectl create -f` would: a shipped manifest tried as shipped.
func (e *Env) Apply(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := e.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("%s: create %s %s: %v", path, obj.GetKind(), obj.GetName(), err)
		}
	}
}
