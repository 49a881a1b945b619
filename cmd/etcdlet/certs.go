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
		Short: "Issue etcd member certificates from an etcd CA (kubeadm layout)",
		Long: `Certificate helpers for operators without a PKI of their own. See
docs/certificates.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCertsIssueCommand())
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
configuration (docs/kubeadm.md) works unchanged. Run it on every
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

Renewal: run again with --force before the certificates expire. etcd reads
its certificate files again on every new TLS connection, so new
connections use the new certificates without a restart (the CA file is read
only at start). See docs/certificates.md.

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

  # Renew before expiry, keeping the old files as *.bak:
  etcdlet certs issue --address 10.0.0.10 --force`,
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
	keyType := pki.KeyType(strings.ToLower(o.keyType))
	if keyType != pki.KeyECDSA && keyType != pki.KeyRSA {
		return fmt.Errorf("--key-type %q: want ecdsa or rsa", o.keyType)
	}
	if o.validity <= 0 {
		return fmt.Errorf("--validity %s: must be positive", o.validity)
	}
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
	var caCert, caKey, outDir string
	if caCert, err = abs("--ca-cert", o.caCert); err != nil {
		return err
	}
	if caKey, err = abs("--ca-key", o.caKey); err != nil {
		return err
	}
	if outDir, err = abs("--out-dir", o.outDir); err != nil {
		return err
	}
	layout := pki.KubeadmLayout(outDir)
	if o.apiserverDir != "" {
		if layout.PKIDir, err = abs("--apiserver-client-dir", o.apiserverDir); err != nil {
			return err
		}
	}
	profiles := pki.Profiles()
	for _, p := range profiles {
		for _, out := range []string{layout.CertPath(p), layout.KeyPath(p)} {
			if out == caCert || out == caKey {
				return fmt.Errorf("%s would overwrite the CA's own file; use another --out-dir", out)
			}
		}
	}

	ca, err := pki.LoadCA(caCert, caKey, now)
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
			var sans []string
			for _, d := range c.DNSNames {
				sans = append(sans, "DNS:"+d)
			}
			for _, ip := range c.IPAddresses {
				sans = append(sans, "IP:"+ip.String())
			}
			fmt.Fprintf(stdout, "  SANs:      %s\n", strings.Join(sans, ", "))
		}
		fmt.Fprintf(stdout, "  not after: %s\n", c.NotAfter.UTC().Format(time.RFC3339))
	}
	if len(rep.MovedAside) > 0 {
		fmt.Fprintf(stdout, "\nPrevious files kept:\n")
		for _, m := range rep.MovedAside {
			fmt.Fprintf(stdout, "  %s -> %s\n", m.From, m.To)
		}
	}

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

func profileNamed(profiles []pki.Profile, name string) pki.Profile {
	for _, p := range profiles {
		if p.Name == name {
			return p
		}
	}
	panic("no certificate profile " + name)
}
