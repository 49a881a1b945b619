package config

import (
	"path/filepath"
	"time"
)

// Defaults of the certificates section.
const (
	DefaultRenewBefore    = 30 * 24 * time.Hour
	DefaultRenewValidity  = 365 * 24 * time.Hour
	minRenewBefore        = time.Hour
	maxRenewBefore        = 2 * 365 * 24 * time.Hour
	renewValidityHeadroom = 24 * time.Hour
	kubeadmServerCert     = "server.crt"
	kubeadmPeerCert       = "peer.crt"
	kubeadmCAKey          = "ca.key"
	autoRenewPath         = "certificates.autoRenew"
)

// Certificates is the "certificates" section: the automatic renewal of
// this member's certificates in kubeadm's layout.
type Certificates struct {
	// AutoRenew renews the member's certificates from the etcd CA when
	// the ones its listeners serve expire within RenewBefore, as etcdlet
	// certs renew does, then restarts the member on them through a
	// member-restart task: it holds the cluster-wide task lock and is
	// refused unless the other voters keep quorum, so members restart one
	// at a time. Off by default.
	AutoRenew bool `yaml:"autoRenew"`
	// RenewBefore is how long before a served certificate's expiry it is
	// renewed (default 720h, 30 days).
	RenewBefore time.Duration `yaml:"renewBefore"`
	// Validity of the renewed certificates (default 8760h), at most until
	// the CA expires.
	Validity time.Duration `yaml:"validity"`
	// CAKey is the etcd CA's private key (default: ca.key beside
	// etcd.tls.client.caFile, kubeadm's layout).
	CAKey string `yaml:"caKey,omitempty"`
}

func (c *Config) applyCertificatesDefaults(explicit map[string]bool) {
	setUnlessExplicit(explicit, "certificates.renewBefore", &c.Certificates.RenewBefore, DefaultRenewBefore)
	setUnlessExplicit(explicit, "certificates.validity", &c.Certificates.Validity, DefaultRenewValidity)
	if ca := c.Etcd.TLS.Client.CAFile; ca != "" {
		setDefault(&c.Certificates.CAKey, filepath.Join(filepath.Dir(ca), kubeadmCAKey))
	}
}

// RenewalDir is the directory of the member's certificates that
// certificates.autoRenew renews (kubeadm's layout: the etcd directory
// holding server.crt and peer.crt).
func (c *Config) RenewalDir() string { return filepath.Dir(c.Etcd.TLS.Client.CertFile) }

func (c *Config) validateCertificates(errs *Errors) {
	r := c.Certificates
	if r.RenewBefore < minRenewBefore || r.RenewBefore > maxRenewBefore {
		errs.add("certificates.renewBefore", r.RenewBefore.String(), "must be between %s and %s", minRenewBefore, maxRenewBefore)
	}
	if r.Validity < r.RenewBefore+renewValidityHeadroom {
		errs.add("certificates.validity", r.Validity.String(), "must exceed certificates.renewBefore (%s) by at least %s: a renewed certificate must not be due again at once",
			r.RenewBefore, renewValidityHeadroom)
	}
	if !r.AutoRenew {
		return
	}
	client, peer := c.Etcd.TLS.Client.CertFile, c.Etcd.TLS.Peer.CertFile
	switch {
	case client == "" || peer == "":
		errs.add(autoRenewPath, true, "needs etcd.tls.client and etcd.tls.peer: without TLS there is no certificate to renew")
	case filepath.Base(client) != kubeadmServerCert || filepath.Base(peer) != kubeadmPeerCert || filepath.Dir(client) != filepath.Dir(peer):
		errs.add(autoRenewPath, true, "renews kubeadm's layout, server.crt and peer.crt in one directory (as etcdlet certs issue writes them); etcd.tls.client.certFile is %s, etcd.tls.peer.certFile %s", client, peer)
	case c.Etcd.TLS.Client.CAFile == "":
		errs.add(autoRenewPath, true, "needs etcd.tls.client.caFile, the etcd CA it renews from")
	}
	if r.CAKey != "" {
		requireAbsPath(errs, "certificates.caKey", r.CAKey)
	}
}
