package kube

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcdlet/etcdlet/config"
)

// kubeconfigField is the configuration field the problems are reported under.
const kubeconfigField = "kubernetes.kubeconfig"

// maxKubeconfigBytes bounds what is read of a kubeconfig: kubeadm's, with
// its certificates embedded, is a few KiB.
const maxKubeconfigBytes = 1 << 20

// CheckKubeconfig returns what LoadKubeconfig refuses in the kubeconfig at
// path, one problem per entry (for etcdlet validate and every command that
// acts, through the same loading path as the agent).
func CheckKubeconfig(path string) config.Errors {
	_, problems := loadKubeconfig(path)
	return problems
}

// LoadKubeconfig reads the kubeconfig at path as client-go does (paths in
// it relative to its directory) and refuses what would let someone other
// than root act through the agent, which runs as root:
//
//   - an exec credential plugin whose command is not an absolute path or
//     is not a program only root can change: client-go runs it, as root, for
//     every token, and looks a bare name up in the agent's PATH;
//   - an auth-provider plugin: etcdlet has none built in (client-go's gcp
//     and azure are gone, and oidc writes refreshed tokens back into the
//     file), so one could only fail later, at the first call;
//   - a file it names (certificate-authority, client-certificate,
//     client-key, tokenFile) that someone other than root could change, or,
//     for the key and the token, read.
//
// Every user and cluster of the file is checked, not only the current
// context's: what the file names is what root trusts by naming the file.
func LoadKubeconfig(path string) (*clientcmdapi.Config, error) {
	kc, problems := loadKubeconfig(path)
	if len(problems) > 0 {
		return nil, problems
	}
	return kc, nil
}

func loadKubeconfig(path string) (*clientcmdapi.Config, config.Errors) {
	// Not clientcmd.LoadFromFile: it would block on a named pipe and read
	// a file of any size.
	data, err := config.ReadRegularFile(path, maxKubeconfigBytes)
	if err != nil {
		return nil, config.Errors{{Path: kubeconfigField, Value: path, Rule: err.Error()}}
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, config.Errors{{Path: kubeconfigField, Value: path, Rule: "not a valid kubeconfig: " + err.Error()}}
	}
	problems := checkPlugins(kc)
	resolveLocalPaths(kc, filepath.Dir(path))
	problems = append(problems, checkNamedFiles(kc)...)
	return kc, problems
}

// checkPlugins refuses the credential plugins of every user (see
// LoadKubeconfig). It looks at the command as the file writes it, before a
// relative path is resolved.
func checkPlugins(kc *clientcmdapi.Config) config.Errors {
	var problems config.Errors
	for _, name := range slices.Sorted(maps.Keys(kc.AuthInfos)) {
		u := kc.AuthInfos[name]
		where := fmt.Sprintf("%s users[%s]", kubeconfigField, name)
		if u.AuthProvider != nil {
			problems = append(problems, config.FieldError{Path: where + ".auth-provider", Value: u.AuthProvider.Name,
				Rule: "is not supported: etcdlet has no auth-provider plugin built in; use a client certificate, a token, or an exec plugin at an absolute path only root can change"})
		}
		if u.Exec == nil {
			continue
		}
		field := where + ".exec.command"
		if !filepath.IsAbs(u.Exec.Command) {
			problems = append(problems, config.FieldError{Path: field, Value: u.Exec.Command,
				Rule: "must be an absolute path: client-go runs the plugin as root, and would look a name up in the agent's PATH or resolve it against the kubeconfig's directory"})
			continue
		}
		problems = append(problems, config.CheckTrustedFile(field, u.Exec.Command, false)...)
	}
	return problems
}

// checkNamedFiles applies the rules of the files in the configuration to
// the files the kubeconfig names (paths resolved).
func checkNamedFiles(kc *clientcmdapi.Config) config.Errors {
	var problems config.Errors
	check := func(field, path string, secret bool) {
		if path != "" {
			problems = append(problems, config.CheckTrustedFile(field, path, secret)...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kc.Clusters)) {
		check(fmt.Sprintf("%s clusters[%s].certificate-authority", kubeconfigField, name), kc.Clusters[name].CertificateAuthority, false)
	}
	for _, name := range slices.Sorted(maps.Keys(kc.AuthInfos)) {
		u, where := kc.AuthInfos[name], fmt.Sprintf("%s users[%s]", kubeconfigField, name)
		check(where+".client-certificate", u.ClientCertificate, false)
		check(where+".client-key", u.ClientKey, true)
		check(where+".tokenFile", u.TokenFile, true)
	}
	return problems
}

// resolveLocalPaths makes the file paths of kc absolute against dir, the
// kubeconfig's directory, as client-go's loader does
// (clientcmd.ResolveLocalPaths, which needs the file's name recorded in
// every entry).
func resolveLocalPaths(kc *clientcmdapi.Config, dir string) {
	for _, c := range kc.Clusters {
		_ = clientcmd.ResolvePaths(clientcmd.GetClusterFileReferences(c), dir)
	}
	for _, u := range kc.AuthInfos {
		_ = clientcmd.ResolvePaths(clientcmd.GetAuthInfoFileReferences(u), dir)
	}
}

// restConfig is the client configuration of kc's current context.
func restConfig(kc *clientcmdapi.Config) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveClientConfig(*kc, kc.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
}
