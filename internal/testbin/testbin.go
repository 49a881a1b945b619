// Package testbin finds the programs tests run that make test builds or
// installs (an etcd of another minor, etcd-backup-restore, promtool, …)
// through the environment variable that names each, and fails the test
// saying how to get one that is missing: a test never skips for lack of
// its real component.
package testbin

import (
	"os"
	"path/filepath"
)

// TB is what the lookups need of a test.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Executable is the executable the environment variable env names (or,
// with file, the file of that name in the directory env names); the test
// fails saying how to get it.
func Executable(t TB, env, file, how string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: %s", env, how)
	}
	if file != "" {
		p = filepath.Join(p, file)
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s: %s is not an executable file (%v): %s", env, p, err, how)
	}
	return p
}

// How to get the programs the tests share.
const (
	HowEtcd35  = "export ETCDLET_ETCD35=$(hack/etcd35.sh) (builds etcd 3.5 once into the cache) or run make test"
	HowEtcd36  = "export ETCDLET_ETCD36=$(hack/etcd36.sh) (builds etcd 3.6 once into the cache) or run make test"
	HowEnvtest = "export KUBEBUILDER_ASSETS=$(hack/envtest.sh) (builds kube-apiserver and etcd once into the cache) or run make test"
)
