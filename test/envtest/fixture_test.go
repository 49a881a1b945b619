package envtest

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// pacemakerSuite is the shape of openshift/api's CRD validation test files
// (etcd/<version>/tests/pacemakerclusters.etcd.openshift.io/*.yaml).
type pacemakerSuite struct {
	Tests struct {
		OnCreate []pacemakerCase `json:"onCreate"`
		OnUpdate []pacemakerCase `json:"onUpdate"`
	} `json:"tests"`
}

type pacemakerCase struct {
	Name                string `json:"name"`
	Initial             string `json:"initial"`
	Updated             string `json:"updated"`
	ExpectedError       string `json:"expectedError"`
	ExpectedStatusError string `json:"expectedStatusError"`
}

// loadPacemakerSuite reads openshift/api's validation cases for version v
// from the module the tests are built against, so they always match the CRD
// that Start installs.
func loadPacemakerSuite(t *testing.T, v PacemakerVersion) pacemakerSuite {
	t.Helper()
	p, err := pacemakerFixturePath(v)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read openshift/api's PacemakerCluster test cases: %v", err)
	}
	var s pacemakerSuite
	if err := yaml.Unmarshal(raw, &s); err != nil {
		t.Fatalf("decode %s: %v", p, err)
	}
	if len(s.Tests.OnUpdate) == 0 {
		t.Fatalf("%s has no onUpdate cases; has its format changed?", p)
	}
	return s
}

func (s pacemakerSuite) update(t *testing.T, name string) pacemakerCase {
	t.Helper()
	for _, c := range s.Tests.OnUpdate {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("openshift/api has no PacemakerCluster onUpdate case %q", name)
	return pacemakerCase{}
}
