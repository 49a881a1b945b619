package pki

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// DefaultValidity is kubeadm's validity of the certificates it signs with
// its CAs: one year.
const DefaultValidity = 365 * 24 * time.Hour

// Backdate is how far before the time of issue certificates start to be
// valid, so that a host whose clock is a little behind accepts them at
// once. Never earlier than the CA's own start.
const Backdate = 5 * time.Minute

// Location says which directory of kubeadm's layout a certificate lives
// in.
type Location int

const (
	// InEtcdDir is /etc/kubernetes/pki/etcd: the member's certificates.
	InEtcdDir Location = iota
	// InPKIDir is /etc/kubernetes/pki: kube-apiserver's etcd client
	// certificate.
	InPKIDir
)

// Profile is one of the certificates kubeadm signs with its etcd CA.
type Profile struct {
	// Name is kubeadm's base name: the files are Name.crt and Name.key.
	Name string
	// CommonName is the subject's CN; empty means the node name.
	CommonName string
	// Usages are the extended key usages.
	Usages []x509.ExtKeyUsage
	// HostSANs: the node name, localhost, the addresses, 127.0.0.1 and ::1
	// as subject alternative names. Client-only certificates have none.
	HostSANs bool
	Location Location
}

// Profiles are the certificates a member needs, as kubeadm (1.29 and
// later) issues them: etcd's serving and peer certificates, the client
// certificate for health checks (what etcdlet presents), and the one
// kube-apiserver presents. None carries an organization: kubeadm dropped
// O=system:masters from both client certificates in 1.29, as etcd does
// not read it.
func Profiles() []Profile {
	serverAndClient := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientOnly := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return []Profile{
		{Name: "server", Usages: serverAndClient, HostSANs: true, Location: InEtcdDir},
		{Name: "peer", Usages: serverAndClient, HostSANs: true, Location: InEtcdDir},
		{Name: "healthcheck-client", CommonName: "kube-etcd-healthcheck-client", Usages: clientOnly, Location: InEtcdDir},
		{Name: "apiserver-etcd-client", CommonName: "kube-apiserver-etcd-client", Usages: clientOnly, Location: InPKIDir},
	}
}

// Request is what to issue.
type Request struct {
	// NodeName is the CN of the server and peer certificates and one of
	// their DNS SANs; see NodeName.
	NodeName string
	// Addresses are the member's IP (first) and any other IPs it is
	// reached on; all become IP SANs of the server and peer certificates.
	Addresses []netip.Addr
	// Validity is how long the certificates are valid from Now; it is cut
	// to the CA's own expiry when it would outlive the CA.
	Validity time.Duration
	KeyType  KeyType
	// Now is the time of issue.
	Now time.Time
}

// Issued is one certificate and its key.
type Issued struct {
	Profile Profile
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
	// Hosts are the names and IPs the certificate must be valid for
	// (server and peer certificates only).
	Hosts []string
	// Replaces is the certificate a renewal replaces; nil from Issue.
	Replaces *x509.Certificate
}

// Set is the outcome of Issue.
type Set struct {
	Certs     []Issued
	NotBefore time.Time
	NotAfter  time.Time
	// Clamped reports that Validity would have outlived the CA, so that
	// the certificates end when the CA does (NotAfter is the CA's).
	Clamped bool
}

// Issue generates a key for every profile and signs a certificate for it
// with the CA, then checks each one with Verify. It writes nothing.
func Issue(ca *CA, req Request, profiles []Profile) (*Set, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	set, err := newSet(ca, req.Now, req.Validity)
	if err != nil {
		return nil, err
	}
	dnsNames, ips := req.sans()
	hosts := slices.Clone(dnsNames)
	for _, ip := range ips {
		hosts = append(hosts, ip.String())
	}
	for _, p := range profiles {
		is, err := sign(ca, req.identity(p, dnsNames, ips), req.KeyType, set)
		if err != nil {
			return nil, fmt.Errorf("issue %s: %w", p.Name, err)
		}
		is.Profile = p
		if p.HostSANs {
			is.Hosts = hosts
		}
		if err := Verify(ca, is, req.Now); err != nil {
			return nil, fmt.Errorf("issued %s does not verify: %w", p.Name, err)
		}
		set.Certs = append(set.Certs, is)
	}
	return set, nil
}

