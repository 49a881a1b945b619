package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/pki"
)

func newCertsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Issue, check and renew etcd member certificates from an etcd CA (kubeadm layout)",
		Long: `Certificate helpers for the files etcdlet, etcd and kube-apiserver use:

  init-ca make the etcd CA in kubeadm's layout (or reuse the one there)
  issue   create a member's certificates from an etcd CA (no PKI of your own)
  check   when each certificate etcdlet's configuration names expires, and
          whether it verifies against its CA (also the agent's metric
          etcdlet_certificate_expiry_timestamp_seconds)
  renew   renew a member's certificates in kubeadm's layout from the etcd
          CA, then restart the member, one node at a time

With etcd.external, 'kubeadm certs renew' renews none of the etcd
certificates: they expire a year after they were made. See
/usr/share/doc/etcdlet/certificates.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCertsInitCACommand(), newCertsIssueCommand(), newCertsCheckCommand(), newCertsRenewCommand())
	return cmd
}

// certsIssueOptions are the flags of "certs issue".
type certsIssueOptions struct {
	caCert, caKey string
	addresses     []string
	name          string
	outDir        string
	apiserverDir  string
	validity      time.Duration
	keyType       string
	force         bool
}

const defaultEtcdPKIDir = "/etc/kubernetes/pki/etcd"

func newCertsIssueCommand() *cobra.Command {
	var o certsIssueOptions
	cmd := &cobra.Command{
		Use:   "issue --address IP [--address IP...] [flags]",
		Short: "Create this member's etcd certificates, signed by the etcd CA given",
		Long: `Create this node's etcd certificates and keys from an etcd CA you provide,
with kubeadm's file names, subjects and key usages, so that etcdlet's kubeadm
configuration (/usr/share/doc/etcdlet/kubeadm.md) works unchanged. Run it on every
control-plane host with that host's own --address; the CA is the same on all.

Written (--out-dir is /etc/kubernetes/pki/etcd by default):

  <out-dir>/server.crt, .key              etcd's client-facing certificate
      server and client auth; CN <name>; SANs: the --address IPs, 127.0.0.1,
      ::1, localhost, <name>
  <out-dir>/peer.crt, .key                etcd's peer certificate (and the
      agent peer endpoint's): as server.crt
  <out-dir>/healthcheck-client.crt, .key  what etcdlet presents to etcd:
      client auth; CN kube-etcd-healthcheck-client
  <apiserver-client-dir>/apiserver-etcd-client.crt, .key
      what kube-apiserver presents to etcd: client auth; CN
      kube-apiserver-etcd-client; --apiserver-client-dir defaults to the
      parent of --out-dir (/etc/kubernetes/pki), as in kubeadm's layout

No certificate has an organization (kubeadm has not set O=system:masters on
its etcd client certificates since 1.29). Keys are ECDSA P-256 (--key-type
rsa: RSA 2048). Keys are written with mode 0600, certificates 0644, and
missing directories are created with mode 0700.

