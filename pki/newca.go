package pki

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// DefaultCAName and DefaultCAValidity are kubeadm's for its etcd CA
// (kubeadm init phase certs etcd-ca): CN etcd-ca, ten years.
const (
	DefaultCAName     = "etcd-ca"
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
)

// NewCA makes a self-signed etcd CA as kubeadm makes its etcd-ca: CN name,
// basic constraints CA:TRUE, key usage digitalSignature, keyEncipherment
// and keyCertSign, valid from Backdate before now for validity. It returns
// the CA (checked as ParseCA checks one) and its PEM certificate and key.
func NewCA(name string, keyType KeyType, validity time.Duration, now time.Time) (ca *CA, certPEM, keyPEM []byte, err error) {
	if validity <= 0 {
		return nil, nil, nil, fmt.Errorf("validity %s: must be positive", validity)
	}
	if _, err := NodeName(name); err != nil {
		return nil, nil, nil, fmt.Errorf("CA name: %w", err)
	}
	key, keyPEM, err := newKey(keyType)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 159))
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sign the CA: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if ca, err = ParseCA(certPEM, keyPEM, now); err != nil {
		return nil, nil, nil, err
	}
	return ca, certPEM, keyPEM, nil
}
