package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"

	"github.com/etcdlet/etcdlet/config"
)

// ctlv3's init turns on cobra's prefix matching for every command tree in
// the process; etcdlet's own commands keep their exact names, and so does
// etcdctl run through etcdlet: the refusal below matches full names only.
func init() { cobra.EnablePrefixMatching = false }

func newEtcdctlCommand() *cobra.Command {
	var (
		path  string
		allow bool
	)
	cmd := &cobra.Command{
		Use:   "etcdctl [--config FILE] -- ARGS...",
		Short: "Run etcdctl with the agent's endpoints and client TLS",
		Long: `Run etcdctl v3 (built into etcdlet, the etcd version etcdlet is built with;
no etcdctl binary is needed) with the flags taken from the agent's
configuration:
  --endpoints  the client URLs of the member list in force and of
               node.address
  --cacert, --cert, --key
               agent.etcdClientTLS, else etcd.tls.client (when TLS is on)
A flag given in ARGS wins over the one etcdlet would add. Put ARGS after
"--" so that their flags reach etcdctl:

  etcdlet etcdctl -- endpoint status -w table
  etcdlet etcdctl -- get --prefix /registry/namespaces --keys-only
  etcdlet etcdctl -- put /probe ok

Command names must be given in full (etcdctl's own prefix matching is off).
Refused unless --allow-membership-changes: "member add", "member remove",
"member update", "member promote" and "move-leader". They bypass the
agents' writer lock and quorum checks, and the agents undo what disagrees
with the member list. Use etcdlet member remove, evict-learner and
move-leader, or edit the list. The exit code is etcdctl's.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEtcdctl(args, allow); err != nil {
				return err
			}
			cfg, in, err := openCluster(path)
			if err != nil {
				return err
			}
			endpoints := in.ClientEndpoints()
			in.Close()
			// ctlv3 reads its arguments from os.Args, as the etcdctl binary does.
			os.Args = append([]string{"etcdctl"}, etcdctlArgs(endpoints, cfg.ClientTLS(), args)...)
			if err := ctlv3.Start(); err != nil {
				return &exitError{code: 1, silent: true, err: err} // cobra printed it
			}
			return nil
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().BoolVar(&allow, "allow-membership-changes", false, "let etcdctl change membership or move leadership, bypassing the agents' writer lock and quorum checks")
	return cmd
}

// etcdctlArgs puts the agent's endpoints and client TLS in front of the
// user's arguments, except for the flags the user gave.
func etcdctlArgs(endpoints []string, tls config.TLSFiles, args []string) []string {
	type flag struct{ name, value string }
	injected := []flag{{"endpoints", strings.Join(endpoints, ",")}}
	if tls.Enabled() {
		injected = append(injected, flag{"cacert", tls.CAFile}, flag{"cert", tls.CertFile}, flag{"key", tls.KeyFile})
	}
	var out []string
	for _, f := range injected {
		if f.value != "" && !givenFlag(args, f.name) {
			out = append(out, "--"+f.name+"="+f.value)
		}
	}
	return append(out, args...)
}

// givenFlag tells whether args set the flag (--name VALUE or --name=VALUE)
// before a "--" that ends etcdctl's flags.
func givenFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

// etcdctlValueFlags are etcdctl's global flags that take a value (the
// next argument when not given as --flag=value).
var etcdctlValueFlags = []string{"--endpoints", "--write-out", "-w", "--dial-timeout", "--command-timeout", "--keepalive-time",
	"--keepalive-timeout", "--max-request-bytes", "--max-recv-bytes", "--cert", "--key", "--cacert", "--auth-jwt-token",
	"--user", "--password", "--discovery-srv", "-d", "--discovery-srv-name"}

// checkEtcdctl refuses the etcdctl commands that change membership or
// leadership, unless allowed.
func checkEtcdctl(args []string, allow bool) error {
	if allow {
		return nil
	}
	words := commandWords(args)
	switch {
	case len(words) >= 1 && words[0] == "move-leader":
	case len(words) >= 2 && words[0] == "member" && slices.Contains([]string{"add", "remove", "update", "promote"}, words[1]):
	default:
		return nil
	}
	return fmt.Errorf("refused: etcdctl %s bypasses the agents' writer lock and quorum checks, and the agents undo what disagrees with the member list; use etcdlet member remove|evict-learner|move-leader or edit the list, or pass --allow-membership-changes",
		strings.Join(words, " "))
}

// commandWords are the first two arguments that are neither flags nor
// flag values: etcdctl's command and subcommand.
func commandWords(args []string) []string {
	var words []string
	for i := 0; i < len(args) && len(words) < 2; i++ {
		a := args[i]
		switch {
		case a == "--":
			return words
		case strings.HasPrefix(a, "-"):
			if !strings.Contains(a, "=") && slices.Contains(etcdctlValueFlags, a) {
				i++ // its value
			}
		default:
			words = append(words, a)
		}
	}
	return words
}
