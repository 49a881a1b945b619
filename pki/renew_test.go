package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// leafSpec is a certificate as another tool (kubeadm, an older etcdlet)
// may have made it.
type leafSpec struct {
	subject    pkix.Name
	rawSubject []byte
	dns        []string
	ips        []net.IP
	uris       []string
	keyUsage   x509.KeyUsage
	eku        []x509.ExtKeyUsage
	key        crypto.Signer // ECDSA P-256 when nil
	isCA       bool
	notAfter   time.Time
}

// newLeaf signs a certificate for spec with ca and returns it.
func newLeaf(t *testing.T, ca *CA, s leafSpec) *x509.Certificate {
	t.Helper()
	if s.key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s.key = k
	}
	if s.notAfter.IsZero() {
		s.notAfter = testNow.Add(10 * 24 * time.Hour)
	}
	var uris []*url.URL
	for _, u := range s.uris {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, parsed)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42), Subject: s.subject, NotBefore: testNow.Add(-300 * 24 * time.Hour), NotAfter: s.notAfter,
		RawSubject: s.rawSubject,
		KeyUsage:   s.keyUsage, ExtKeyUsage: s.eku, DNSNames: s.dns, IPAddresses: s.ips, URIs: uris,
		BasicConstraintsValid: true, IsCA: s.isCA,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, s.key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func mustRSA(t *testing.T, bits int) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustECDSA(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// kubeadmServer is an etcd server certificate as kubeadm v1.37 makes it:
// RSA 2048, digital signature and key encipherment, server and client
// auth, the node's names and addresses.
func kubeadmServer(t *testing.T) leafSpec {
	return leafSpec{
		subject: pkix.Name{CommonName: "cp-1"},
		dns:     []string{"cp-1", "localhost"},
		ips:     []net.IP{net.ParseIP("192.0.2.201").To4(), net.ParseIP("127.0.0.1").To4(), net.IPv6loopback, net.ParseIP("10.0.0.10").To4()},
		key:     mustRSA(t, 2048), keyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
}

func TestRenewKeepsIdentity(t *testing.T) {
	ca := newTestCA(t, caSpec{})
	now := testNow
	server := kubeadmServer(t)
	// Before 1.29 kubeadm set O=system:masters on its etcd client
	// certificates; a renewal keeps it, as it keeps everything it names.
	apiserver := leafSpec{subject: pkix.Name{CommonName: "kube-apiserver-etcd-client", Organization: []string{"system:masters"}},
		key: mustRSA(t, 2048), keyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	// A subject whose encoding Go would not produce by itself (a
	// PrintableString CN after an OU): kept byte for byte.
	raw, err := asn1.Marshal(pkix.RDNSequence{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 11}, Value: "etcd"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: asn1.RawValue{Tag: asn1.TagPrintableString, Bytes: []byte("kube-etcd-healthcheck-client")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	healthSpec := leafSpec{rawSubject: raw, key: mustECDSA(t, elliptic.P384()), keyUsage: x509.KeyUsageDigitalSignature,
		eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, uris: []string{"spiffe://cluster.local/etcd-client"}}

	for _, tt := range []struct {
		name    string
		spec    leafSpec
		profile string
		keyType KeyType
	}{
		{"kubeadm server, RSA 2048", server, "server", KeyRSA},
		{"organization kept", apiserver, "apiserver-etcd-client", KeyRSA},
		{"raw subject, URI SAN, ECDSA P-384", healthSpec, "healthcheck-client", KeyECDSAP384},
		{"RSA 3072", leafSpec{subject: pkix.Name{CommonName: "cp-1"}, dns: []string{"cp-1"}, key: mustRSA(t, 3072),
			keyUsage: x509.KeyUsageDigitalSignature, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, "peer", KeyRSA3072},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := newLeaf(t, ca.CA, tt.spec)
			set, err := Renew(ca.CA, []Current{{Profile: profileByName(t, tt.profile), Cert: old}}, DefaultValidity, now)
			if err != nil {
				t.Fatal(err)
			}
			is := set.Certs[0]
			c := is.Cert
			if !bytes.Equal(c.RawSubject, old.RawSubject) {
				t.Errorf("subject %q, want %q as encoded", c.Subject, old.Subject)
			}
			if !slices.EqualFunc(c.IPAddresses, old.IPAddresses, net.IP.Equal) || !slices.Equal(c.DNSNames, old.DNSNames) ||
				len(c.URIs) != len(old.URIs) || (len(c.URIs) > 0 && c.URIs[0].String() != old.URIs[0].String()) {
				t.Errorf("SANs %v, want %v", SANs(c), SANs(old))
			}
			if c.KeyUsage != old.KeyUsage || !slices.Equal(c.ExtKeyUsage, old.ExtKeyUsage) {
				t.Errorf("usages %v %v, want %v %v", c.KeyUsage, c.ExtKeyUsage, old.KeyUsage, old.ExtKeyUsage)
			}
			if got, err := KeyTypeOf(c.PublicKey); err != nil || got != tt.keyType {
				t.Errorf("key type %q (%v), want %q", got, err, tt.keyType)
			}
			if pub, _ := old.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); pub.Equal(c.PublicKey) {
				t.Error("the key was kept; kubeadm certs renew makes a new one")
			}
			if c.SerialNumber.Cmp(old.SerialNumber) == 0 {
				t.Error("the serial number was kept")
			}
			if !c.NotAfter.Equal(now.Add(DefaultValidity)) || !c.NotBefore.Equal(now.Add(-Backdate)) {
				t.Errorf("validity %s .. %s", c.NotBefore, c.NotAfter)
			}
			if is.Replaces != old || is.Profile.Name != tt.profile {
				t.Errorf("Replaces %v, profile %s", is.Replaces, is.Profile.Name)
			}
			if err := Verify(ca.CA, is, now); err != nil {
				t.Error(err)
			}
			block, _ := pem.Decode(is.KeyPEM)
			if want := map[bool]string{true: "RSA PRIVATE KEY", false: "EC PRIVATE KEY"}[tt.keyType.isRSA()]; block == nil || block.Type != want {
				t.Errorf("key PEM %v, want %s as kubeadm writes it", block, want)
			}
		})
	}
}

func profileByName(t *testing.T, name string) Profile {
	t.Helper()
	for _, p := range Profiles() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no profile %s", name)
	return Profile{}
}

func TestRenewValidity(t *testing.T) {
	ca := newTestCA(t, caSpec{notBefore: testNow.Add(-time.Hour), notAfter: testNow.Add(100 * 24 * time.Hour)})
	old := newLeaf(t, ca.CA, kubeadmServer(t))
	cur := []Current{{Profile: profileByName(t, "server"), Cert: old}}
	for _, tt := range []struct {
		name          string
		validity      time.Duration
		wantNotAfter  time.Time
		wantClamped   bool
		wantNotBefore time.Time
	}{
		{"within the CA", 30 * 24 * time.Hour, testNow.Add(30 * 24 * time.Hour), false, testNow.Add(-Backdate)},
		{"cut to the CA", DefaultValidity, ca.Cert.NotAfter, true, testNow.Add(-Backdate)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Renew(ca.CA, cur, tt.validity, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if !set.NotAfter.Equal(tt.wantNotAfter) || set.Clamped != tt.wantClamped || !set.Certs[0].Cert.NotBefore.Equal(tt.wantNotBefore) {
				t.Errorf("not before %s, not after %s, clamped %v; want %s, %s, %v", set.Certs[0].Cert.NotBefore, set.NotAfter, set.Clamped,
					tt.wantNotBefore, tt.wantNotAfter, tt.wantClamped)
			}
		})
	}
}

func TestRenewRefuses(t *testing.T) {
	ca := newTestCA(t, caSpec{})
	other := newTestCA(t, caSpec{cn: "another-ca"})
	expiredCA := newTestCA(t, caSpec{notBefore: testNow.Add(-48 * time.Hour), notAfter: testNow.Add(-time.Hour)})
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	server := profileByName(t, "server")
	for _, tt := range []struct {
		name     string
		ca       *CA
		current  []Current
		validity time.Duration
		want     string
	}{
		{"nothing to renew", ca.CA, nil, DefaultValidity, "no certificate to renew"},
		{"signed by another CA", ca.CA, []Current{{server, newLeaf(t, other.CA, kubeadmServer(t))}}, DefaultValidity, "was not signed by the CA"},
		{"a CA", ca.CA, []Current{{server, newLeaf(t, ca.CA, leafSpec{subject: pkix.Name{CommonName: "sub"}, isCA: true, keyUsage: x509.KeyUsageCertSign})}}, DefaultValidity, "is a CA"},
		{"Ed25519 key", ca.CA, []Current{{server, newLeaf(t, ca.CA, leafSpec{subject: pkix.Name{CommonName: "x"}, key: edKey, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})}}, DefaultValidity, "Ed25519"},
		{"RSA 1024", ca.CA, []Current{{server, newLeaf(t, ca.CA, leafSpec{subject: pkix.Name{CommonName: "x"}, key: mustRSA(t, 1024), eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})}}, DefaultValidity, "RSA with 1024 bits"},
		{"zero validity", ca.CA, []Current{{server, newLeaf(t, ca.CA, kubeadmServer(t))}}, 0, "must be positive"},
		{"expired CA", expiredCA.CA, []Current{{server, newLeaf(t, expiredCA.CA, leafSpec{subject: pkix.Name{CommonName: "x"}, notAfter: testNow.Add(-2 * time.Hour)})}}, DefaultValidity, "expired"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Renew(tt.ca, tt.current, tt.validity, testNow)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestReadCurrent(t *testing.T) {
	ca, set := issueSet(t)
	l := KubeadmLayout(filepath.Join(t.TempDir(), "pki", "etcd"))
	if _, err := Install(ca.CA, set, l, WriteOptions{Now: testNow}); err != nil {
		t.Fatal(err)
	}
	apiserver := profileByName(t, "apiserver-etcd-client")
	if err := os.Remove(l.CertPath(apiserver)); err != nil {
		t.Fatal(err)
	}
	current, missing, err := ReadCurrent(l, Profiles())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range current {
		names = append(names, c.Profile.Name)
		if !c.Cert.Equal(byName(t, set, c.Profile.Name).Cert) {
			t.Errorf("%s: read another certificate than was installed", c.Profile.Name)
		}
	}
	if !slices.Equal(names, []string{"server", "peer", "healthcheck-client"}) || !slices.Equal(missing, []string{l.CertPath(apiserver)}) {
		t.Errorf("current %v, missing %v", names, missing)
	}

	if err := os.WriteFile(l.CertPath(profileByName(t, "peer")), []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadCurrent(l, Profiles()); err == nil || !strings.Contains(err.Error(), "peer.crt") {
		t.Errorf("a file that is no certificate: %v, want an error naming it", err)
	}
}

// A renewed set goes through Install like an issued one: the old files
// are kept aside, the new ones verify from disk, and a renewal of the
// renewal works (renew reads only the certificates).
func TestRenewInstall(t *testing.T) {
	ca, set := issueSet(t)
	l := KubeadmLayout(filepath.Join(t.TempDir(), "pki", "etcd"))
	if _, err := Install(ca.CA, set, l, WriteOptions{Now: testNow}); err != nil {
		t.Fatal(err)
	}
	for round, now := range []time.Time{testNow.Add(300 * 24 * time.Hour), testNow.Add(301 * 24 * time.Hour)} {
		current, _, err := ReadCurrent(l, Profiles())
		if err != nil {
			t.Fatal(err)
		}
		renewed, err := Renew(ca.CA, current, DefaultValidity, now)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Install(ca.CA, renewed, l, WriteOptions{Force: true, Now: now})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(rep.MovedAside) != 8 || len(rep.Written) != 8 {
			t.Errorf("round %d: kept %d, wrote %d; want 8 and 8", round, len(rep.MovedAside), len(rep.Written))
		}
		after, _, err := ReadCurrent(l, Profiles())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range after {
			if !c.Cert.NotAfter.Equal(now.Add(DefaultValidity)) {
				t.Errorf("round %d: %s not after %s", round, c.Profile.Name, c.Cert.NotAfter)
			}
		}
	}
}
