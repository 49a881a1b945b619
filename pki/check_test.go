package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func TestEvaluate(t *testing.T) {
	ca := newTestCA(t, caSpec{})
	other := newTestCA(t, caSpec{cn: "another-ca"})
	// A CA that expired: what it signed no longer verifies.
	oldCA := newTestCA(t, caSpec{cn: "old-ca", notBefore: testNow.Add(-400 * 24 * time.Hour), notAfter: testNow.Add(-24 * time.Hour)})
	key := mustECDSA(t, elliptic.P256())
	keyPEM := encodeKey(t, key, "")
	otherKeyPEM := encodeKey(t, mustECDSA(t, elliptic.P256()), "pkcs8")
	leaf := func(c testCA, notAfter time.Time) []byte {
		return certPEM(newLeaf(t, c.CA, leafSpec{subject: pkix.Name{CommonName: "cp-1"}, dns: []string{"cp-1"}, key: key,
			eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, notAfter: notAfter}))
	}
	inAYear := testNow.Add(365 * 24 * time.Hour)
	valid := leaf(ca, inAYear)
	notYet := certPEM(newLeafFrom(t, ca.CA, key, testNow.Add(time.Hour), inAYear))
	target := Target{Path: "/pki/etcd/server.crt", KeyPath: "/pki/etcd/server.key", CAPath: "/pki/etcd/ca.crt", Usage: "etcd-server"}
	caTarget := Target{Path: "/pki/etcd/ca.crt", Usage: "ca"}
	readErr := &fs.PathError{Op: "open", Path: "/pki/etcd/server.key", Err: fs.ErrPermission}

	for _, tt := range []struct {
		name         string
		target       Target
		c            Contents
		want         Status
		verification string
		problem      string // a substring of some problem, when any
	}{
		{"valid for a year", target, Contents{Cert: valid, Key: keyPEM, CA: ca.certPEM}, StatusOK, VerifyOK, ""},
		{"expires within the warning period", target, Contents{Cert: leaf(ca, testNow.Add(20*24*time.Hour)), Key: keyPEM, CA: ca.certPEM},
			StatusExpiring, VerifyOK, "expires in 20d0h"},
		{"expired, still signed by the CA", target, Contents{Cert: leaf(ca, testNow.Add(-time.Minute)), Key: keyPEM, CA: ca.certPEM},
			StatusExpired, VerifyOK, "expired 1m0s ago"},
		{"not yet valid", target, Contents{Cert: notYet, Key: keyPEM, CA: ca.certPEM}, StatusNotYetValid, VerifyOK, "check this host's clock"},
		{"signed by another CA", target, Contents{Cert: leaf(other, inAYear), Key: keyPEM, CA: ca.certPEM}, StatusUnverified, VerifyFailed, "does not verify against the CA"},
		{"in a bundle with its CA", target, Contents{Cert: leaf(other, inAYear), Key: keyPEM, CA: append(slices.Clone(ca.certPEM), other.certPEM...)},
			StatusOK, VerifyOK, ""},
		{"signed by an expired CA", target, Contents{Cert: leaf(oldCA, inAYear), Key: keyPEM, CA: oldCA.certPEM}, StatusUnverified, VerifyFailed, "expired"},
		{"another key", target, Contents{Cert: valid, Key: otherKeyPEM, CA: ca.certPEM}, StatusKeyMismatch, VerifyOK, "is not this certificate's key"},
		{"the key unreadable", target, Contents{Cert: valid, KeyErr: readErr, CA: ca.certPEM}, StatusUnreadable, VerifyOK, "permission denied"},
		{"no certificate", target, Contents{CertErr: &fs.PathError{Op: "open", Path: target.Path, Err: fs.ErrNotExist}}, StatusUnreadable, VerifyNoCA, "does not exist"},
		{"not PEM", target, Contents{Cert: []byte("garbage"), Key: keyPEM, CA: ca.certPEM}, StatusUnreadable, VerifyNoCA, "no PEM CERTIFICATE block"},
		{"the CA not PEM", target, Contents{Cert: valid, Key: keyPEM, CA: []byte("x")}, StatusUnreadable, VerifyNoCA, "CA /pki/etcd/ca.crt"},
		{"no key or CA configured", Target{Path: "/x.crt", Usage: "backup-api"}, Contents{Cert: valid}, StatusOK, VerifyNoCA, ""},
		{"the worst status wins", target, Contents{Cert: leaf(other, testNow.Add(-time.Hour)), Key: otherKeyPEM, CA: ca.certPEM},
			StatusKeyMismatch, VerifyFailed, "expired"},
		{"a CA file", caTarget, Contents{Cert: ca.certPEM}, StatusOK, VerifySelfSigned, ""},
		{"an expired CA file", caTarget, Contents{Cert: oldCA.certPEM}, StatusExpired, VerifySelfSigned, "expired 1d0h ago"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := Evaluate(tt.target, tt.c, testNow, DefaultWarn)
			if f.Status != tt.want || f.Verification != tt.verification {
				t.Errorf("status %s, verification %q, want %s, %q; problems %q", f.Status, f.Verification, tt.want, tt.verification, f.Problems)
			}
			if tt.problem == "" && len(f.Problems) > 0 {
				t.Errorf("problems %q, want none", f.Problems)
			}
			if tt.problem != "" && !slices.ContainsFunc(f.Problems, func(p string) bool { return strings.Contains(p, tt.problem) }) {
				t.Errorf("problems %q, want one saying %q", f.Problems, tt.problem)
			}
			if f.Path != tt.target.Path || f.Usage != tt.target.Usage {
				t.Errorf("finding for %s (%s), want %s (%s)", f.Path, f.Usage, tt.target.Path, tt.target.Usage)
			}
		})
	}

	f := Evaluate(target, Contents{Cert: valid, Key: keyPEM, CA: ca.certPEM}, testNow, DefaultWarn)
	if f.CommonName != "cp-1" || !slices.Equal(f.SANs, []string{"DNS:cp-1"}) || f.SignedBy != "CN=etcd-ca" || f.Serial != "2A" ||
		!f.NotAfter.Equal(inAYear) || f.Remaining != 365*24*time.Hour || f.RemainingSeconds != 365*24*3600 {
		t.Errorf("finding %+v", f)
	}
}

