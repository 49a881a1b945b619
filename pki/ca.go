// Package pki issues the TLS certificates of an etcd member from an etcd
// CA the operator provides, with kubeadm's file names, subjects and key
// usages, so that a node set up this way looks like a kubeadm node to
// etcdlet, etcd and kube-apiserver.
//
// The package has three steps, each usable alone: load and check the CA
// (LoadCA, ParseCA), issue and check the certificates in memory (Issue,
// Verify), and install them on disk (Install, Write) without ever silently
// replacing an existing file.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// Reasons a CA is refused; the errors ParseCA and LoadCA return wrap them.
var (
	ErrNotCA          = errors.New("the certificate is not a CA: its basic constraints do not say CA:TRUE")
	ErrNoCertSign     = errors.New("the CA certificate's key usage does not allow signing certificates (keyCertSign)")
	ErrCAExpired      = errors.New("the CA certificate has expired")
	ErrCANotYetValid  = errors.New("the CA certificate is not valid yet")
	ErrKeyMismatch    = errors.New("the CA key is not the private key of the CA certificate (their public keys differ)")
	ErrEncryptedKey   = errors.New("the CA key is encrypted; decrypt it first (for example: openssl pkey -in ca.key -out ca-plain.key)")
	ErrUnsupportedKey = errors.New("unsupported private key type (want RSA, ECDSA or Ed25519)")
)

// CA is a checked certificate authority: its certificate is a CA that may
// sign certificates and is valid now, and Key is its private key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// LoadCA reads a PEM CA certificate and its PEM private key and checks
// them as ParseCA does; errors name the file at fault.
func LoadCA(certPath, keyPath string, now time.Time) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	cert, err := parseCACert(certPEM, now)
	if err != nil {
		return nil, fmt.Errorf("CA certificate %s: %w", certPath, err)
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key %s: %w", keyPath, err)
	}
	if err := matchKey(cert, key); err != nil {
		return nil, fmt.Errorf("%w: key %s, certificate %s", err, keyPath, certPath)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// ParseCA checks a PEM CA certificate (the first CERTIFICATE block) and
// its PEM private key: the certificate must be a CA (basic constraints
// CA:TRUE) whose key usage includes keyCertSign, valid at now, and the key
// must be the private half of the certificate's public key.
func ParseCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	cert, err := parseCACert(certPEM, now)
	if err != nil {
		return nil, err
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if err := matchKey(cert, key); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

func parseCACert(data []byte, now time.Time) (*x509.Certificate, error) {
	var block *pem.Block
	rest := data
	for {
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM CERTIFICATE block found")
		}
		if block.Type == "CERTIFICATE" {
			break
		}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("%w (subject %q)", ErrNotCA, cert.Subject.String())
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w (subject %q)", ErrNoCertSign, cert.Subject.String())
	}
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("%w: subject %q, not after %s; certificates it signs would not verify, renew the CA first",
			ErrCAExpired, cert.Subject.String(), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(cert.NotBefore) {
		return nil, fmt.Errorf("%w: subject %q, not before %s; check this host's clock",
			ErrCANotYetValid, cert.Subject.String(), cert.NotBefore.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// parsePrivateKey reads the first private key block of a PEM file, in
// any of the encodings openssl and kubeadm write: PKCS #1 (RSA), SEC 1
// (EC, possibly after an EC PARAMETERS block) and PKCS #8.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" || block.Headers["Proc-Type"] == "4,ENCRYPTED" {
			return nil, ErrEncryptedKey
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			continue // EC PARAMETERS, a certificate bundled in, ...
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", block.Type, err)
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return k, nil
		default:
			return nil, fmt.Errorf("%w: %T", ErrUnsupportedKey, key)
		}
	}
}

func matchKey(cert *x509.Certificate, key crypto.Signer) error {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return ErrKeyMismatch
	}
	return nil
}
