package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/pki"
)

// certsInitCAOptions are the flags of "certs init-ca".
type certsInitCAOptions struct {
	outDir   string
	name     string
	validity time.Duration
	keyType  string
}

func newCertsInitCACommand() *cobra.Command {
	var o certsInitCAOptions
	cmd := &cobra.Command{
		Use:   "init-ca [flags]",
		Short: "Make the etcd CA in kubeadm's layout, or reuse the one there",
		Long: `Make an etcd CA as kubeadm's 'init phase certs etcd-ca' does: ca.crt and
ca.key in --out-dir (/etc/kubernetes/pki/etcd), CN etcd-ca, basic
constraints CA:TRUE, key usage digitalSignature, keyEncipherment and
keyCertSign, valid for ten years (--validity), ECDSA P-256 (--key-type rsa:
RSA 2048). ca.key is written with mode 0600, ca.crt 0644, the directory
0700 when it is made; both atomically, nothing is ever replaced.

A CA already there (kubeadm's, or an earlier init-ca) is reused: when
ca.crt and ca.key both exist and form a CA that may sign and is valid now,
the command says so and writes nothing. One of the two without the other,
or a pair that is no usable CA, is refused with the reason; nothing is
written.

Run it on one control-plane host, copy ca.crt and ca.key to the same place
on the others (as kubeadm join --control-plane does), then run 'etcdlet
certs issue --address <IP>' on each. Whoever holds ca.key can make a
client certificate etcd accepts: keep it mode 0600, and off hosts that do
not need it (see /usr/share/doc/etcdlet/certificates.md).`,
		Example: `  cp-0# etcdlet certs init-ca
  cp-0# scp /etc/kubernetes/pki/etcd/ca.{crt,key} cp-1:/etc/kubernetes/pki/etcd/
  cp-0# etcdlet certs issue --address 10.0.0.10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCertsInitCA(cmd.OutOrStdout(), o, time.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.outDir, "out-dir", defaultEtcdPKIDir, "directory of ca.crt and ca.key")
	f.StringVar(&o.name, "name", pki.DefaultCAName, "the CA's common name")
	f.DurationVar(&o.validity, "validity", pki.DefaultCAValidity, "how long the CA is valid")
	f.StringVar(&o.keyType, "key-type", string(pki.KeyECDSA), "key algorithm: ecdsa (P-256) or rsa (2048 bits)")
	return cmd
}

func runCertsInitCA(stdout io.Writer, o certsInitCAOptions, now time.Time) error {
	keyType, err := parseKeyType(o.keyType)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(o.outDir)
	if err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certThere, keyThere := exists(certPath), exists(keyPath)
	switch {
	case certThere && keyThere:
		ca, err := pki.LoadCA(certPath, keyPath, now)
		if err != nil {
			return fmt.Errorf("%s and %s are there but are no usable CA, and are left alone: %w", certPath, keyPath, err)
		}
		fmt.Fprintf(stdout, "The etcd CA in %s is reused (kubeadm's, or an earlier init-ca): %s, expires %s (in %s). Nothing written.\n",
			dir, ca.Cert.Subject, ca.Cert.NotAfter.UTC().Format(time.RFC3339), pki.Human(ca.Cert.NotAfter.Sub(now)))
		return nil
	case certThere || keyThere:
		there, missing := certPath, keyPath
		if keyThere {
			there, missing = keyPath, certPath
		}
		return fmt.Errorf("%s exists without %s: no CA is made beside half a pair; put the missing file back, or move %s away", there, missing, there)
	}
	ca, certPEM, keyPEM, err := pki.NewCA(o.name, keyType, o.validity, now)
	if err != nil {
		return err
	}
	if _, err := pki.Write([]pki.File{{Path: keyPath, Data: keyPEM, Mode: 0o600}, {Path: certPath, Data: certPEM, Mode: 0o644}},
		pki.WriteOptions{Now: now}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Made the etcd CA %s, expires %s.\n  %s (mode 0644)\n  %s (mode 0600)\n\n", ca.Cert.Subject,
		ca.Cert.NotAfter.UTC().Format(time.RFC3339), certPath, keyPath)
	fmt.Fprintf(stdout, "Copy both to %s on the other control-plane hosts, then on each: etcdlet certs issue --address <its IP>\n", dir)
	return nil
}

// exists reports whether path names anything (a broken symlink too).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// parseKeyType reads --key-type.
func parseKeyType(s string) (pki.KeyType, error) {
	kt := pki.KeyType(strings.ToLower(s))
	if kt != pki.KeyECDSA && kt != pki.KeyRSA {
		return "", fmt.Errorf("--key-type %q: want ecdsa or rsa", s)
	}
	return kt, nil
}
