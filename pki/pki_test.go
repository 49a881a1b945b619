package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCA(t *testing.T) {
	good := newTestCA(t, caSpec{})
	other := newTestCA(t, caSpec{})
	ecParams := append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}}), good.keyPEM...)
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}})
	legacyEncrypted := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1}})
	withBundle := append(slices.Clone(good.certPEM), other.certPEM...)
	for _, tc := range []struct {
		name    string
		ca      testCA // the certificate's and (unless key is set) the key's source
		key     []byte
		cert    []byte
		wantErr error  // errors.Is
		wantMsg string // substring, when wantErr is nil and an error is expected
	}{
		{name: "ECDSA CA, SEC 1 key", ca: good},
		{name: "RSA CA, PKCS #1 key", ca: newTestCA(t, caSpec{rsaKey: true})},
		{name: "RSA CA, PKCS #8 key", ca: newTestCA(t, caSpec{rsaKey: true, keyFormat: "pkcs8"})},
		{name: "ECDSA CA, PKCS #8 key", ca: newTestCA(t, caSpec{keyFormat: "pkcs8"})},
		{name: "EC PARAMETERS block before the key (openssl ecparam -genkey)", ca: good, key: ecParams},
		{name: "bundle: the first certificate is the CA", ca: good, cert: withBundle},
		{name: "not a CA", ca: newTestCA(t, caSpec{notCA: true}), wantErr: ErrNotCA},
		{name: "CA without keyCertSign", ca: newTestCA(t, caSpec{keyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign}), wantErr: ErrNoCertSign},
		{name: "expired CA", ca: newTestCA(t, caSpec{notBefore: testNow.Add(-48 * time.Hour), notAfter: testNow.Add(-time.Hour)}), wantErr: ErrCAExpired},
		{name: "CA not valid yet", ca: newTestCA(t, caSpec{notBefore: testNow.Add(time.Hour)}), wantErr: ErrCANotYetValid},
		{name: "key of another CA", ca: good, key: other.keyPEM, wantErr: ErrKeyMismatch},
		{name: "RSA key for an ECDSA CA", ca: good, key: newTestCA(t, caSpec{rsaKey: true}).keyPEM, wantErr: ErrKeyMismatch},
		{name: "encrypted PKCS #8 key", ca: good, key: encrypted, wantErr: ErrEncryptedKey},
		{name: "encrypted legacy PEM key", ca: good, key: legacyEncrypted, wantErr: ErrEncryptedKey},
		{name: "no key in the key file", ca: good, key: good.certPEM, wantMsg: "no PEM private key block"},
		{name: "no certificate in the certificate file", ca: good, cert: good.keyPEM, wantMsg: "no PEM CERTIFICATE block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM := tc.ca.certPEM, tc.ca.keyPEM
			if tc.cert != nil {
				certPEM = tc.cert
			}
			if tc.key != nil {
				keyPEM = tc.key
			}
			ca, err := ParseCA(certPEM, keyPEM, testNow)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			case tc.wantMsg != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantMsg)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if !ca.Cert.Equal(tc.ca.Cert) {
					t.Fatal("parsed another certificate than the CA's")
				}
			}
		})
	}
}

func TestLoadCANamesTheFile(t *testing.T) {
	dir := t.TempDir()
	notCA := newTestCA(t, caSpec{notCA: true})
	certPath, keyPath := notCA.writeTo(t, dir)
	_, err := LoadCA(certPath, keyPath, testNow)
	if !errors.Is(err, ErrNotCA) || !strings.Contains(err.Error(), certPath) {
		t.Fatalf("err = %v, want ErrNotCA naming %s", err, certPath)
	}
	good := newTestCA(t, caSpec{})
	certPath, _ = good.writeTo(t, dir)
	otherKey := filepath.Join(dir, "other.key")
	if err := os.WriteFile(otherKey, newTestCA(t, caSpec{}).keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadCA(certPath, otherKey, testNow)
	if !errors.Is(err, ErrKeyMismatch) || !strings.Contains(err.Error(), otherKey) {
		t.Fatalf("err = %v, want ErrKeyMismatch naming %s", err, otherKey)
	}
	if _, err := LoadCA(filepath.Join(dir, "missing.crt"), otherKey, testNow); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not exist", err)
	}
}

