package envtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// WriteKubeconfig writes a kubeconfig file (mode 0600) at path for a new user
// of env with the given name and groups, and returns path. It is how a
// separate process (an etcdlet agent, etcd-druid) gets an identity: the user
// authenticates with a client certificate signed by the control plane's
// client CA, so RBAC applies to the name and groups given here (group
// system:masters bypasses it).
//
// The file stays valid across StopAPIServer and StartAPIServer, which keep
// the address, the serving certificate and the client CA.
func (e *Env) WriteKubeconfig(t testing.TB, path, user string, groups ...string) string {
	t.Helper()
	if err := e.writeKubeconfig(path, user, groups); err != nil {
		t.Fatalf("envtest: %v", err)
	}
	return path
}

func (e *Env) writeKubeconfig(path, user string, groups []string) error {
	if user == "" {
		return fmt.Errorf("write a kubeconfig at %s: empty user name", path)
	}
	au, err := e.Environment.AddUser(crenvtest.User{Name: user, Groups: groups}, &rest.Config{})
	if err != nil {
		return fmt.Errorf("provision user %q: %w", user, err)
	}
	raw, err := au.KubeConfig()
	if err != nil {
		return fmt.Errorf("render the kubeconfig of user %q: %w", user, err)
	}
	if err := writeFileAtomic(path, raw); err != nil {
		return fmt.Errorf("write the kubeconfig of user %q: %w", user, err)
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so a process polling path never reads half a
// kubeconfig, and a file that already exists with wider permissions ends up
// 0600 all the same (it holds a private key).
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create a temporary file beside %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	// os.CreateTemp creates the file 0600; Chmod only makes that explicit
	// against a future change of its default.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", f.Name(), path, err)
	}
	return nil
}