Checks, before anything is written:
  - the CA certificate (the first in --ca-cert) is a CA (basic constraints
    CA:TRUE) whose key usage allows signing certificates (keyCertSign), and
    is valid now; an expired CA is refused;
  - --ca-key is the private key of that certificate (PEM: PKCS #1, SEC 1 or
    PKCS #8; not encrypted);
  - every --address is an IP address (IPv4 or IPv6; host names are refused);
  - each new certificate verifies against the CA for its usages (and the
    server and peer certificates for every SAN), and verifies again as read
    back from the temporary files, before any file is renamed into place.

Validity: --validity from now (default 8760h, one year, as kubeadm), but
never beyond the CA's own expiry: a longer validity is cut to the CA's
NotAfter, with a warning. Certificates start 5 minutes in the past
(not before the CA), for hosts whose clocks lag a little.

Existing files: if any file to be written exists, nothing is written and
the command fails naming every such file; existing keys are never replaced
silently. With --force, each existing file is kept as
<name>.<timestamp>.bak (UTC, e.g. server.key.20260102T150405Z.bak) and
never deleted, and the new file takes its name atomically. Every file is
written to a temporary file in its directory, fsynced, and renamed.

Renewal: 'etcdlet certs renew' renews them with the same names and
usages and restarts the member; 'certs issue --force' makes them anew (to
change the names or addresses). See /usr/share/doc/etcdlet/certificates.md.

Then it prints each file written (path, subject, SANs, expiry) and the TLS
part of etcdlet's configuration for these paths.`,
		Example: `  # Three control-plane hosts, one etcd CA. Make the CA once (or use
  # kubeadm's: kubeadm init phase certs etcd-ca), then copy ca.crt and ca.key
  # to /etc/kubernetes/pki/etcd/ on every host. On each host, its own IP:
  cp-0# etcdlet certs issue --address 10.0.0.10
  cp-1# etcdlet certs issue --address 10.0.0.11
  cp-2# etcdlet certs issue --address 10.0.0.12

  # A dual-stack member with a second address, and an explicit node name:
  etcdlet certs issue --address 10.0.0.10,fd00:10::10 --name cp-0

  # Issue anew with another address, keeping the old files as *.bak:
  etcdlet certs issue --address 10.0.0.10,10.0.1.10 --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCertsIssue(cmd.OutOrStdout(), cmd.ErrOrStderr(), o, time.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.caCert, "ca-cert", defaultEtcdPKIDir+"/ca.crt", "etcd CA certificate (PEM)")
	f.StringVar(&o.caKey, "ca-key", defaultEtcdPKIDir+"/ca.key", "etcd CA private key (PEM, unencrypted)")
	f.StringSliceVar(&o.addresses, "address", nil, "this member's IP, and any other IP it is reached on (repeatable or comma-separated; IPv4 or IPv6; required)")
	f.StringVar(&o.name, "name", "", "node name: CN and DNS SAN of the server and peer certificates (default: this host's name, lower case)")
	f.StringVar(&o.outDir, "out-dir", defaultEtcdPKIDir, "directory of the etcd certificates")
	f.StringVar(&o.apiserverDir, "apiserver-client-dir", "", "directory of apiserver-etcd-client.crt and .key (default: the parent of --out-dir)")
	f.DurationVar(&o.validity, "validity", pki.DefaultValidity, "how long the certificates are valid, at most until the CA expires")
	f.StringVar(&o.keyType, "key-type", string(pki.KeyECDSA), "key algorithm: ecdsa (P-256) or rsa (2048 bits)")
	f.BoolVar(&o.force, "force", false, "replace existing files, keeping each as <name>.<timestamp>.bak")
	return cmd
}

func runCertsIssue(stdout, stderr io.Writer, o certsIssueOptions, now time.Time) error {
	if len(o.addresses) == 0 {
		return errors.New("--address is required: this member's IP (run the command on each host with its own)")
	}
	addresses, err := pki.ParseAddresses(o.addresses)
	if err != nil {
		return fmt.Errorf("--address: %w", err)
	}
	rawName := o.name
	if rawName == "" {
		if rawName, err = os.Hostname(); err != nil {
			return fmt.Errorf("no --name and the host name is unknown: %w", err)
		}
	}
	name, err := pki.NodeName(rawName)
	if err != nil {
		if o.name == "" {
			return fmt.Errorf("this host's name does not fit a certificate, give --name: %w", err)
		}
		return fmt.Errorf("--name: %w", err)
	}
	keyType, err := parseKeyType(o.keyType)
	if err != nil {
		return err
	}
	if o.validity <= 0 {
		return fmt.Errorf("--validity %s: must be positive", o.validity)
	}
	paths, err := resolvePKIPaths(o.caCert, o.caKey, o.outDir, o.apiserverDir)
	if err != nil {
		return err
	}
	caCert, layout, profiles := paths.caCert, paths.layout, pki.Profiles()

	ca, err := pki.LoadCA(paths.caCert, paths.caKey, now)
	if err != nil {
		return err
	}
	set, err := pki.Issue(ca, pki.Request{NodeName: name, Addresses: addresses, Validity: o.validity, KeyType: keyType, Now: now}, profiles)
	if err != nil {
		return err
	}
	if set.Clamped {
		fmt.Fprintf(stderr, "warning: --validity %s would outlive the CA; the certificates expire with the CA at %s (in %s). Renew the CA before then.\n",
			o.validity, set.NotAfter.UTC().Format(time.RFC3339), set.NotAfter.Sub(now).Round(time.Minute))
	}
	rep, err := pki.Install(ca, set, layout, pki.WriteOptions{Force: o.force, Now: now})
	if err != nil {
		var exists *pki.ExistsError
		if errors.As(err, &exists) {
			return fmt.Errorf("%w\nre-run with --force to replace them; each is then kept as <name>.<timestamp>.bak", err)
		}
		return err
	}

	fmt.Fprintf(stdout, "Signed by %s (%s, expires %s).\n\n", ca.Cert.Subject, caCert, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	for _, is := range set.Certs {
		c := is.Cert
		fmt.Fprintf(stdout, "%s\n", layout.CertPath(is.Profile))
		fmt.Fprintf(stdout, "  key:       %s (mode 0600)\n", layout.KeyPath(is.Profile))
		fmt.Fprintf(stdout, "  subject:   %s\n", c.Subject)
		var usages []string
		for _, u := range c.ExtKeyUsage {
			usages = append(usages, pki.UsageName(u))
		}
		fmt.Fprintf(stdout, "  usages:    %s\n", strings.Join(usages, ", "))
		if is.Profile.HostSANs {
			fmt.Fprintf(stdout, "  SANs:      %s\n", strings.Join(pki.SANs(c), ", "))
		}
		fmt.Fprintf(stdout, "  not after: %s\n", c.NotAfter.UTC().Format(time.RFC3339))
	}
	printKept(stdout, rep)

	files := func(p string) string {
		prof := profileNamed(profiles, p)
		return fmt.Sprintf("{certFile: %s, keyFile: %s, caFile: %s}", layout.CertPath(prof), layout.KeyPath(prof), caCert)
	}
	apiserver := profileNamed(profiles, "apiserver-etcd-client")
	fmt.Fprintf(stdout, `
etcdlet configuration (/etc/etcdlet/config.yaml), TLS part:

etcd:
  tls:
    client: %s
    peer:   %s
agent:
  etcdClientTLS: %s

kube-apiserver (kubeadm: etcd.external.caFile, certFile, keyFile):
  --etcd-cafile=%s --etcd-certfile=%s --etcd-keyfile=%s
`, files("server"), files("peer"), files("healthcheck-client"), caCert, layout.CertPath(apiserver), layout.KeyPath(apiserver))
	return nil
}

// printKept lists the previous files Install kept aside.
func printKept(out io.Writer, rep *pki.Report) {
	if len(rep.MovedAside) > 0 {
		fmt.Fprintf(out, "\nPrevious files kept:\n")
		for _, m := range rep.MovedAside {
			fmt.Fprintf(out, "  %s -> %s\n", m.From, m.To)
		}
	}
}

// pkiPaths are the CA's files and the layout the certs commands work on,
// as absolute paths.
type pkiPaths struct {
	caCert, caKey string
	layout        pki.Layout
}

// resolvePKIPaths makes the flags' paths absolute and refuses a layout in
// which a certificate or key would overwrite the CA's own files.
func resolvePKIPaths(caCert, caKey, outDir, apiserverDir string) (pkiPaths, error) {
	abs := func(flag, p string) (string, error) {
		if p == "" {
			return "", fmt.Errorf("%s is empty", flag)
		}
		a, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", flag, err)
		}
		return a, nil
	}
	var (
		paths pkiPaths
		dir   string
		err   error
	)
	if paths.caCert, err = abs("--ca-cert", caCert); err != nil {
		return paths, err
	}
	if paths.caKey, err = abs("--ca-key", caKey); err != nil {
		return paths, err
	}
	if dir, err = abs("--out-dir", outDir); err != nil {
		return paths, err
	}
	paths.layout = pki.KubeadmLayout(dir)
	if apiserverDir != "" {
		if paths.layout.PKIDir, err = abs("--apiserver-client-dir", apiserverDir); err != nil {
			return paths, err
		}
	}
	for _, p := range pki.Profiles() {
		for _, out := range []string{paths.layout.CertPath(p), paths.layout.KeyPath(p)} {
			if out == paths.caCert || out == paths.caKey {
				return paths, fmt.Errorf("%s would overwrite the CA's own file; use another --out-dir", out)
			}
		}
	}
	return paths, nil
}

func profileNamed(profiles []pki.Profile, name string) pki.Profile {
	for _, p := range profiles {
		if p.Name == name {
			return p
		}
	}
	panic("no certificate profile " + name)
}
