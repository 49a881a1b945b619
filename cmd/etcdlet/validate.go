package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdflags"
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
configuration itself, the members file, certificates and keys, pacemaker
programs) can only be changed by root, and that private keys are not
readable by others: see docs/config.md, "Secure by default".

Prints one line per problem, "<field>: <value>: <rule>", and exits 1 if
there is any; prints a summary and exits 0 otherwise, followed by an
"INSECURE:" line for each setting that opts out of a security default
(etcd.insecure, etcd.allowInsecureExtraArgs).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			problems, cfg, err := validateFile(path)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, p := range problems {
				fmt.Fprintln(out, p.Error())
			}
			if len(problems) > 0 {
				return &exitError{code: 1, silent: true, err: problems}
			}
			addrs, _ := cfg.DesiredMembers()
			fmt.Fprintf(out, "%s: valid; cluster %s, %d listed members, runtime %s\n", path, cfg.Cluster.Name, len(addrs), cfg.Etcd.Runtime)
			for _, w := range cfg.SecurityWarnings() {
				fmt.Fprintf(out, "INSECURE: %s\n", w)
			}
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	return cmd
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
	return problems, cfg, nil
}

// validateConfig checks the configuration itself, without the members
// file: a daemon must start with a valid configuration even while the
// externally managed list is momentarily invalid or missing.
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
	return append(problems, etcdflags.Validate(cfg.Etcd.ExtraArgs, cfg.Etcd.Runtime == config.RuntimeEmbedded)...), cfg, nil
}

// loadValidConfig loads a configuration that commands act on: any problem
// is an error listing every problem, one per line.
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
