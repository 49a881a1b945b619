package pki

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"net/netip"
	"testing"
	"time"
)

// A new CA is kubeadm's etcd-ca: a CA that may sign, valid for ten years,
// and the member certificates it issues verify against it.
func TestNewCAIssuesMemberCertificates(t *testing.T) {
	now := time.Now()
	for _, kt := range []KeyType{KeyECDSA, KeyRSA} {
		t.Run(string(kt), func(t *testing.T) {
			ca, certPEM, keyPEM, err := NewCA(DefaultCAName, kt, DefaultCAValidity, now)
			if err != nil {
				t.Fatal(err)
			}
			c := ca.Cert
			if c.Subject.CommonName != "etcd-ca" || !c.IsCA || c.KeyUsage&x509.KeyUsageCertSign == 0 || !c.NotAfter.After(now.Add(9*365*24*time.Hour)) {
				t.Errorf("CA %s: CA %v, key usage %b, not after %s", c.Subject, c.IsCA, c.KeyUsage, c.NotAfter)
			}
			switch c.PublicKey.(type) {
			case *ecdsa.PublicKey:
				if kt != KeyECDSA {
					t.Errorf("key type %s made an ECDSA key", kt)
				}
			case *rsa.PublicKey:
				if kt != KeyRSA {
					t.Errorf("key type %s made an RSA key", kt)
				}
			}
			if _, err := ParseCA(certPEM, keyPEM, now); err != nil {
				t.Fatalf("the PEM files do not load as a CA: %v", err)
			}
			set, err := Issue(ca, Request{NodeName: "cp-0", Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::10")}, Validity: 365 * 24 * time.Hour, KeyType: KeyECDSA, Now: now}, Profiles())
			if err != nil {
				t.Fatal(err)
			}
			for _, is := range set.Certs {
				if err := Verify(ca, is, now); err != nil {
					t.Errorf("%s: %v", is.Cert.Subject, err)
				}
			}
		})
	}
	if _, _, _, err := NewCA("etcd ca", KeyECDSA, DefaultCAValidity, now); err == nil {
		t.Error("a CA name that is no DNS label was accepted")
	}
}