// newSet is an empty set with the validity of certificates issued at now:
// from Backdate before now (not before the CA) for validity, cut to the
// CA's own expiry.
func newSet(ca *CA, now time.Time, validity time.Duration) (*Set, error) {
	if now.After(ca.Cert.NotAfter) {
		return nil, fmt.Errorf("%w: not after %s", ErrCAExpired, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if validity <= 0 {
		return nil, fmt.Errorf("validity %s: must be positive", validity)
	}
	set := &Set{NotBefore: now.Add(-Backdate), NotAfter: now.Add(validity)}
	if set.NotBefore.Before(ca.Cert.NotBefore) {
		set.NotBefore = ca.Cert.NotBefore
	}
	if set.NotAfter.After(ca.Cert.NotAfter) {
		set.NotAfter, set.Clamped = ca.Cert.NotAfter, true
	}
	return set, nil
}

func (r Request) check() error {
	if n, err := NodeName(r.NodeName); err != nil {
		return err
	} else if n != r.NodeName {
		return fmt.Errorf("node name %q: not normalized, NodeName makes it %q", r.NodeName, n)
	}
	if len(r.Addresses) == 0 {
		return errors.New("no address: the member's IP is required")
	}
	for _, a := range r.Addresses {
		if err := checkAddr(a); err != nil {
			return err
		}
	}
	if r.Validity <= 0 {
		return fmt.Errorf("validity %s: must be positive", r.Validity)
	}
	if !r.KeyType.valid() {
		return fmt.Errorf("key type %q: want %q or %q", r.KeyType, KeyECDSA, KeyRSA)
	}
	return nil
}

// sans are kubeadm's SANs of the etcd server and peer certificates: the
// node name and localhost; the addresses, 127.0.0.1 and ::1.
func (r Request) sans() ([]string, []net.IP) {
	dnsNames := []string{r.NodeName}
	if r.NodeName != "localhost" {
		dnsNames = append(dnsNames, "localhost")
	}
	addrs := append(slices.Clone(r.Addresses), netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback())
	var ips []net.IP
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if !seen[a] {
			seen[a] = true
			ips = append(ips, net.IP(a.AsSlice()))
		}
	}
	return dnsNames, ips
}

// identity is what a certificate says about its holder, besides its key
// and validity: what Issue derives from a profile and a request, and what
// Renew carries over from the certificate it replaces.
type identity struct {
	subject pkix.Name
	// rawSubject, when set, is the subject exactly as the replaced
	// certificate encodes it (attribute order, string types included).
	rawSubject  []byte
	dnsNames    []string
	ips         []net.IP
	uris        []*url.URL
	emails      []string
	keyUsage    x509.KeyUsage
	extKeyUsage []x509.ExtKeyUsage
}

// identity is kubeadm's identity for a profile: the CN, the usages, and
// for server and peer certificates the host SANs.
func (r Request) identity(p Profile, dnsNames []string, ips []net.IP) identity {
	usage := x509.KeyUsageDigitalSignature
	if r.KeyType.isRSA() {
		// RSA key transport (TLS 1.2 RSA key exchange) encrypts with the
		// certificate's key; it does not apply to ECDSA keys.
		usage |= x509.KeyUsageKeyEncipherment
	}
	cn := p.CommonName
	if cn == "" {
		cn = r.NodeName
	}
	id := identity{subject: pkix.Name{CommonName: cn}, keyUsage: usage, extKeyUsage: slices.Clone(p.Usages)}
	if p.HostSANs {
		id.dnsNames, id.ips = dnsNames, ips
	}
	return id
}

// sign generates a key of keyType and signs a certificate for it with the
// CA, for id and the set's validity. The caller sets Profile and Hosts.
func sign(ca *CA, id identity, keyType KeyType, set *Set) (Issued, error) {
	key, keyPEM, err := newKey(keyType)
	if err != nil {
		return Issued{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 159))
	if err != nil {
		return Issued{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               id.subject,
		RawSubject:            id.rawSubject,
		NotBefore:             set.NotBefore,
		NotAfter:              set.NotAfter,
		KeyUsage:              id.keyUsage,
		ExtKeyUsage:           slices.Clone(id.extKeyUsage),
		BasicConstraintsValid: true,
		IsCA:                  false,
		DNSNames:              id.dnsNames,
		IPAddresses:           id.ips,
		URIs:                  id.uris,
		EmailAddresses:        id.emails,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Issued{}, err
	}
	return Issued{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  keyPEM,
	}, nil
}

// Verify checks an issued certificate as its users will: the PEM
// certificate and key form a TLS key pair, the certificate chains to the
// CA at now for each of its profile's extended key usages, it has exactly
// those usages and the expected CN, and it is valid for each of its Hosts.
func Verify(ca *CA, is Issued, now time.Time) error {
	pair, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		return fmt.Errorf("certificate and key: %w", err)
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return err
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	usages := is.Profile.Usages
	if len(usages) == 0 {
		// A renewed certificate without extended key usages: the chain
		// is checked all the same.
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageAny}
	}
	for _, u := range usages {
		opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}}
		if _, err := cert.Verify(opts); err != nil {
			return fmt.Errorf("verify for %s against the CA: %w", UsageName(u), err)
		}
	}
	if !slices.Equal(cert.ExtKeyUsage, is.Profile.Usages) {
		return fmt.Errorf("extended key usages %v, want %v", usageNames(cert.ExtKeyUsage), usageNames(is.Profile.Usages))
	}
	if want := is.Profile.CommonName; want != "" && cert.Subject.CommonName != want {
		return fmt.Errorf("CN %q, want %q", cert.Subject.CommonName, want)
	}
	for _, h := range is.Hosts {
		if err := cert.VerifyHostname(h); err != nil {
			return err
		}
	}
	return nil
}

