package envtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	druidcrds "github.com/gardener/etcd-druid/api/core/v1alpha1/crds"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// PacemakerVersion selects which version of OpenShift's PacemakerCluster CRD
// a control plane serves.
type PacemakerVersion string

const (
	// PacemakerNone installs no PacemakerCluster CRD.
	PacemakerNone PacemakerVersion = ""
	// PacemakerV1 installs the etcd.openshift.io/v1 CRD.
	PacemakerV1 PacemakerVersion = "v1"
	// PacemakerV1alpha1 installs the etcd.openshift.io/v1alpha1 CRD.
	PacemakerV1alpha1 PacemakerVersion = "v1alpha1"
)

const openshiftAPIModule = "github.com/openshift/api"

// druidK8sVersion is the Kubernetes version passed to etcd-druid's CRD
// chooser. Anything from 1.29 on selects the CRD with CEL validation, which
// is what a real cluster runs and what the kube-apiserver we build supports.
const druidK8sVersion = "1.37"

// pacemakerCRDPath returns the PacemakerCluster CRD manifest for version v in
// the openshift/api module. openshift/api ships one manifest per version,
// both with the same CRD name, so exactly one of them can be installed.
func pacemakerCRDPath(v PacemakerVersion) (string, error) {
	if v != PacemakerV1 && v != PacemakerV1alpha1 {
		return "", fmt.Errorf("unknown PacemakerCluster version %q (want %q or %q)", v, PacemakerV1, PacemakerV1alpha1)
	}
	dir, err := moduleDir(openshiftAPIModule)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "etcd", string(v), "zz_generated.crd-manifests", "0000_25_etcd_01_pacemakerclusters.crd.yaml")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("PacemakerCluster %s CRD manifest: %w", v, err)
	}
	return p, nil
}

// pacemakerFixturePath returns openshift/api's own validation cases for the
// PacemakerCluster CRD at version v, used as known-good and known-bad data.
func pacemakerFixturePath(v PacemakerVersion) (string, error) {
	dir, err := moduleDir(openshiftAPIModule)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "etcd", string(v), "tests", "pacemakerclusters.etcd.openshift.io", "DualReplica.yaml"), nil
}

// moduleDir returns the directory of module in the module cache, as resolved
// by the go.mod of the module the test runs in.
func moduleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate module %s with go list: %w: %s", module, err, strings.TrimSpace(stderr.String()))
	}
	// go list prints an empty line and exits 0 when the module is required
	// but not in the current GOMODCACHE (for example a test binary run with
	// another GOMODCACHE than it was built with).
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not in the module cache (GOMODCACHE=%s); run 'go mod download %s'",
			module, os.Getenv("GOMODCACHE"), module)
	}
	return dir, nil
}

// druidCRDs returns etcd-druid's CRDs, embedded in its api module: Etcd,
// EtcdOpsTask and EtcdCopyBackupsTask. All of them, because the operator
// (StartDruid) always runs a controller for each, and a controller whose
// kind is not served never starts its workers.
func druidCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := druidcrds.GetAll(druidK8sVersion)
	if err != nil {
		return nil, fmt.Errorf("etcd-druid CRDs for Kubernetes %s: %w", druidK8sVersion, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range []string{
		druidcrds.ResourceNameEtcd,
		druidcrds.ResourceNameEtcdOpsTask,
		druidcrds.ResourceNameEtcdCopyBackupsTask,
	} {
		raw, ok := all[name]
		if !ok || raw == "" {
			return nil, errors.New("etcd-druid api module has no " + name + " CRD")
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(raw), crd); err != nil {
			return nil, fmt.Errorf("decode the %s CRD: %w", name, err)
		}
		if crd.Name != name {
			return nil, fmt.Errorf("etcd-druid's %s CRD is named %q", name, crd.Name)
		}
		out = append(out, crd)
	}
	return out, nil
}