func TestIssue(t *testing.T) {
	serverAndClient := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientOnly := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, tc := range []struct {
		name      string
		ca        caSpec
		keyType   KeyType
		addresses []string
		wantIPs   []string // IP SANs of server and peer, in order
	}{
		{name: "IPv4, ECDSA", keyType: KeyECDSA, addresses: []string{"10.0.0.10"},
			wantIPs: []string{"10.0.0.10", "127.0.0.1", "::1"}},
		{name: "IPv6 and IPv4, RSA keys, RSA CA", ca: caSpec{rsaKey: true}, keyType: KeyRSA, addresses: []string{"fd00:10::10", "10.0.0.10"},
			wantIPs: []string{"fd00:10::10", "10.0.0.10", "127.0.0.1", "::1"}},
		{name: "loopback given explicitly is not repeated", keyType: KeyECDSA, addresses: []string{"192.0.2.7", "127.0.0.1", "::1"},
			wantIPs: []string{"192.0.2.7", "127.0.0.1", "::1"}},
		{name: "IPv4-mapped IPv6 is IPv4", keyType: KeyECDSA, addresses: []string{"::ffff:192.0.2.8"},
			wantIPs: []string{"192.0.2.8", "127.0.0.1", "::1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := newTestCA(t, tc.ca)
			req := Request{NodeName: "cp-0.example", Addresses: addrs(t, tc.addresses...), Validity: DefaultValidity, KeyType: tc.keyType, Now: testNow}
			set, err := Issue(ca.CA, req, Profiles())
			if err != nil {
				t.Fatal(err)
			}
			if set.Clamped {
				t.Error("clamped, the CA outlives the certificates")
			}
			want := []struct {
				name   string
				cn     string
				usages []x509.ExtKeyUsage
				sans   bool
			}{
				{"server", "cp-0.example", serverAndClient, true},
				{"peer", "cp-0.example", serverAndClient, true},
				{"healthcheck-client", "kube-etcd-healthcheck-client", clientOnly, false},
				{"apiserver-etcd-client", "kube-apiserver-etcd-client", clientOnly, false},
			}
			if len(set.Certs) != len(want) {
				t.Fatalf("%d certificates, want %d", len(set.Certs), len(want))
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			for i, w := range want {
				is := set.Certs[i]
				c := is.Cert
				if is.Profile.Name != w.name {
					t.Fatalf("certificate %d is %s, want %s", i, is.Profile.Name, w.name)
				}
				// Verify independently of the package's own Verify.
				for _, u := range w.usages {
					if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
						t.Errorf("%s does not verify for %s: %v", w.name, UsageName(u), err)
					}
				}
				if !slices.Equal(c.ExtKeyUsage, w.usages) {
					t.Errorf("%s: extended key usages %v, want %v", w.name, c.ExtKeyUsage, w.usages)
				}
				if !slices.Contains(w.usages, x509.ExtKeyUsageServerAuth) {
					if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
						t.Errorf("client certificate %s verifies for server auth", w.name)
					}
				}
				wantKU := x509.KeyUsageDigitalSignature
				if tc.keyType == KeyRSA {
					wantKU |= x509.KeyUsageKeyEncipherment
				}
				if c.KeyUsage != wantKU {
					t.Errorf("%s: key usage %b, want %b", w.name, c.KeyUsage, wantKU)
				}
				if c.IsCA || !c.BasicConstraintsValid {
					t.Errorf("%s: basic constraints valid=%v CA=%v, want CA:FALSE", w.name, c.BasicConstraintsValid, c.IsCA)
				}
				if c.Subject.CommonName != w.cn || len(c.Subject.Organization) != 0 {
					t.Errorf("%s: subject %s, want CN=%s without an organization", w.name, c.Subject, w.cn)
				}
				var gotIPs []string
				for _, ip := range c.IPAddresses {
					gotIPs = append(gotIPs, ip.String())
				}
				if w.sans {
					if !slices.Equal(gotIPs, tc.wantIPs) {
						t.Errorf("%s: IP SANs %v, want %v", w.name, gotIPs, tc.wantIPs)
					}
					if !slices.Equal(c.DNSNames, []string{"cp-0.example", "localhost"}) {
						t.Errorf("%s: DNS SANs %v", w.name, c.DNSNames)
					}
					for _, h := range append(slices.Clone(tc.addresses), "127.0.0.1", "::1", "localhost", "cp-0.example") {
						if err := c.VerifyHostname(h); err != nil {
							t.Errorf("%s: %v", w.name, err)
						}
					}
				} else if len(gotIPs)+len(c.DNSNames)+len(c.EmailAddresses)+len(c.URIs) != 0 {
					t.Errorf("%s: client certificate has SANs %v %v", w.name, gotIPs, c.DNSNames)
				}
				if !c.NotAfter.Equal(testNow.Add(DefaultValidity)) || !c.NotBefore.Equal(testNow.Add(-Backdate)) {
					t.Errorf("%s: valid %s to %s, want %s to %s", w.name, c.NotBefore, c.NotAfter, testNow.Add(-Backdate), testNow.Add(DefaultValidity))
				}
				switch pub := c.PublicKey.(type) {
				case *ecdsa.PublicKey:
					if tc.keyType != KeyECDSA || pub.Curve != elliptic.P256() {
						t.Errorf("%s: ECDSA key on %s, want %s", w.name, pub.Curve.Params().Name, tc.keyType)
					}
				case *rsa.PublicKey:
					if tc.keyType != KeyRSA || pub.N.BitLen() != 2048 {
						t.Errorf("%s: RSA %d key, want %s", w.name, pub.N.BitLen(), tc.keyType)
					}
				}
				block, _ := pem.Decode(is.KeyPEM)
				if wantType := map[KeyType]string{KeyECDSA: "EC PRIVATE KEY", KeyRSA: "RSA PRIVATE KEY"}[tc.keyType]; block == nil || block.Type != wantType {
					t.Errorf("%s: key PEM is not %s", w.name, wantType)
				}
			}
			// Serial numbers differ.
			seen := map[string]bool{}
			for _, is := range set.Certs {
				if seen[is.Cert.SerialNumber.String()] {
					t.Error("repeated serial number")
				}
				seen[is.Cert.SerialNumber.String()] = true
			}
		})
	}
}

