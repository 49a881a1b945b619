package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// DefaultWarn is how long before its expiry `etcdlet certs check` calls a
// certificate expiring: a month leaves a monthly check, or a renewal
// postponed by a holiday, time to act before the two weeks the
// EtcdletCertificateExpiresSoon alert gives.
const DefaultWarn = 30 * 24 * time.Hour

// Target is a certificate file etcdlet uses and what to check it against.
type Target struct {
	// Path is the PEM file; its first certificate is the one checked.
	Path string `json:"path"`
	// KeyPath, when set, is the certificate's private key, which must
	// match it.
	KeyPath string `json:"key,omitempty"`
	// CAPath, when set, is the CA file the certificate must verify
	// against (any certificate in it may be the issuer).
	CAPath string `json:"ca,omitempty"`
	// Usage is what the file is: etcd-server, etcd-peer, etcdlet-client,
	// apiserver-etcd-client, agent-listener, backup-api or ca (several
	// joined by commas when one file serves several); the metric's usage
	// label.
	Usage string `json:"usage"`
	// Fields are the configuration fields naming the file.
	Fields []string `json:"fields,omitempty"`
	// Optional: a missing file is skipped, not a problem (kubeadm's
	// apiserver-etcd-client exists only on hosts running kube-apiserver).
	Optional bool `json:"-"`
}

// Contents are a target's files as read, or why they could not be: what
// ReadTarget gathers and Evaluate judges.
type Contents struct {
	Cert, Key, CA          []byte
	CertErr, KeyErr, CAErr error
}

// ReadTarget reads a target's files.
func ReadTarget(t Target) Contents {
	var c Contents
	c.Cert, c.CertErr = os.ReadFile(t.Path)
	if t.KeyPath != "" {
		c.Key, c.KeyErr = os.ReadFile(t.KeyPath)
	}
	if t.CAPath != "" {
		c.CA, c.CAErr = os.ReadFile(t.CAPath)
	}
	return c
}

// ReadCertificate reads the first certificate of a PEM file.
func ReadCertificate(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs[0], nil
}

// parseCertificates parses every CERTIFICATE block of a PEM file; at
// least one is required.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	return certs, nil
}

// Status is a certificate's state, from the worst to the best.
type Status string

// Statuses, the worst first; a finding has the worst that applies.
const (
	StatusUnreadable  Status = "unreadable"    // the certificate, its key or its CA cannot be read or parsed
	StatusKeyMismatch Status = "key-mismatch"  // the key is not the certificate's
	StatusUnverified  Status = "unverified"    // it does not verify against its CA
	StatusExpired     Status = "expired"       // past its NotAfter
	StatusNotYetValid Status = "not-yet-valid" // before its NotBefore
	StatusExpiring    Status = "expiring"      // within the warning period of its NotAfter
	StatusOK          Status = "ok"
)

var statusOrder = []Status{StatusUnreadable, StatusKeyMismatch, StatusUnverified, StatusExpired, StatusNotYetValid, StatusExpiring, StatusOK}

func (s Status) worse(than Status) bool {
	return slices.Index(statusOrder, s) < slices.Index(statusOrder, than)
}

// Broken reports whether the certificate fails now (anything but ok and
// expiring).
func (s Status) Broken() bool { return s != StatusOK && s != StatusExpiring }

// Verification outcomes: against the target's CA file, or for a CA file
// itself, what kind of CA it is.
const (
	VerifyOK         = "verified"
	VerifyFailed     = "failed"
	VerifyNoCA       = "no CA configured"
	VerifySelfSigned = "self-signed CA"
	VerifyCAIssued   = "CA signed by another"
)

// Finding is what Evaluate says about one certificate file.
type Finding struct {
	Target
	CommonName string    `json:"commonName,omitempty"`
	Subject    string    `json:"subject,omitempty"`
	SANs       []string  `json:"sans,omitempty"`
	Serial     string    `json:"serial,omitempty"`
	NotBefore  time.Time `json:"notBefore"`
	NotAfter   time.Time `json:"notAfter"`
	// Remaining is NotAfter less now; negative once expired.
	Remaining time.Duration `json:"-"`
	// RemainingSeconds is Remaining for JSON.
	RemainingSeconds int64  `json:"remainingSeconds"`
	Issuer           string `json:"issuer,omitempty"`
	// SignedBy is the subject of the certificate of CAPath that signed
	// this one; empty when none did.
	SignedBy string `json:"signedBy,omitempty"`
	// Verification is VerifyOK, VerifyFailed (Problems say why),
	// VerifyNoCA, or for a CA file VerifySelfSigned or VerifyCAIssued.
	Verification string   `json:"verification"`
	Status       Status   `json:"status"`
	Problems     []string `json:"problems,omitempty"`
}

func (f *Finding) problem(s Status, format string, args ...any) {
	f.Problems = append(f.Problems, fmt.Sprintf(format, args...))
	if s.worse(f.Status) {
		f.Status = s
	}
}

