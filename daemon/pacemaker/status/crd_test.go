package status

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"
	"sigs.k8s.io/yaml"
)

// The Go validation stands in for the API server until the reporting
// tests run one. These tests keep it honest against the real CRD
// manifests and the upstream validation cases in the openshift/api module
// that go.mod pins: a bump that changes a rule fails here.

func apiModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatalf("locate the github.com/openshift/api module (go mod download): %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("github.com/openshift/api is not in the module cache; run go mod download")
	}
	return dir
}

var versions = []string{VersionV1, VersionV1alpha1}

type schemaFacts struct {
	bounds   map[string]bounds
	enums    map[string][]string
	patterns map[string]string
	// rules maps a CEL message to the schema paths that carry it.
	rules map[string][]string
}

func loadCRD(t *testing.T, version string) schemaFacts {
	t.Helper()
	path := filepath.Join(apiModuleDir(t), "etcd", version, "zz_generated.crd-manifests", "0000_25_etcd_01_pacemakerclusters.crd.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != version {
		t.Fatalf("%s: expected exactly version %s", path, version)
	}
	f := schemaFacts{bounds: map[string]bounds{}, enums: map[string][]string{}, patterns: map[string]string{}, rules: map[string][]string{}}
	walkSchema(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "", &f)
	return f
}

func walkSchema(node map[string]any, path string, f *schemaFacts) {
	num := func(k string) (int, bool) {
		v, ok := node[k].(float64)
		return int(v), ok
	}
	minItems, hasMinI := num("minItems")
	maxItems, hasMaxI := num("maxItems")
	minLen, hasMinL := num("minLength")
	maxLen, hasMaxL := num("maxLength")
	switch {
	case hasMaxI || hasMinI:
		f.bounds[path] = bounds{minItems, maxItems}
	case hasMaxL || hasMinL:
		f.bounds[path] = bounds{minLen, maxLen}
	}
	if enum, ok := node["enum"].([]any); ok {
		for _, v := range enum {
			f.enums[path] = append(f.enums[path], fmt.Sprint(v))
		}
	}
	if p, ok := node["pattern"].(string); ok {
		f.patterns[path] = p
	}
	if rules, ok := node["x-kubernetes-validations"].([]any); ok {
		for _, r := range rules {
			msg := r.(map[string]any)["message"].(string)
			f.rules[msg] = append(f.rules[msg], path)
		}
	}
	if props, ok := node["properties"].(map[string]any); ok {
		for name, child := range props {
			p := name
			if path != "" {
				p = path + "." + name
			}
			walkSchema(child.(map[string]any), p, f)
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		walkSchema(items, path+"[]", f)
	}
}

func TestGoValidationMatchesCRD(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			f := loadCRD(t, v)
			for path, got := range f.bounds {
				if !strings.HasPrefix(path, "status") {
					continue
				}
				field, isCondition := conditionField(path)
				want, ok := schemaBounds[path]
				if isCondition {
					want, ok = conditionBounds[field]
				}
				if !ok || want != got {
					t.Errorf("%s: CRD bounds %v, Go validation has %v (known: %v)", path, got, want, ok)
				}
			}
			for path := range schemaBounds {
				if _, ok := f.bounds[path]; !ok {
					t.Errorf("%s: Go validation has bounds the CRD does not", path)
				}
			}
			for path, got := range f.enums {
				if field, ok := conditionField(path); ok && field == "status" {
					if !slices.Equal(got, []string{"True", "False", "Unknown"}) {
						t.Errorf("%s: condition status enum %v", path, got)
					}
					continue
				}
				if want := schemaEnums[path]; !slices.Equal(sorted(got), sorted(want)) {
					t.Errorf("%s: CRD enum %v, Go validation %v", path, got, want)
				}
			}
			for path, got := range f.patterns {
				field, _ := conditionField(path)
				var want string
				switch field {
				case "type":
					want = conditionTypePattern.String()
				case "reason":
					want = conditionReasonPattern.String()
				}
				if got != want {
					t.Errorf("%s: CRD pattern %q, Go validation %q", path, got, want)
				}
			}
			for msg, paths := range f.rules {
				if _, ok := ruleViolations[msg]; !ok {
					t.Errorf("CRD rule %q (at %v) has no violation case in ruleViolations; teach validate.go and this test about it", msg, paths)
				}
			}
			for msg := range ruleViolations {
				if _, ok := f.rules[msg]; !ok {
					t.Errorf("ruleViolations has %q, which the CRD no longer has", msg)
				}
			}
		})
	}
}

// conditionField reports whether path is a field of a metav1.Condition.
func conditionField(path string) (string, bool) {
	i := strings.LastIndex(path, "conditions[].")
	if i < 0 {
		return "", false
	}
	return path[i+len("conditions[]."):], true
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// TestUpstreamValidationCases runs openshift/api's own validation test
// cases for the CRD through the Go validation: what the API server accepts
// is accepted, what it rejects is rejected with the same message.
func TestUpstreamValidationCases(t *testing.T) {
	for _, v := range versions {
		path := filepath.Join(apiModuleDir(t), "etcd", v, "tests", "pacemakerclusters.etcd.openshift.io", "DualReplica.yaml")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var suite struct {
			Tests struct {
				OnCreate []upstreamCase `json:"onCreate"`
				OnUpdate []upstreamCase `json:"onUpdate"`
			}
		}
		if err := yaml.Unmarshal(data, &suite); err != nil {
			t.Fatal(err)
		}
		cases := append(suite.Tests.OnCreate, suite.Tests.OnUpdate...)
		if len(cases) < 5 {
			t.Fatalf("%s: only %d cases found", path, len(cases))
		}
		for _, c := range cases {
			t.Run(v+"/"+c.Name, func(t *testing.T) {
				obj := decodeObject(t, v, c.Updated)
				var prev Object
				if c.Updated == "" {
					obj = decodeObject(t, v, c.Initial)
				} else {
					prev = decodeObject(t, v, c.Initial)
				}
				err := Validate(obj, prev)
				want := c.ExpectedError + c.ExpectedStatusError
				switch {
				case want == "" && err != nil:
					t.Errorf("rejected an object the API server accepts: %v", err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("error = %v, want one containing %q", err, want)
				}
			})
		}
	}
}

type upstreamCase struct {
	Name                string
	Initial             string
	Updated             string
	ExpectedError       string `json:"expectedError"`
	ExpectedStatusError string `json:"expectedStatusError"`
}

func decodeObject(t *testing.T, version, doc string) Object {
	t.Helper()
	if doc == "" {
		return nil
	}
	var obj Object = &etcdv1.PacemakerCluster{}
	if version == VersionV1alpha1 {
		obj = &etcdv1alpha1.PacemakerCluster{}
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("decode test object: %v", err)
	}
	return obj
}
