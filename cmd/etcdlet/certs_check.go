package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/daemon/certs"
	"github.com/etcdlet/etcdlet/pki"
)

// Exit codes of `etcdlet certs check`, documented in its --help and in
// docs/certificates.md; 1 is a command that could not run.
const (
	exitCertsExpiring = 2 // a certificate expires within --warn, none is broken
	exitCertsBroken   = 3 // a certificate is expired, not yet valid, unverified, unreadable, or not its key's
)

func newCertsCheckCommand() *cobra.Command {
	var (
		path   string
		warn   time.Duration
		output string
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Show when each certificate etcdlet uses expires, and whether it verifies against its CA",
		Long: `Read every certificate file etcdlet's configuration names and say, for each:
its subject CN and SANs, when it expires and how long is left, who issued it,
and whether it verifies against the configured CA. The files:

  etcd.tls.client          etcd-server     the member's certificate for clients
  etcd.tls.peer            etcd-peer       the member's peer certificate
  agent.etcdClientTLS      etcdlet-client  what etcdlet presents to etcd
  agent.listenTLS          agent-listener  the agent listener's
  backup.api.tls           backup-api      the backup-restore API's
  every caFile             ca              the CAs themselves
  <pki>/apiserver-etcd-client.crt          kube-apiserver's, when the etcd CA
                                           is <pki>/etcd/ca.crt (kubeadm's
                                           layout) and the file exists

With etcd.external, 'kubeadm certs renew' renews none of these: they expire
a year after kubeadm or 'etcdlet certs issue' made them ('etcdlet certs
renew' renews them). Each certificate's key is checked to be its own, and
each is verified against the caFile of its section at a time within its
validity, so "unverified" means "not signed by that CA", apart from
"expired". The running agent exports the same expiry as the metric
etcdlet_certificate_expiry_timestamp_seconds{file,usage}.

Exit codes, for scripts (the first that holds wins):
  3  a certificate is expired, not yet valid, does not verify against its
     CA, cannot be read, or its key is not its own
  2  a certificate expires within --warn (default 30 days: time for a
     monthly check to act before the metric's alert at 14 days)
  1  the command could not run (invalid configuration, bad flags)
  0  every certificate is valid for longer than --warn`,
		Example: `  etcdlet certs check
  etcdlet certs check --warn 2160h -o json | jq '.certificates[] | {path, notAfter, status}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: must be text or json", output)
			}
			if warn < 0 {
				return fmt.Errorf("--warn %s: must not be negative", warn)
			}
			cfg, err := loadValidConfig(path)
			if err != nil {
				return err
			}
			return runCertsCheck(cmd.OutOrStdout(), certs.CertTargets(cfg), output, warn, time.Now())
		},
	}
	addConfigFlag(cmd, &path)
	cmd.Flags().DurationVar(&warn, "warn", pki.DefaultWarn, "call a certificate expiring (exit code 2) when it expires within this time")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// certsReport is `certs check -o json`.
type certsReport struct {
	CheckedAt    time.Time     `json:"checkedAt"`
	Warn         string        `json:"warn"`
	Certificates []pki.Finding `json:"certificates"`
}

func runCertsCheck(out io.Writer, targets []pki.Target, output string, warn time.Duration, now time.Time) error {
	if len(targets) == 0 {
		return errors.New("the configuration names no certificate file (no TLS configured)")
	}
	findings := pki.Check(targets, now, warn)
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(certsReport{CheckedAt: now.UTC(), Warn: warn.String(), Certificates: findings}); err != nil {
			return err
		}
	} else {
		printFindings(out, findings)
	}
	return certsExit(findings)
}

func printFindings(out io.Writer, findings []pki.Finding) {
	counts := map[pki.Status]int{}
	for i, f := range findings {
		if i > 0 {
			fmt.Fprintln(out)
		}
		counts[f.Status]++
		fmt.Fprintf(out, "%s\n", f.Path)
		fmt.Fprintf(out, "  status:     %s\n", f.Status)
		fmt.Fprintf(out, "  usage:      %s (%s)\n", f.Usage, strings.Join(f.Fields, ", "))
		if f.Subject != "" {
			fmt.Fprintf(out, "  subject:    %s\n", f.Subject)
			if len(f.SANs) > 0 {
				fmt.Fprintf(out, "  SANs:       %s\n", strings.Join(f.SANs, ", "))
			}
			left := "in " + pki.Human(f.Remaining)
			if f.Remaining < 0 {
				left = "expired " + pki.Human(f.Remaining) + " ago"
			}
			fmt.Fprintf(out, "  not after:  %s (%s)\n", f.NotAfter.Format(time.RFC3339), left)
			fmt.Fprintf(out, "  serial:     %s\n", f.Serial)
			fmt.Fprintf(out, "  issuer:     %s\n", f.Issuer)
			fmt.Fprintf(out, "  verified:   %s\n", verification(f))
		}
		for _, p := range f.Problems {
			fmt.Fprintf(out, "  problem:    %s\n", p)
		}
	}
	var parts []string
	for _, s := range []pki.Status{pki.StatusOK, pki.StatusExpiring, pki.StatusExpired, pki.StatusNotYetValid, pki.StatusUnverified, pki.StatusKeyMismatch, pki.StatusUnreadable} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	fmt.Fprintf(out, "\n%d certificate files: %s\n", len(findings), strings.Join(parts, ", "))
}

func verification(f pki.Finding) string {
	switch f.Verification {
	case pki.VerifyOK:
		return fmt.Sprintf("yes, against %s (signed by %s)", f.CAPath, f.SignedBy)
	case pki.VerifyFailed:
		return fmt.Sprintf("NO, not against %s", f.CAPath)
	}
	return f.Verification
}

// certsExit is the exit code of a check: broken outranks expiring.
func certsExit(findings []pki.Finding) error {
	var broken, expiring []string
	for _, f := range findings {
		switch {
		case f.Status.Broken():
			broken = append(broken, fmt.Sprintf("%s (%s)", f.Path, f.Status))
		case f.Status == pki.StatusExpiring:
			expiring = append(expiring, f.Path)
		}
	}
	switch {
	case len(broken) > 0:
		return &exitError{code: exitCertsBroken, err: fmt.Errorf("certificates not usable now: %s", strings.Join(broken, ", "))}
	case len(expiring) > 0:
		return &exitError{code: exitCertsExpiring, err: fmt.Errorf("certificates expiring soon (renew them: etcdlet certs renew): %s", strings.Join(expiring, ", "))}
	}
	return nil
}
