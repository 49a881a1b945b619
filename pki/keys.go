package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
)

// KeyType is the algorithm of the keys Issue generates.
type KeyType string

const (
	// KeyECDSA is ECDSA on P-256, the default.
	KeyECDSA KeyType = "ecdsa"
	// KeyRSA is RSA with 2048-bit keys, kubeadm's default.
	KeyRSA KeyType = "rsa"
	// KeyECDSAP384, KeyRSA3072 and KeyRSA4096 are the other algorithms
	// kubeadm's encryptionAlgorithm offers; Renew keeps a certificate's
	// algorithm, so it must be able to make each of them.
	KeyECDSAP384 KeyType = "ecdsa-p384"
	KeyRSA3072   KeyType = "rsa-3072"
	KeyRSA4096   KeyType = "rsa-4096"
)

// keySpec is a key type with the curve (ECDSA) or modulus size (RSA)
// that identifies it in a public key.
type keySpec struct {
	t     KeyType
	curve elliptic.Curve
	bits  int
}

// keyTypes are the key types newKey makes.
var keyTypes = []keySpec{
	{KeyECDSA, elliptic.P256(), 0}, {KeyECDSAP384, elliptic.P384(), 0},
	{KeyRSA, nil, 2048}, {KeyRSA3072, nil, 3072}, {KeyRSA4096, nil, 4096},
}

func (t KeyType) valid() bool {
	return slices.ContainsFunc(keyTypes, func(k keySpec) bool { return k.t == t })
}

func (k keySpec) matches(pub crypto.PublicKey) bool {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		return k.curve != nil && p.Curve == k.curve
	case *rsa.PublicKey:
		return k.bits != 0 && p.N.BitLen() == k.bits
	}
	return false
}

// Describe names the algorithm and size: "ECDSA P-256", "RSA 2048".
func (t KeyType) Describe() string {
	for _, k := range keyTypes {
		switch {
		case k.t != t:
		case k.curve != nil:
			return "ECDSA " + k.curve.Params().Name
		default:
			return fmt.Sprintf("RSA %d", k.bits)
		}
	}
	return string(t)
}

func (t KeyType) isRSA() bool { return t == KeyRSA || t == KeyRSA3072 || t == KeyRSA4096 }

// KeyTypeOf is the key type of a public key, for a renewal that keeps the
// algorithm and size of the key it replaces.
func KeyTypeOf(pub crypto.PublicKey) (KeyType, error) {
	for _, k := range keyTypes {
		if k.matches(pub) {
			return k.t, nil
		}
	}
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		return "", fmt.Errorf("%w: ECDSA on %s (want P-256 or P-384)", ErrUnsupportedKey, p.Curve.Params().Name)
	case *rsa.PublicKey:
		return "", fmt.Errorf("%w: RSA with %d bits (want 2048, 3072 or 4096)", ErrUnsupportedKey, p.N.BitLen())
	case ed25519.PublicKey:
		return "", fmt.Errorf("%w: Ed25519 (kubeadm makes none; want RSA or ECDSA)", ErrUnsupportedKey)
	}
	return "", fmt.Errorf("%w: %T", ErrUnsupportedKey, pub)
}

// newKey generates a key and its PEM encoding: SEC 1 for ECDSA and
// PKCS #1 for RSA, the encodings kubeadm writes.
func newKey(t KeyType) (crypto.Signer, []byte, error) {
	for _, k := range keyTypes {
		if k.t != t {
			continue
		}
		if k.curve != nil {
			key, err := ecdsa.GenerateKey(k.curve, rand.Reader)
			if err != nil {
				return nil, nil, err
			}
			der, err := x509.MarshalECPrivateKey(key)
			if err != nil {
				return nil, nil, err
			}
			return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
		}
		key, err := rsa.GenerateKey(rand.Reader, k.bits)
		if err != nil {
			return nil, nil, err
		}
		return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), nil
	}
	return nil, nil, fmt.Errorf("key type %q: want %q or %q", t, KeyECDSA, KeyRSA)
}
