package httpserve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// Every listener served here speaks HTTP/1.1 and refuses HTTP/2, over TLS
// (ALPN h2) and in plaintext (h2c with prior knowledge), also when its TLS
// configuration offered h2 as etcd's transport package does.
func TestServeRefusesHTTP2(t *testing.T) {
	cert, pool := selfSigned(t)
	for _, tc := range []struct {
		name string
		tls  *tls.Config
	}{
		{name: "tls", tls: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}},
		{name: "plaintext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := serve(t, tc.tls)
			scheme := "http"
			if tc.tls != nil {
				scheme = "https"
			}

			var h1 http.Protocols
			h1.SetHTTP1(true)
			resp, err := client(pool, &h1).Get(scheme + "://" + url)
			if err != nil {
				t.Fatalf("HTTP/1.1: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 1 || string(body) != "HTTP/1.1" {
				t.Errorf("HTTP/1.1 answered over %s: %q", resp.Proto, body)
			}

			var h2 http.Protocols
			if tc.tls != nil {
				h2.SetHTTP2(true)
			} else {
				h2.SetUnencryptedHTTP2(true)
			}
			resp, err = client(pool, &h2).Get(scheme + "://" + url)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("an HTTP/2-only client was answered over %s", resp.Proto)
			}
		})
	}
	t.Run("tls offers only http/1.1", func(t *testing.T) {
		url := serve(t, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
		conn, err := tls.Dial("tcp", url, &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("ALPN negotiated %q, want http/1.1", p)
		}
	})
}

func serve(t *testing.T, tlsConfig *tls.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: tlsConfig, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.WriteString(w, r.Proto); err != nil {
				t.Errorf("write the response: %v", err)
			}
		})}
	var wg sync.WaitGroup
	Serve(&wg, slog.New(slog.DiscardHandler), "test listener", srv, l)
	t.Cleanup(func() { srv.Close(); wg.Wait() })
	return l.Addr().String()
}

func client(pool *x509.CertPool, p *http.Protocols) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Protocols: p, TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "httpserve test"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{netip.MustParseAddr("127.0.0.1").AsSlice()}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, pool
}
