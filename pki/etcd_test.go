package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// TestRealEtcdTLS runs a two-member etcd cluster in the test process with
// the files Install wrote, kubeadm-style: client and peer TLS with client
// certificate authentication on both. The members reach each other over
// peer TLS with their peer certificates (the cluster is only ready once
// they do), clients present healthcheck-client and apiserver-etcd-client,
// and a client certificate from another CA is refused.
func TestRealEtcdTLS(t *testing.T) {
	now := time.Now()
	ca := newTestCA(t, caSpec{notBefore: now.Add(-time.Hour), notAfter: now.Add(24 * time.Hour)})
	root := t.TempDir()
	caCert, _ := ca.writeTo(t, filepath.Join(root, "ca"))

	ipv6 := loopbackIPv6()
	type member struct {
		name       string
		ip         string
		layout     Layout
		clientURL  string
		clientURL6 string // on [::1], when the host has it
		peerURL    string
		etcd       *embed.Etcd
	}
	members := []*member{{name: "m0"}, {name: "m1"}}
	var initial []string
	for i, m := range members {
		m.layout = KubeadmLayout(filepath.Join(root, m.name, "pki", "etcd"))
		// Each member has a loopback address of its own, with etcd's
		// ports: no other test binds 127.61.0.0/24, and a port below the
		// ephemeral range cannot be taken by an outgoing connection, as a
		// port that was free a moment ago can (another package's tests,
		// or one member dialling the other before it listens).
		m.ip = fmt.Sprintf("127.61.0.%d", i+1)
		addresses := []string{m.ip}
		if ipv6 {
			addresses = append(addresses, "::1")
		}
		set, err := Issue(ca.CA, Request{NodeName: m.name, Addresses: addrs(t, addresses...), Validity: DefaultValidity, KeyType: KeyECDSA, Now: now}, Profiles())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Install(ca.CA, set, m.layout, WriteOptions{Now: now}); err != nil {
			t.Fatal(err)
		}
		m.clientURL = "https://" + net.JoinHostPort(m.ip, "2379")
		m.peerURL = "https://" + net.JoinHostPort(m.ip, "2380")
		if ipv6 {
			m.clientURL6 = "https://" + net.JoinHostPort("::1", strconv.Itoa(23790+i))
		}
		initial = append(initial, m.name+"="+m.peerURL)
	}

	for _, m := range members {
		cfg := embed.NewConfig()
		cfg.Name = m.name
		cfg.Dir = filepath.Join(root, m.name, "data")
		cfg.ListenClientUrls = urls(t, m.clientURL, m.clientURL6)
		cfg.AdvertiseClientUrls = urls(t, m.clientURL)
		cfg.ListenPeerUrls = urls(t, m.peerURL)
		cfg.AdvertisePeerUrls = urls(t, m.peerURL)
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "pki-test"
		cfg.ClusterState = embed.ClusterStateFlagNew
		cfg.TickMs, cfg.ElectionMs = 20, 200
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile: m.layout.CertPath(profile("server")), KeyFile: m.layout.KeyPath(profile("server")),
			TrustedCAFile: caCert, ClientCertAuth: true,
		}
		cfg.PeerTLSInfo = transport.TLSInfo{
			CertFile: m.layout.CertPath(profile("peer")), KeyFile: m.layout.KeyPath(profile("peer")),
			TrustedCAFile: caCert, ClientCertAuth: true,
		}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.etcd = e
		t.Cleanup(func() { closeWithin(t, e, 30*time.Second) })
	}
	for _, m := range members {
		select {
		case <-m.etcd.Server.ReadyNotify():
		case err := <-m.etcd.Err():
			t.Fatalf("%s: %v", m.name, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not ready within 10s: the members could not talk over peer TLS", m.name)
		}
	}

	// A client as etcdlet builds it (daemon/etcdclient: etcd's TLSInfo),
	// with the server certificate checked against the CA and the IP.
	client := func(t *testing.T, endpoint, certFile, keyFile string) *clientv3.Client {
		t.Helper()
		tlsConfig, err := (transport.TLSInfo{CertFile: certFile, KeyFile: keyFile, TrustedCAFile: caCert}).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsConfig, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		t.Cleanup(cancel)
		return c
	}
	m0, m1 := members[0], members[1]

	for _, p := range []string{"healthcheck-client", "apiserver-etcd-client"} {
		t.Run(p+" can write and read", func(t *testing.T) {
			key := "/pki-test/" + p
			w := client(t, m0.clientURL, m0.layout.CertPath(profile(p)), m0.layout.KeyPath(profile(p)))
			if _, err := w.Put(ctx(t), key, "value"); err != nil {
				t.Fatalf("put through %s: %v", m0.name, err)
			}
			// Read on the other member (linearizable): the write travelled
			// over peer TLS.
			r := client(t, m1.clientURL, m1.layout.CertPath(profile(p)), m1.layout.KeyPath(profile(p)))
			resp, err := r.Get(ctx(t), key)
			if err != nil {
				t.Fatalf("get through %s: %v", m1.name, err)
			}
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "value" {
				t.Fatalf("get %s: %v", key, resp.Kvs)
			}
		})
	}

	t.Run("IPv6 client URL", func(t *testing.T) {
		if !ipv6 {
			t.Fatal("no ::1 on this host: the tests need IPv6 on loopback (sysctl -w net.ipv6.conf.lo.disable_ipv6=0)")
		}
		c := client(t, m0.clientURL6, m0.layout.CertPath(profile("healthcheck-client")), m0.layout.KeyPath(profile("healthcheck-client")))
		if _, err := c.Get(ctx(t), "/pki-test/healthcheck-client"); err != nil {
			t.Fatalf("get through %s: %v", m0.clientURL6, err)
		}
	})

	t.Run("renewal with Force: new connections get the new certificate, no restart", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		u, _ := url.Parse(m0.clientURL)
		hc := profile("healthcheck-client")
		pair, err := tls.LoadX509KeyPair(m0.layout.CertPath(hc), m0.layout.KeyPath(hc))
		if err != nil {
			t.Fatal(err)
		}
		served := func() *x509.Certificate {
			t.Helper()
			conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0]
		}
		before := served()
		set, err := Issue(ca.CA, Request{NodeName: m0.name, Addresses: addrs(t, m0.ip), Validity: 2 * time.Hour, KeyType: KeyRSA, Now: time.Now()}, Profiles())
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Install(ca.CA, set, m0.layout, WriteOptions{Now: time.Now(), Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.MovedAside) != 8 {
			t.Fatalf("moved aside %d files, want 8", len(rep.MovedAside))
		}
		after := served()
		if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
			t.Fatal("a new connection still gets the old server certificate")
		}
		if !after.Equal(byName(t, set, "server").Cert) {
			t.Fatal("the server presents neither the old nor the new certificate")
		}
		// The old client certificate is still valid (same CA) and the
		// cluster still works with the renewed files.
		c := client(t, m0.clientURL, m0.layout.CertPath(hc), m0.layout.KeyPath(hc))
		if _, err := c.Put(ctx(t), "/pki-test/renewed", "yes"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("client certificate of another CA is refused", func(t *testing.T) {
		other := newTestCA(t, caSpec{notBefore: now.Add(-time.Hour), notAfter: now.Add(24 * time.Hour)})
		set, err := Issue(other.CA, Request{NodeName: "intruder", Addresses: addrs(t, "127.0.0.1"), Validity: time.Hour, KeyType: KeyECDSA, Now: now}, Profiles())
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "intruder")
		l := Layout{EtcdDir: dir, PKIDir: dir}
		if _, err := Install(other.CA, set, l, WriteOptions{Now: now}); err != nil {
			t.Fatal(err)
		}
		hc := profile("healthcheck-client")
		c := client(t, m0.clientURL, l.CertPath(hc), l.KeyPath(hc))
		short, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Put(short, "/pki-test/intruder", "x"); err == nil {
			t.Fatal("put with a client certificate of another CA succeeded")
		} else {
			t.Logf("refused as expected: %v", err)
		}
		// The server itself rejects the certificate: a bare TLS handshake
		// with it fails on the server's side.
		pair, err := tls.LoadX509KeyPair(l.CertPath(hc), l.KeyPath(hc))
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(m0.clientURL)
		conn, err := tls.Dial("tcp", u.Host, &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true})
		if err == nil {
			if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
				t.Fatal(err)
			}
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("handshake with a foreign client certificate: %v, want a certificate alert", err)
		}
		t.Logf("bare handshake: %v", err)
		// And nothing was written.
		r := client(t, m0.clientURL, m0.layout.CertPath(hc), m0.layout.KeyPath(hc))
		resp, err := r.Get(ctx(t), "/pki-test/intruder")
		if err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("intruder's key: %v %v", resp, err)
		}
	})

	t.Run("no client certificate is refused", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		u, _ := url.Parse(m0.clientURL)
		// The server certificate verifies for the member's IP; the server
		// then demands a client certificate.
		conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatalf("server certificate does not verify for %s: %v", u.Host, err)
		}
		if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Fatalf("handshake without a client certificate: %v, want a certificate-required alert", err)
		}
	})
}

func profile(name string) Profile {
	for _, p := range Profiles() {
		if p.Name == name {
			return p
		}
	}
	panic("no profile " + name)
}

// closeWithin stops an embedded member and fails the test if that takes
// longer than limit: a member whose peer never started can wait in its
// shutdown for a peer that will not answer, and a test must not hang on
// its cleanup for the rest of the suite's time.
func closeWithin(t *testing.T, e *embed.Etcd, limit time.Duration) {
	done := make(chan struct{})
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Errorf("%s did not stop within %s", e.Config().Name, limit)
	}
}

func loopbackIPv6() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func urls(t *testing.T, raws ...string) []url.URL {
	t.Helper()
	var out []url.URL
	for _, raw := range raws {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *u)
	}
	return out
}