// Evaluate judges a certificate file at now: readable and parsable, its
// key its own, signed by and verifying against its CA, valid now, and not
// expiring within warn. It is pure: ReadTarget reads the files.
//
// The chain is verified at now, or at the end (the start) of the
// certificate's validity when it expired (is not valid yet), so that "does
// not verify" means "not signed by that CA" (or the CA itself was not
// valid then), not "expired", which has its own status.
func Evaluate(t Target, c Contents, now time.Time, warn time.Duration) Finding {
	f := Finding{Target: t, Status: StatusOK, Verification: VerifyNoCA}
	if c.CertErr != nil {
		f.problem(StatusUnreadable, "read certificate: %v", c.CertErr)
		return f
	}
	certs, err := parseCertificates(c.Cert)
	if err != nil {
		f.problem(StatusUnreadable, "certificate: %v", err)
		return f
	}
	cert := certs[0]
	f.CommonName, f.Subject, f.Issuer = cert.Subject.CommonName, cert.Subject.String(), cert.Issuer.String()
	f.SANs = SANs(cert)
	f.Serial = SerialString(cert)
	f.NotBefore, f.NotAfter = cert.NotBefore.UTC(), cert.NotAfter.UTC()
	f.Remaining = cert.NotAfter.Sub(now)
	f.RemainingSeconds = int64(f.Remaining / time.Second)

	switch {
	case now.After(cert.NotAfter):
		f.problem(StatusExpired, "expired %s ago, at %s", Human(-f.Remaining), f.NotAfter.Format(time.RFC3339))
	case now.Before(cert.NotBefore):
		f.problem(StatusNotYetValid, "not valid until %s (in %s); check this host's clock", f.NotBefore.Format(time.RFC3339), Human(cert.NotBefore.Sub(now)))
	case f.Remaining <= warn:
		f.problem(StatusExpiring, "expires in %s, at %s (within the warning period of %s)", Human(f.Remaining), f.NotAfter.Format(time.RFC3339), Human(warn))
	}

	if t.KeyPath != "" {
		if c.KeyErr != nil {
			f.problem(StatusUnreadable, "read key %s: %v", t.KeyPath, c.KeyErr)
		} else if key, err := parsePrivateKey(c.Key); err != nil {
			f.problem(StatusUnreadable, "key %s: %v", t.KeyPath, err)
		} else if err := matchKey(cert, key); err != nil {
			f.problem(StatusKeyMismatch, "key %s is not this certificate's key (a renewal interrupted between the key and the certificate? run the renewal again)", t.KeyPath)
		}
	}

	if cert.IsCA {
		f.Verification = VerifyCAIssued
		if cert.CheckSignatureFrom(cert) == nil {
			f.Verification, f.SignedBy = VerifySelfSigned, f.Subject
		}
	}
	if t.CAPath == "" {
		return f
	}
	if c.CAErr != nil {
		f.problem(StatusUnreadable, "read CA %s: %v", t.CAPath, c.CAErr)
		return f
	}
	cas, err := parseCertificates(c.CA)
	if err != nil {
		f.problem(StatusUnreadable, "CA %s: %v", t.CAPath, err)
		return f
	}
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
		if f.SignedBy == "" && cert.CheckSignatureFrom(ca) == nil {
			f.SignedBy = ca.Subject.String()
		}
	}
	at := now
	if at.Before(cert.NotBefore) {
		at = cert.NotBefore
	} else if at.After(cert.NotAfter) {
		at = cert.NotAfter
	}
	opts := x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if _, err := cert.Verify(opts); err != nil {
		f.Verification = VerifyFailed
		f.problem(StatusUnverified, "does not verify against the CA %s: %v", t.CAPath, err)
	} else {
		f.Verification = VerifyOK
	}
	return f
}

// Check reads and evaluates every target; optional targets whose file
// does not exist are left out.
func Check(targets []Target, now time.Time, warn time.Duration) []Finding {
	var out []Finding
	for _, t := range targets {
		c := ReadTarget(t)
		if t.Optional && errors.Is(c.CertErr, fs.ErrNotExist) {
			continue
		}
		out = append(out, Evaluate(t, c, now, warn))
	}
	return out
}

// SANs lists a certificate's subject alternative names as openssl prints
// them: DNS:, IP:, URI:, email:.
func SANs(c *x509.Certificate) []string {
	var out []string
	for _, d := range c.DNSNames {
		out = append(out, "DNS:"+d)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	for _, u := range c.URIs {
		out = append(out, "URI:"+u.String())
	}
	for _, e := range c.EmailAddresses {
		out = append(out, "email:"+e)
	}
	return out
}

// SerialString is a certificate's serial number in upper-case hex, as
// openssl prints it.
func SerialString(c *x509.Certificate) string { return strings.ToUpper(c.SerialNumber.Text(16)) }

// Human renders a duration in days, hours and minutes: "364d23h",
// "13d4h", "5h20m", "42s".
func Human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	days, rest := d/(24*time.Hour), d%(24*time.Hour)
	switch {
	case days > 0:
		return fmt.Sprintf("%dd%dh", days, rest/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, (d%time.Hour)/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%ds", d/time.Minute, (d%time.Minute)/time.Second)
	}
	return d.Round(time.Second).String()
}
