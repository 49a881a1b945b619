package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdflags"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/memberlist"
	"github.com/etcdlet/etcdlet/daemon/nodeaddr"
)

func newValidateCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a configuration file and the member list it names",
		Long: `Check a configuration file: strict YAML (unknown fields and wrong types are
errors), every field's rule, that the certificate files it names can be
read, the member list (static or the members file:
valid IPs in canonical form, no duplicates, exactly cluster.replicas entries
when set) and the etcd flags in etcd.extraArgs.

It also checks that the files the configuration names on this host (the
configuration itself, the members file, certificates and keys, the
kubeconfig and the files and exec plugin it names, S3 credentials, pacemaker
programs) and the directories etcdlet keeps what it acts on in
(agent.stateDir, the one above etcd.dataDir, backup.store.directory,
backup.store.s3.credentialsDir; where one does not exist yet, the directory
it will be created in) can only be changed by root, that keys and
credentials are readable by root only (not by others, nor by a group other
than root's), and that a kubeconfig has no auth-provider plugin and an exec
plugin only at an absolute path: see /usr/share/doc/etcdlet/config.md, "Secure by default".
Every other command that reads the configuration runs the same checks and
refuses to act, or to run any program, when one fails.

A file with a second YAML document, an explicit tag (!!binary), a merge
key (<<) or aliases that add more than 64 KiB is refused before its fields
are checked.

Prints one line per problem, "<field>: <value>: <rule>", and exits 1 if
there is any: at most 20 problems, then "… and N more problems", values cut
at 200 characters. Prints a summary and exits 0 otherwise, followed by an
"INSECURE:" line for each setting that opts out of a security default
(etcd.insecure, etcd.allowInsecureExtraArgs), and a "WARNING:" line when
node.address is not set and no single listed address is on this host (a
host prepared before it is listed: set node.address).

A host runs one etcdlet per cluster: etcdlet.service reads
/etc/etcdlet/config.yaml, etcdlet@<name>.service /etc/etcdlet/<name>.yaml
(--instance <name> selects it). A file that is valid on its own is then
compared with every other valid *.yaml beside it, and refused when the two
share a port on an overlapping address, a directory (etcd.dataDir,
agent.stateDir, the snapshots' directory and prefix), an S3 bucket and
prefix, a member (the same cluster.name on this host) or a static-pod
manifest (staticPod.podName).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			problems, cfg, err := validateFile(path)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(problems) > 0 {
				fmt.Fprintln(out, problems.Error()) // bounded: see config.Errors.Reported
				return &exitError{code: 1, silent: true, err: problems}
			}
			addrs, _ := cfg.DesiredMembers()
			fmt.Fprintf(out, "%s: valid; cluster %s, %s, runtime %s\n", path, cfg.Cluster.Name, listedSays(cfg, len(addrs)), cfg.Etcd.Runtime)
			for _, w := range cfg.SecurityWarnings() {
				fmt.Fprintf(out, "INSECURE: %s\n", w)
			}
			if cfg.Node.Address == "" {
				if _, err := nodeaddr.Detect(addrs); err != nil {
					fmt.Fprintf(out, "WARNING: %v: until the list names one of this host's addresses, the agent cannot tell which member is this node and does nothing\n", err)
				}
			}
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
}

// listedSays counts the listed members, and for a list the agent keeps a
// copy of, says where the copy is from.
func listedSays(cfg *config.Config, n int) string {
	from := map[string]string{config.SourceCluster: "the cluster's", config.SourceEtcdResource: "the Etcd resource's"}[cfg.Members.Source]
	switch {
	case from == "":
		return fmt.Sprintf("%d listed members", n)
	case memberlist.NoCopyYet(cfg.ListRules()):
		return "no copy of " + from + " member list yet"
	}
	return fmt.Sprintf("%d listed members in this node's copy of %s list", n, from)
}

// validateFile returns every problem of a configuration file and of the
// member list it names; err is only for a file that cannot be read.
func validateFile(path string) (config.Errors, *config.Config, error) {
	problems, cfg, err := validateConfig(path)
	if err != nil || cfg == nil {
		return problems, cfg, err
	}
	if cfg.Members.Source == config.SourceFile {
		_, listErrs := cfg.DesiredMembers()
		problems = append(problems, listErrs...)
	}
	if len(problems) == 0 {
		conflicts, err := instanceConflicts(path, cfg, false)
		if err != nil {
			return nil, cfg, err
		}
		problems = append(problems, conflicts...)
	}
	return problems, cfg, nil
}

// validateConfig checks the configuration itself, without the members
// file: a daemon must start with a valid configuration even while the
// externally managed list is momentarily invalid or missing. It is the
// only caller of config.Load (TestOneLoadingPath): every command goes
// through it, so none skips a check of the files it acts on.
func validateConfig(path string) (config.Errors, *config.Config, error) {
	cfg, err := config.Load(path)
	var problems config.Errors
	if err != nil && !errors.As(err, &problems) {
		return nil, nil, err
	}
	if cfg == nil {
		return problems, nil, nil
	}
	var fileProblems config.Errors
	if errors.As(cfg.CheckFiles(), &fileProblems) {
		problems = append(problems, fileProblems...)
	}
	problems = append(problems, checkKubeconfig(cfg, fileProblems)...)
	return append(problems, etcdflags.Validate(cfg.Etcd.ExtraArgs, cfg.Etcd.Runtime == config.RuntimeEmbedded)...), cfg, nil
}

// checkKubeconfig returns what the agent would refuse in the kubeconfig's
// content (kube.CheckKubeconfig: credential plugins, the files it names),
// unless CheckFiles already refused the file itself (fileProblems).
func checkKubeconfig(cfg *config.Config, fileProblems config.Errors) config.Errors {
	k := cfg.Kubernetes.Kubeconfig
	if k == "" || !filepath.IsAbs(k) || slices.ContainsFunc(fileProblems, func(p config.FieldError) bool { return p.Path == "kubernetes.kubeconfig" }) {
		return nil
	}
	return kube.CheckKubeconfig(k)
}

// loadValidConfig loads a configuration that commands act on: any problem
// is an error listing every problem, one per line. Every command that acts
// or runs a program loads its configuration here.
func loadValidConfig(path string) (*config.Config, error) {
	problems, cfg, err := validateConfig(path)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("invalid configuration %s:\n%s", path, problems.Error())
	}
	return cfg, nil
}
