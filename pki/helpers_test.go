package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testNow is the time of issue in the tests that do not talk to a real
// server; certificates are verified at this time.
var testNow = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// caSpec describes a test CA.
type caSpec struct {
	cn        string
	notBefore time.Time
	notAfter  time.Time
	notCA     bool
	keyUsage  x509.KeyUsage // 0: cert sign | CRL sign | digital signature
	rsaKey    bool
	keyFormat string // "sec1" (default for EC), "pkcs1" (default for RSA), "pkcs8"
}

// testCA is a CA made for a test, with its PEM files' content.
type testCA struct {
	*CA
	certPEM, keyPEM []byte
}

func newTestCA(t testing.TB, s caSpec) testCA {
	t.Helper()
	if s.cn == "" {
		s.cn = "etcd-ca"
	}
	if s.notBefore.IsZero() {
		s.notBefore = testNow.Add(-24 * time.Hour)
	}
	if s.notAfter.IsZero() {
		s.notAfter = s.notBefore.Add(10 * 365 * 24 * time.Hour)
	}
	if s.keyUsage == 0 {
		s.keyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	}
	var key crypto.Signer
	var err error
	if s.rsaKey {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: s.cn},
		NotBefore:             s.notBefore,
		NotAfter:              s.notAfter,
		KeyUsage:              s.keyUsage,
		BasicConstraintsValid: true,
		IsCA:                  !s.notCA,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{
		CA:      &CA{Cert: cert, Key: key},
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  encodeKey(t, key, s.keyFormat),
	}
}

func encodeKey(t testing.TB, key crypto.Signer, format string) []byte {
	t.Helper()
	if format == "pkcs8" {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	t.Fatalf("key type %T", key)
	return nil
}

// writeCA writes the CA's files into dir as ca.crt and ca.key and
// returns their paths.
func (c testCA) writeTo(t testing.TB, dir string) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, c.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

func addrs(t testing.TB, values ...string) []netip.Addr {
	t.Helper()
	a, err := ParseAddresses(values)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// byName returns the issued certificate of a profile.
func byName(t testing.TB, set *Set, name string) Issued {
	t.Helper()
	for _, is := range set.Certs {
		if is.Profile.Name == name {
			return is
		}
	}
	t.Fatalf("no %s in the set", name)
	return Issued{}
}