// UsageName is the name openssl prints for an extended key usage.
func UsageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "server auth"
	case x509.ExtKeyUsageClientAuth:
		return "client auth"
	case x509.ExtKeyUsageAny:
		return "any"
	}
	return fmt.Sprintf("usage %d", u)
}

func usageNames(us []x509.ExtKeyUsage) []string {
	names := make([]string, len(us))
	for i, u := range us {
		names[i] = UsageName(u)
	}
	return names
}

// NodeName normalizes a node name for a certificate's CN and DNS SAN:
// lower case, as the kubelet names nodes after the host name, and an
// RFC 1123 DNS name (dot-separated labels of a-z, 0-9 and inner dashes).
func NodeName(raw string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(raw), "."))
	if name == "" {
		return "", errors.New("node name is empty")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return "", fmt.Errorf("node name %q is an IP address; it must be a DNS name (IPs are given as addresses)", raw)
	}
	if len(name) > 253 {
		return "", fmt.Errorf("node name %q: longer than 253 characters", raw)
	}
	for label := range strings.SplitSeq(name, ".") {
		if !validLabel(label) {
			return "", fmt.Errorf("node name %q: %q is not a DNS label (1-63 of a-z, 0-9 and '-', not starting or ending with '-')", raw, label)
		}
	}
	return name, nil
}

func validLabel(l string) bool {
	if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range l {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// ParseAddresses parses IP addresses (IPv4 or IPv6, an IPv6 address
// possibly in brackets), refusing host names, zones and the unspecified
// addresses. IPv4-mapped IPv6 addresses become IPv4; duplicates are
// dropped, the order is kept.
func ParseAddresses(values []string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	for _, v := range values {
		s := strings.TrimSpace(v)
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			s = s[1 : len(s)-1]
		}
		if s == "" {
			return nil, errors.New("empty address")
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address (host names are not accepted: the certificates name the member by IP)", v)
		}
		a = a.Unmap()
		if err := checkAddr(a); err != nil {
			return nil, err
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}

func checkAddr(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return errors.New("invalid address")
	case a.Zone() != "":
		return fmt.Errorf("%s: an address with a zone cannot be a certificate SAN", a)
	case a.IsUnspecified():
		return fmt.Errorf("%s: the unspecified address names no host", a)
	}
	return nil
}