func TestIssueValidity(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ca            caSpec
		validity      time.Duration
		wantNotBefore time.Time
		wantNotAfter  time.Time
		wantClamped   bool
		wantErr       error
	}{
		{name: "default year", validity: DefaultValidity,
			wantNotBefore: testNow.Add(-Backdate), wantNotAfter: testNow.Add(DefaultValidity)},
		{name: "short validity", validity: 48 * time.Hour,
			wantNotBefore: testNow.Add(-Backdate), wantNotAfter: testNow.Add(48 * time.Hour)},
		{name: "CA expires in 30 days: clamped to the CA", ca: caSpec{notAfter: testNow.Add(30 * 24 * time.Hour)}, validity: DefaultValidity,
			wantNotBefore: testNow.Add(-Backdate), wantNotAfter: testNow.Add(30 * 24 * time.Hour), wantClamped: true},
		{name: "validity ending with the CA exactly is not clamped", ca: caSpec{notAfter: testNow.Add(48 * time.Hour)}, validity: 48 * time.Hour,
			wantNotBefore: testNow.Add(-Backdate), wantNotAfter: testNow.Add(48 * time.Hour)},
		{name: "CA a minute old: not before the CA", ca: caSpec{notBefore: testNow.Add(-time.Minute)}, validity: DefaultValidity,
			wantNotBefore: testNow.Add(-time.Minute), wantNotAfter: testNow.Add(DefaultValidity)},
		{name: "expired CA", ca: caSpec{notBefore: testNow.Add(-48 * time.Hour), notAfter: testNow.Add(-time.Second)}, validity: DefaultValidity,
			wantErr: ErrCAExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := newTestCA(t, tc.ca)
			req := Request{NodeName: "cp-0", Addresses: addrs(t, "10.0.0.10"), Validity: tc.validity, KeyType: KeyECDSA, Now: testNow}
			set, err := Issue(ca.CA, req, Profiles())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.Clamped != tc.wantClamped || !set.NotAfter.Equal(tc.wantNotAfter) || !set.NotBefore.Equal(tc.wantNotBefore) {
				t.Fatalf("set %s to %s clamped=%v, want %s to %s clamped=%v", set.NotBefore, set.NotAfter, set.Clamped, tc.wantNotBefore, tc.wantNotAfter, tc.wantClamped)
			}
			for _, is := range set.Certs {
				if !is.Cert.NotAfter.Equal(tc.wantNotAfter) || !is.Cert.NotBefore.Equal(tc.wantNotBefore) {
					t.Errorf("%s: valid %s to %s", is.Profile.Name, is.Cert.NotBefore, is.Cert.NotAfter)
				}
				if is.Cert.NotAfter.After(ca.Cert.NotAfter) {
					t.Errorf("%s outlives the CA", is.Profile.Name)
				}
			}
		})
	}
}