// newLeafFrom signs a certificate for key valid from notBefore.
func newLeafFrom(t *testing.T, ca *CA, key *ecdsa.PrivateKey, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	c := newLeaf(t, ca, leafSpec{subject: pkix.Name{CommonName: "cp-1"}, key: key, notAfter: notAfter})
	tmpl := *c
	tmpl.NotBefore = notBefore
	der, err := x509.CreateCertificate(nil, &tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	out, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckReadsFilesAndSkipsAbsentOptional(t *testing.T) {
	ca, set := issueSet(t)
	dir := t.TempDir()
	l := KubeadmLayout(filepath.Join(dir, "etcd"))
	if _, err := Install(ca.CA, set, l, WriteOptions{Now: testNow}); err != nil {
		t.Fatal(err)
	}
	caCert, _ := ca.writeTo(t, l.EtcdDir)
	server := profileByName(t, "server")
	targets := []Target{
		{Path: l.CertPath(server), KeyPath: l.KeyPath(server), CAPath: caCert, Usage: "etcd-server"},
		{Path: filepath.Join(dir, "absent.crt"), Usage: "apiserver-etcd-client", Optional: true},
		{Path: filepath.Join(dir, "missing.crt"), Usage: "etcd-peer"},
		{Path: caCert, Usage: "ca"},
	}
	got := Check(targets, testNow, DefaultWarn)
	var summary []string
	for _, f := range got {
		summary = append(summary, filepath.Base(f.Path)+"="+string(f.Status))
	}
	if want := []string{"server.crt=ok", "missing.crt=unreadable", "ca.crt=ok"}; !slices.Equal(summary, want) {
		t.Errorf("findings %v, want %v", summary, want)
	}
	if _, err := ReadCertificate(filepath.Join(dir, "absent.crt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadCertificate of a missing file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.crt"), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCertificate(filepath.Join(dir, "bad.crt")); err == nil || !strings.Contains(err.Error(), "bad.crt") {
		t.Errorf("ReadCertificate of a broken file: %v, want an error naming it", err)
	}
}

func TestStatusBroken(t *testing.T) {
	for _, s := range statusOrder {
		if want := s != StatusOK && s != StatusExpiring; s.Broken() != want {
			t.Errorf("%s.Broken() = %v", s, !want)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{365*24*time.Hour - time.Hour, "364d23h"},
		{-(13*24*time.Hour + 4*time.Hour + 59*time.Minute), "13d4h"},
		{5*time.Hour + 20*time.Minute + 10*time.Second, "5h20m"},
		{3*time.Minute + 7*time.Second, "3m7s"},
		{42*time.Second + 400*time.Millisecond, "42s"},
	} {
		if got := Human(tt.d); got != tt.want {
			t.Errorf("Human(%s) = %s, want %s", tt.d, got, tt.want)
		}
	}
}
