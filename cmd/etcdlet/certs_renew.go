package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/memberrestart"
	"github.com/etcdlet/etcdlet/pki"
)

// certsRenewOptions are the flags of "certs renew".
type certsRenewOptions struct {
	caCert, caKey string
	outDir        string
	apiserverDir  string
	validity      time.Duration
	dryRun        bool
	noRestart     bool
	restartOnly   bool
	config        string
	timeout       time.Duration
}

func newCertsRenewCommand() *cobra.Command {
	var o certsRenewOptions
	cmd := &cobra.Command{
		Use:   "renew [flags]",
		Short: "Renew this node's etcd certificates from the etcd CA, then restart its member (one node at a time)",
		Long: `Renew this node's certificates in kubeadm's layout from the etcd CA, keeping
the old files, and then have the running agent restart the local member on
them, refused unless the rest of the cluster keeps quorum. With etcd.external,
'kubeadm certs renew' skips these certificates; run this on each
control-plane host in turn instead, before they expire ('etcdlet certs check'
and the metric etcdlet_certificate_expiry_timestamp_seconds say when).

Renewed, each when it exists (--out-dir is /etc/kubernetes/pki/etcd):
  <out-dir>/server.crt, .key               etcd's certificate for clients
  <out-dir>/peer.crt, .key                 etcd's peer certificate
  <out-dir>/healthcheck-client.crt, .key   what etcdlet presents to etcd
  <apiserver-client-dir>/apiserver-etcd-client.crt, .key
                                           what kube-apiserver presents to etcd

As 'kubeadm certs renew' does: the same subject (byte for byte, any O
included), SANs and key usages as the certificate in place, a new key of
the same algorithm and size, and a validity of --validity from now (one
year by default, never beyond the CA). A certificate the CA did not sign
is refused: renewing it would change who trusts it. The CA is checked as
'certs issue' checks it and is never changed.

Written atomically: all new files are written to temporary files, synced,
read back and verified against the CA before any is renamed into place;
each old file is kept as <name>.<timestamp>.bak (never deleted); the files
are then renamed key first, certificate second, pair after pair, each
rename synced before the next, so a crash leaves at most one pair with a
new key and its old certificate, which 'certs check' reports and running
this command again repairs (it reads only the certificates).

Then, unless --no-restart, the agent (agent.listen, with its token: run as
root) runs a member-restart task: it holds the cluster-wide task lock, and
refuses unless this member is a voter, no learner is joining and every
other voter is healthy and a quorum without it (so a cluster of one or two
voters is refused). Between two reconcile passes the agent stops the member
through its runtime and starts it again with the same spec, then waits
until it answers with a leader and its client and peer listeners serve
exactly the certificates in the files (compared in a TLS handshake). The
command waits for that: run it on the next host only once it returned 0.
A static pod needs the restart to see renewed files at all (the kubelet
mounts each file by inode); the embedded runtime already serves them on
new connections and the restart moves the long-lived ones (raft streams,
kube-apiserver's) over. If the restart is refused, the renewed files stay
in place: fix what the refusal names, then run with --restart-only.

See /usr/share/doc/etcdlet/certificates.md, "Renewal".`,
		Example: `  # On each control-plane host in turn, the next once this one returned 0:
  etcdlet certs renew

  # See what would change, writing nothing:
  etcdlet certs renew --dry-run

  # Renew now, restart later (then: etcdlet certs renew --restart-only):
  etcdlet certs renew --no-restart`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCertsRenew(cmd, o, time.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.caCert, "ca-cert", defaultEtcdPKIDir+"/ca.crt", "etcd CA certificate (PEM)")
	f.StringVar(&o.caKey, "ca-key", defaultEtcdPKIDir+"/ca.key", "etcd CA private key (PEM, unencrypted)")
	f.StringVar(&o.outDir, "out-dir", defaultEtcdPKIDir, "directory of the etcd certificates")
	f.StringVar(&o.apiserverDir, "apiserver-client-dir", "", "directory of apiserver-etcd-client.crt and .key (default: the parent of --out-dir)")
	f.DurationVar(&o.validity, "validity", pki.DefaultValidity, "how long the renewed certificates are valid, at most until the CA expires")
	f.BoolVar(&o.dryRun, "dry-run", false, "show what would be renewed, and write nothing")
	f.BoolVar(&o.noRestart, "no-restart", false, "renew the files only; do not restart the local member")
	f.BoolVar(&o.restartOnly, "restart-only", false, "only restart the local member on the files in place (after a refused restart)")
	f.DurationVar(&o.timeout, "restart-timeout", 0, "how long the restart may take, from the request to the member serving the new certificates (default: the task's, 5m)")
	addConfigFlag(cmd, &o.config)
	return cmd
}

func runCertsRenew(cmd *cobra.Command, o certsRenewOptions, now time.Time) error {
	switch {
	case o.restartOnly && (o.noRestart || o.dryRun):
		return errors.New("--restart-only renews nothing: it does not go with --no-restart or --dry-run")
	case o.validity <= 0:
		return fmt.Errorf("--validity %s: must be positive", o.validity)
	}
	// The restart acts on the configuration: one that etcdlet refuses
	// stops the command before it renews anything.
	cfg, err := loadValidConfig(o.config)
	if err != nil && !o.noRestart {
		return err
	}
	out := cmd.OutOrStdout()
	if !o.restartOnly {
		renewed, err := renewFiles(out, cmd.ErrOrStderr(), o, now)
		if err != nil || o.dryRun {
			return err
		}
		warnUnused(cmd.ErrOrStderr(), cfg, renewed)
	}
	if o.noRestart {
		fmt.Fprintln(out, "\nNot restarting the local member (--no-restart); when you do: etcdlet certs renew --restart-only")
		return nil
	}
	fmt.Fprintln(out, "\nRestarting the local member through the agent (waits until it serves the new certificates):")
	if err := runTask(cmd, taskFlags{path: o.config, timeout: o.timeout}, memberrestart.TaskType, nil); err != nil {
		if o.restartOnly {
			return err
		}
		return fmt.Errorf("%w\nthe renewed certificates are in place; once the cause is fixed, restart the member with: etcdlet certs renew --restart-only", err)
	}
	return nil
}

// renewFiles renews the certificates in place (or, with --dry-run, says
// what it would renew) and returns the certificate files it wrote.
func renewFiles(out, stderr io.Writer, o certsRenewOptions, now time.Time) ([]string, error) {
	paths, err := resolvePKIPaths(o.caCert, o.caKey, o.outDir, o.apiserverDir)
	if err != nil {
		return nil, err
	}
	ca, err := pki.LoadCA(paths.caCert, paths.caKey, now)
	if err != nil {
		return nil, err
	}
	set, missing, err := pki.RenewLayout(ca, paths.layout, pki.Profiles(), o.validity, now)
	if err != nil {
		return nil, err
	}
	if set.Clamped {
		fmt.Fprintf(stderr, "warning: --validity %s would outlive the CA; the certificates expire with the CA at %s (in %s). Renew the CA before then.\n",
			o.validity, set.NotAfter.UTC().Format(time.RFC3339), pki.Human(set.NotAfter.Sub(now)))
	}
	verb := "Renewed"
	if o.dryRun {
		verb = "Would renew (dry run, nothing written)"
	}
	fmt.Fprintf(out, "%s, signed by %s (%s, expires %s):\n", verb, ca.Cert.Subject, paths.caCert, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	var written []string
	for _, is := range set.Certs {
		old, c := is.Replaces, is.Cert
		keyType, _ := pki.KeyTypeOf(c.PublicKey)
		certPath := paths.layout.CertPath(is.Profile)
		written = append(written, certPath)
		fmt.Fprintf(out, "\n%s\n", certPath)
		fmt.Fprintf(out, "  key:       %s, a new %s key\n", paths.layout.KeyPath(is.Profile), keyType.Describe())
		fmt.Fprintf(out, "  subject:   %s\n", c.Subject)
		if sans := pki.SANs(c); len(sans) > 0 {
			fmt.Fprintf(out, "  SANs:      %s\n", strings.Join(sans, ", "))
		}
		fmt.Fprintf(out, "  not after: %s -> %s\n", old.NotAfter.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
		fmt.Fprintf(out, "  serial:    %s -> %s\n", pki.SerialString(old), pki.SerialString(c))
	}
	for _, m := range missing {
		fmt.Fprintf(out, "\n%s does not exist: not renewed\n", m)
	}
	if o.dryRun {
		if !o.noRestart {
			fmt.Fprintln(out, "\nThen the agent would restart the local member on them (a member-restart task; --no-restart skips it).")
		}
		return written, nil
	}
	rep, err := pki.Install(ca, set, paths.layout, pki.WriteOptions{Force: true, Now: now})
	if err != nil {
		return nil, err
	}
	printKept(out, rep)
	return written, nil
}

// warnUnused warns when the configuration's member certificates are not
// among the renewed files: the member would restart on files that did not
// change. Without a valid configuration (cfg nil; --no-restart) there is
// nothing to compare with.
func warnUnused(stderr io.Writer, cfg *config.Config, renewed []string) {
	if cfg == nil {
		return
	}
	for _, f := range []struct{ field, file string }{
		{"etcd.tls.client.certFile", cfg.Etcd.TLS.Client.CertFile}, {"etcd.tls.peer.certFile", cfg.Etcd.TLS.Peer.CertFile},
	} {
		if f.file != "" && !slices.Contains(renewed, filepath.Clean(f.file)) {
			fmt.Fprintf(stderr, "warning: %s (%s) is not among the renewed files: the member keeps running on it\n", f.field, f.file)
		}
	}
}