func TestIssueRefusesBadRequests(t *testing.T) {
	ca := newTestCA(t, caSpec{})
	ok := Request{NodeName: "cp-0", Addresses: addrs(t, "10.0.0.10"), Validity: DefaultValidity, KeyType: KeyECDSA, Now: testNow}
	for _, tc := range []struct {
		name   string
		modify func(*Request)
		want   string
	}{
		{"no address", func(r *Request) { r.Addresses = nil }, "no address"},
		{"unspecified address", func(r *Request) { r.Addresses = []netip.Addr{netip.IPv4Unspecified()} }, "unspecified"},
		{"zero validity", func(r *Request) { r.Validity = 0 }, "must be positive"},
		{"negative validity", func(r *Request) { r.Validity = -time.Hour }, "must be positive"},
		{"unknown key type", func(r *Request) { r.KeyType = "dsa" }, `key type "dsa"`},
		{"upper-case node name", func(r *Request) { r.NodeName = "CP-0" }, "not normalized"},
		{"empty node name", func(r *Request) { r.NodeName = "" }, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.modify(&req)
			_, err := Issue(ca.CA, req, Profiles())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	ca := newTestCA(t, caSpec{})
	other := newTestCA(t, caSpec{})
	req := Request{NodeName: "cp-0", Addresses: addrs(t, "10.0.0.10", "fd00::10"), Validity: DefaultValidity, KeyType: KeyECDSA, Now: testNow}
	set, err := Issue(ca.CA, req, Profiles())
	if err != nil {
		t.Fatal(err)
	}
	server, peer, client := byName(t, set, "server"), byName(t, set, "peer"), byName(t, set, "healthcheck-client")
	for _, tc := range []struct {
		name string
		ca   *CA
		is   Issued
		now  time.Time
		want string
	}{
		{"another CA", other.CA, server, testNow, "unknown authority"},
		{"the key of another certificate", ca.CA, func() Issued { x := server; x.KeyPEM = peer.KeyPEM; return x }(), testNow, "private key does not match"},
		{"a client certificate used as a server certificate", ca.CA, func() Issued { x := client; x.Profile = server.Profile; return x }(), testNow, "server auth"},
		{"a host not in the SANs", ca.CA, func() Issued { x := server; x.Hosts = []string{"10.0.0.11"}; return x }(), testNow, "10.0.0.11"},
		{"after expiry", ca.CA, server, testNow.Add(DefaultValidity + time.Hour), "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.ca, tc.is, tc.now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	for _, is := range set.Certs {
		if err := Verify(ca.CA, is, testNow); err != nil {
			t.Errorf("%s: %v", is.Profile.Name, err)
		}
	}
	if got := server.Hosts; !slices.Contains(got, "fd00::10") || !slices.Contains(got, "::1") || !slices.Contains(got, "cp-0") {
		t.Errorf("server hosts %v", got)
	}
}

func TestParseAddresses(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{in: []string{"10.0.0.10"}, want: []string{"10.0.0.10"}},
		{in: []string{"fd00::10", "[fd00::11]", " 10.0.0.1 "}, want: []string{"fd00::10", "fd00::11", "10.0.0.1"}},
		{in: []string{"10.0.0.10", "10.0.0.10", "::ffff:10.0.0.10"}, want: []string{"10.0.0.10"}},
		{in: []string{"2001:DB8::1"}, want: []string{"2001:db8::1"}},
		{in: []string{"cp-0.example"}, wantErr: "host names are not accepted"},
		{in: []string{"localhost"}, wantErr: "host names are not accepted"},
		{in: []string{"10.0.0.0/24"}, wantErr: "not an IP address"},
		{in: []string{"10.0.0.10:2379"}, wantErr: "not an IP address"},
		{in: []string{""}, wantErr: "empty"},
		{in: []string{"0.0.0.0"}, wantErr: "unspecified"},
		{in: []string{"::"}, wantErr: "unspecified"},
		{in: []string{"fe80::1%eth0"}, wantErr: "zone"},
	} {
		t.Run(strings.Join(tc.in, ","), func(t *testing.T) {
			got, err := ParseAddresses(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			if !slices.Equal(s, tc.want) {
				t.Fatalf("got %v, want %v", s, tc.want)
			}
		})
	}
}

func TestNodeName(t *testing.T) {
	for _, tc := range []struct {
		in, want, wantErr string
	}{
		{in: "cp-0", want: "cp-0"},
		{in: "CP-0.Example.COM.", want: "cp-0.example.com"},
		{in: "node1", want: "node1"},
		{in: "", wantErr: "empty"},
		{in: "10.0.0.10", wantErr: "is an IP address"},
		{in: "cp_0", wantErr: "not a DNS label"},
		{in: "-cp", wantErr: "not a DNS label"},
		{in: "a..b", wantErr: "not a DNS label"},
		{in: strings.Repeat("a", 64), wantErr: "not a DNS label"},
		{in: strings.Repeat("abcdefg.", 32) + "x", wantErr: "longer than 253"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := NodeName(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestOpenSSLInterop checks the two ways the docs show to make a CA with
// openssl, and has openssl verify what Issue signs with it.
func TestOpenSSLInterop(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is not installed: run hack/test-deps.sh as root (make test does), or apt-get install openssl")
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(openssl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		name string
		make func(dir string)
	}{
		{"req -x509 with an EC key", func(dir string) {
			run("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
				"-keyout", filepath.Join(dir, "ca.key"), "-out", filepath.Join(dir, "ca.crt"), "-days", "3650", "-subj", "/CN=etcd-ca",
				"-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
		}},
		{"ecparam -genkey, then req -x509 with the default v3_ca extensions", func(dir string) {
			run("ecparam", "-name", "prime256v1", "-genkey", "-out", filepath.Join(dir, "ca.key"))
			run("req", "-x509", "-new", "-key", filepath.Join(dir, "ca.key"), "-out", filepath.Join(dir, "ca.crt"), "-days", "3650", "-subj", "/CN=etcd-ca",
				"-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
		}},
		{"req -x509 with an RSA key", func(dir string) {
			run("req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes",
				"-keyout", filepath.Join(dir, "ca.key"), "-out", filepath.Join(dir, "ca.crt"), "-days", "3650", "-subj", "/CN=etcd-ca",
				"-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.make(dir)
			now := time.Now()
			ca, err := LoadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), now)
			if err != nil {
				t.Fatal(err)
			}
			set, err := Issue(ca, Request{NodeName: "cp-0", Addresses: addrs(t, "10.0.0.10", "fd00::10"), Validity: DefaultValidity, KeyType: KeyECDSA, Now: now}, Profiles())
			if err != nil {
				t.Fatal(err)
			}
			l := Layout{EtcdDir: filepath.Join(dir, "out"), PKIDir: filepath.Join(dir, "out")}
			if _, err := Install(ca, set, l, WriteOptions{Now: now}); err != nil {
				t.Fatal(err)
			}
			for _, is := range set.Certs {
				for _, u := range is.Profile.Usages {
					purpose := map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "sslserver", x509.ExtKeyUsageClientAuth: "sslclient"}[u]
					run("verify", "-CAfile", filepath.Join(dir, "ca.crt"), "-purpose", purpose, l.CertPath(is.Profile))
				}
				if is.Profile.HostSANs {
					for _, ip := range []string{"10.0.0.10", "fd00::10", "127.0.0.1", "::1"} {
						run("verify", "-CAfile", filepath.Join(dir, "ca.crt"), "-verify_ip", ip, l.CertPath(is.Profile))
					}
					run("verify", "-CAfile", filepath.Join(dir, "ca.crt"), "-verify_hostname", "cp-0", l.CertPath(is.Profile))
				}
				// openssl reads the key and agrees it is the certificate's.
				certPub := run("x509", "-in", l.CertPath(is.Profile), "-noout", "-pubkey")
				keyPub := run("pkey", "-in", l.KeyPath(is.Profile), "-pubout")
				if certPub != keyPub {
					t.Errorf("%s: openssl sees another public key in the key file", is.Profile.Name)
				}
			}
		})
	}
}

func TestKubeadmLayout(t *testing.T) {
	l := KubeadmLayout("/etc/kubernetes/pki/etcd/")
	want := map[string][2]string{
		"server":                {"/etc/kubernetes/pki/etcd/server.crt", "/etc/kubernetes/pki/etcd/server.key"},
		"peer":                  {"/etc/kubernetes/pki/etcd/peer.crt", "/etc/kubernetes/pki/etcd/peer.key"},
		"healthcheck-client":    {"/etc/kubernetes/pki/etcd/healthcheck-client.crt", "/etc/kubernetes/pki/etcd/healthcheck-client.key"},
		"apiserver-etcd-client": {"/etc/kubernetes/pki/apiserver-etcd-client.crt", "/etc/kubernetes/pki/apiserver-etcd-client.key"},
	}
	for _, p := range Profiles() {
		if got := [2]string{l.CertPath(p), l.KeyPath(p)}; got != want[p.Name] {
			t.Errorf("%s: %v, want %v", p.Name, got, want[p.Name])
		}
	}
}
