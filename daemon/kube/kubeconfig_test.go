package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/config/trust/trusttest"
)

// kubeconfigWith is a kubeconfig whose user "etcdlet" is user (YAML
// lines of the user mapping, indented by four spaces).
func kubeconfigWith(user string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: etcdlet
  user:
` + user + `contexts:
- name: c
  context: {cluster: c, user: etcdlet}
current-context: c
`
}

// A kubeconfig is used only when what it runs and names is as safe as the
// configuration itself: client-go runs an exec plugin as root.
func TestKubeconfigPluginsAndFiles(t *testing.T) {
	trusttest.RequireRoot(t)
	tests := []struct {
		name string
		// user makes the files under root and returns the user's YAML.
		user func(t *testing.T, root string) string
		// want are the problems, one per entry, ROOT for root; nil: loads.
		want []string
	}{
		{"exec plugin of root's", func(t *testing.T, root string) string {
			return "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: " + trusttest.File(t, filepath.Join(root, "bin/plugin"), 0o755) + "}\n"
		}, nil},
		{"exec plugin of another user's", func(t *testing.T, root string) string {
			p := trusttest.File(t, filepath.Join(root, "bin/plugin"), 0o755)
			trusttest.Chown(t, p, trusttest.Nobody, trusttest.Nobody)
			return "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: " + p + "}\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].exec.command: "ROOT/bin/plugin": must be a file only root can change: ROOT/bin/plugin: ROOT/bin/plugin is owned by uid 65534, must be owned by root`}},
		{"exec plugin in a group-writable directory", func(t *testing.T, root string) string {
			p := trusttest.File(t, filepath.Join(root, "bin/plugin"), 0o755)
			trusttest.Chmod(t, filepath.Dir(p), 0o775)
			return "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: " + p + "}\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].exec.command: "ROOT/bin/plugin": must be a file only root can change: ROOT/bin/plugin: ROOT/bin is writable by group (mode 0775)`}},
		{"exec plugin looked up in PATH", func(t *testing.T, root string) string {
			return "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: kubectl-oidc_login}\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].exec.command: "kubectl-oidc_login": must be an absolute path: client-go runs the plugin as root, and would look a name up in the agent's PATH`}},
		{"exec plugin relative to the kubeconfig", func(t *testing.T, root string) string {
			trusttest.File(t, filepath.Join(root, "bin/plugin"), 0o755)
			return "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: ./bin/plugin}\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].exec.command: "./bin/plugin": must be an absolute path`}},
		{"missing exec plugin", func(t *testing.T, root string) string {
			return "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: " + filepath.Join(root, "bin/none") + "}\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].exec.command: "ROOT/bin/none": cannot be read`}},
		{"auth-provider plugin", func(t *testing.T, root string) string {
			return "    auth-provider: {name: oidc, config: {idp-issuer-url: https://example.com}}\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].auth-provider: "oidc": is not supported: etcdlet has no auth-provider plugin built in`}},
		{"key and certificate files of root's, relative to the kubeconfig", func(t *testing.T, root string) string {
			trusttest.File(t, filepath.Join(root, "pki/client.pem"), 0o600)
			return "    client-certificate: pki/client.pem\n    client-key: pki/client.pem\n"
		}, nil},
		{"key readable by another group", func(t *testing.T, root string) string {
			p := trusttest.File(t, filepath.Join(root, "pki/client.key"), 0o640)
			trusttest.Chown(t, p, 0, trusttest.Nobody)
			trusttest.File(t, filepath.Join(root, "pki/client.crt"), 0o644)
			return "    client-certificate: " + filepath.Join(root, "pki/client.crt") + "\n    client-key: " + p + "\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].client-key: "ROOT/pki/client.key": is readable by group 65534 (mode 0640)`}},
		{"token file of another user's", func(t *testing.T, root string) string {
			p := trusttest.File(t, filepath.Join(root, "token"), 0o600)
			trusttest.Chown(t, p, trusttest.Nobody, 0)
			return "    tokenFile: " + p + "\n"
		}, []string{`kubernetes.kubeconfig users[etcdlet].tokenFile: "ROOT/token": must be a file only root can change`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, "kubeconfig")
			if err := os.WriteFile(path, []byte(kubeconfigWith(tt.user(t, root))), 0o600); err != nil {
				t.Fatal(err)
			}
			got := CheckKubeconfig(path)
			_, loadErr := LoadKubeconfig(path)
			_, clientsErr := NewClients(config.Kubernetes{Kubeconfig: path, QPS: 5, Burst: 10})
			if len(tt.want) == 0 {
				if got != nil || loadErr != nil || clientsErr != nil {
					t.Fatalf("CheckKubeconfig = %v, LoadKubeconfig: %v, NewClients: %v; want it accepted", got, loadErr, clientsErr)
				}
				return
			}
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(tt.want); i++ {
				ok = strings.HasPrefix(got[i].Error(), strings.ReplaceAll(tt.want[i], "ROOT", root))
			}
			if !ok {
				t.Fatalf("CheckKubeconfig:\n  %v\nwant problems starting:\n  %s", got, strings.ReplaceAll(strings.Join(tt.want, "\n  "), "ROOT", root))
			}
			if loadErr == nil || clientsErr == nil || !strings.Contains(clientsErr.Error(), got[0].Error()) {
				t.Fatalf("LoadKubeconfig: %v, NewClients: %v; want both refused with %s", loadErr, clientsErr, got[0])
			}
		})
	}
}

func TestKubeconfigThatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	if got := CheckKubeconfig(dir); len(got) != 1 || got[0].Error() != `kubernetes.kubeconfig: "`+dir+`": is a directory, want a regular file` {
		t.Fatalf("CheckKubeconfig(a directory) = %v", got)
	}
}
