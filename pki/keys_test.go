package pki

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// Every key type newKey makes is told back from its public key, so that a
// renewal keeps it, and is written in kubeadm's encoding.
func TestKeyTypes(t *testing.T) {
	for _, tt := range []struct {
		t        KeyType
		describe string
		pemType  string
	}{
		{KeyECDSA, "ECDSA P-256", "EC PRIVATE KEY"},
		{KeyECDSAP384, "ECDSA P-384", "EC PRIVATE KEY"},
		{KeyRSA, "RSA 2048", "RSA PRIVATE KEY"},
		{KeyRSA3072, "RSA 3072", "RSA PRIVATE KEY"},
		{KeyRSA4096, "RSA 4096", "RSA PRIVATE KEY"},
	} {
		t.Run(string(tt.t), func(t *testing.T) {
			key, keyPEM, err := newKey(tt.t)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := KeyTypeOf(key.Public()); err != nil || got != tt.t {
				t.Errorf("KeyTypeOf = %q, %v; want %q", got, err, tt.t)
			}
			if got := tt.t.Describe(); got != tt.describe {
				t.Errorf("Describe = %q, want %q", got, tt.describe)
			}
			block, _ := pem.Decode(keyPEM)
			if block == nil || block.Type != tt.pemType {
				t.Fatalf("PEM %v, want a %s block", block, tt.pemType)
			}
			parsed, err := parsePrivateKey(keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			if pub, err := x509.MarshalPKIXPublicKey(parsed.Public()); err != nil || len(pub) == 0 {
				t.Errorf("the written key does not read back: %v", err)
			}
			if !tt.t.valid() {
				t.Error("not valid in a Request")
			}
		})
	}
	if _, _, err := newKey("dsa"); err == nil {
		t.Error("newKey made a key of an unknown type")
	}
}
