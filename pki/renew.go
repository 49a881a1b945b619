package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"strings"
	"time"
)

// Current is a certificate in place that Renew replaces.
type Current struct {
	Profile Profile
	Cert    *x509.Certificate
}

// ReadCurrent reads the certificate of each profile in a layout. Profiles
// whose certificate file does not exist are returned by path in missing
// (a host without kube-apiserver has no apiserver-etcd-client); any other
// failure to read or parse one is an error.
func ReadCurrent(l Layout, profiles []Profile) (current []Current, missing []string, err error) {
	for _, p := range profiles {
		path := l.CertPath(p)
		cert, err := ReadCertificate(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, path)
		case err != nil:
			return nil, nil, err
		default:
			current = append(current, Current{Profile: p, Cert: cert})
		}
	}
	return current, missing, nil
}

// RenewLayout renews, as Renew does, every certificate of profiles that
// exists in the layout, and returns the new set (written nowhere yet) and
// the certificate paths that do not exist. None existing is an error.
func RenewLayout(ca *CA, l Layout, profiles []Profile, validity time.Duration, now time.Time) (*Set, []string, error) {
	current, missing, err := ReadCurrent(l, profiles)
	if err != nil {
		return nil, nil, err
	}
	if len(current) == 0 {
		return nil, missing, fmt.Errorf("no certificate to renew: none of %s exists; create them with etcdlet certs issue", strings.Join(missing, ", "))
	}
	set, err := Renew(ca, current, validity, now)
	return set, missing, err
}

// Renew issues a new key and certificate for each current certificate, as
// `kubeadm certs renew` does (cmd/kubeadm/app/phases/certs/renewal in
// v1.37.1: the identity of the certificate in place, a new key, a new
// validity from now; the CA is not renewed):
//
//   - the identity is the old certificate's, byte for byte where it can
//     be: the subject as encoded (CN and any organization), DNS, IP, URI
//     and e-mail SANs, key usage and extended key usages. Renewal must not
//     change who a certificate names or what it may do; `certs issue
//     --force` is the way to change that;
//   - the new key has the old one's algorithm and size (kubeadm uses its
//     cluster's encryptionAlgorithm, which made the old key);
//   - the validity is as Issue's: from now (backdated) for validity, never
//     beyond the CA.
//
// An old certificate that the CA did not sign is refused: renewing it
// with this CA would change who trusts it. So is one that is itself a CA.
// Each new certificate is checked with Verify against the old one's
// usages, CN and names. Renew writes nothing.
func Renew(ca *CA, current []Current, validity time.Duration, now time.Time) (*Set, error) {
	if len(current) == 0 {
		return nil, errors.New("no certificate to renew")
	}
	set, err := newSet(ca, now, validity)
	if err != nil {
		return nil, err
	}
	for _, c := range current {
		is, err := renewOne(ca, c, set)
		if err != nil {
			return nil, fmt.Errorf("renew %s: %w", c.Profile.Name, err)
		}
		if err := Verify(ca, is, now); err != nil {
			return nil, fmt.Errorf("renewed %s does not verify: %w", c.Profile.Name, err)
		}
		set.Certs = append(set.Certs, is)
	}
	return set, nil
}

func renewOne(ca *CA, c Current, set *Set) (Issued, error) {
	old := c.Cert
	if old.IsCA {
		return Issued{}, fmt.Errorf("the certificate (subject %q) is a CA; only leaf certificates are renewed", old.Subject.String())
	}
	if err := old.CheckSignatureFrom(ca.Cert); err != nil {
		return Issued{}, fmt.Errorf("the certificate (subject %q, issuer %q) was not signed by the CA %q; renewing it with this CA would change who trusts it: %w",
			old.Subject.String(), old.Issuer.String(), ca.Cert.Subject.String(), err)
	}
	keyType, err := KeyTypeOf(old.PublicKey)
	if err != nil {
		return Issued{}, err
	}
	is, err := sign(ca, identityOf(old), keyType, set)
	if err != nil {
		return Issued{}, err
	}
	// Verify checks the new certificate against what the old one was:
	// its usages, its CN, every name it was valid for.
	is.Profile = c.Profile
	is.Profile.Usages = slices.Clone(old.ExtKeyUsage)
	is.Profile.CommonName = old.Subject.CommonName
	is.Profile.HostSANs = len(old.DNSNames)+len(old.IPAddresses) > 0
	is.Hosts = append(slices.Clone(old.DNSNames), ipStrings(old.IPAddresses)...)
	is.Replaces = old
	return is, nil
}

// identityOf is the identity of an existing certificate, as renewal keeps
// it.
func identityOf(c *x509.Certificate) identity {
	return identity{
		subject: c.Subject, rawSubject: slices.Clone(c.RawSubject),
		dnsNames: slices.Clone(c.DNSNames), ips: slices.Clone(c.IPAddresses),
		uris: slices.Clone(c.URIs), emails: slices.Clone(c.EmailAddresses),
		keyUsage: c.KeyUsage, extKeyUsage: slices.Clone(c.ExtKeyUsage),
	}
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}
