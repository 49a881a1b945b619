package envtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// assetsEnv names the directory holding kube-apiserver and etcd; the name is
// controller-runtime's convention.
const assetsEnv = "KUBEBUILDER_ASSETS"

// howToGetAssets is appended to every asset error, so a failing test says how
// to fix it.
const howToGetAssets = "build the binaries with hack/envtest.sh and run " +
	`KUBEBUILDER_ASSETS="$(hack/envtest.sh)" go test ...` + ", or run `make test`"

// binaries returns the paths of the kube-apiserver and etcd binaries in
// $KUBEBUILDER_ASSETS. They are resolved here rather than by envtest, whose
// fallbacks (TEST_ASSET_* variables, /usr/local/kubebuilder/bin) could pick up
// binaries of another version without anyone noticing.
func binaries() (apiServer, etcd string, err error) {
	dir := os.Getenv(assetsEnv)
	if dir == "" {
		return "", "", fmt.Errorf("%s is not set; %s", assetsEnv, howToGetAssets)
	}
	apiServer = filepath.Join(dir, "kube-apiserver")
	etcd = filepath.Join(dir, "etcd")
	var errs []error
	for _, p := range []string{apiServer, etcd} {
		if err := checkExecutable(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return "", "", fmt.Errorf("%s=%s: %w; %s", assetsEnv, dir, errors.Join(errs...), howToGetAssets)
	}
	return apiServer, etcd, nil
}

// druidEnv names the etcd-druid operator binary that StartDruid runs.
const druidEnv = "ETCDLET_DRUID"

// howToGetDruid is appended to every error about the druid binary.
const howToGetDruid = "run hack/druid.sh, or make test, which builds it: " +
	`ETCDLET_DRUID="$(hack/druid.sh)" go test ...`

// druidBinary returns the path of the etcd-druid binary in $ETCDLET_DRUID.
func druidBinary() (string, error) {
	p := os.Getenv(druidEnv)
	if p == "" {
		return "", fmt.Errorf("%s is not set; %s", druidEnv, howToGetDruid)
	}
	if err := checkExecutable(p); err != nil {
		return "", fmt.Errorf("%s=%s: %w; %s", druidEnv, p, err, howToGetDruid)
	}
	return p, nil
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", filepath.Base(path), err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
