package consent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlet/etcdlet/config"
)

// The agents of these tests: node 1 serves, node 2 is the other listed
// node, 3 and 5 are hosts that the list does not name. Every 127/8
// address is local without set-up, so a test dials from each of them.
var (
	node1    = netip.MustParseAddr("127.0.201.1")
	node2    = netip.MustParseAddr("127.0.201.2")
	unlisted = netip.MustParseAddr("127.0.201.3")
	other    = netip.MustParseAddr("127.0.201.5")
)

// testPKI is a peer CA and certificates of it, as kubeadm issues them.
type testPKI struct {
	dir string
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
	// Peer is the peer certificate of nodes 1 and 2 (IP SANs for both, as
	// a test cluster shares one); Client a client-only certificate without
	// any SAN (kubeadm's apiserver-etcd-client, healthcheck-client); Other
	// the peer certificate of another host (an IP SAN for other only).
	Peer, Client, Other config.TLSFiles
	// IPv6 is a peer certificate for ::1.
	IPv6 config.TLSFiles
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	var err error
	if p.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(p.dir, "ca.crt"), "CERTIFICATE", der)
	peer := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	p.Peer = p.issue(t, "peer", 2, peer, node1, node2)
	p.Client = p.issue(t, "kube-apiserver-etcd-client", 3, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	p.Other = p.issue(t, "other", 4, peer, other)
	p.IPv6 = p.issue(t, "ipv6", 5, peer, netip.IPv6Loopback())
	return p
}

func (p *testPKI) issue(t *testing.T, name string, serial int64, usage []x509.ExtKeyUsage, ips ...netip.Addr) config.TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := config.TLSFiles{CertFile: filepath.Join(p.dir, name+".crt"), KeyFile: filepath.Join(p.dir, name+".key"), CAFile: filepath.Join(p.dir, "ca.crt")}
	writePEM(t, f.CertFile, "CERTIFICATE", der)
	writePEM(t, f.KeyFile, "EC PRIVATE KEY", keyDER)
	return f
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// endpoint is an agent peer endpoint under test, with what reached its
// node controller.
type endpoint struct {
	addr     string
	scheme   string
	mu       sync.Mutex
	promises [][]string
	wakes    int
	// retiredBy are the callers of the retirements that reached it.
	retiredBy []netip.Addr
}

func (e *endpoint) reached() (promises, wakes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.promises), e.wakes
}

func (e *endpoint) retirements() []netip.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.retiredBy)
}

// serve runs the peer endpoint on at with the list listed in force, over
// TLS with the peer certificate when peer is set (ServerTLS: client
// certificates of the CA required), in plaintext otherwise.
func serve(t *testing.T, at netip.Addr, listed []string, peer *config.TLSFiles, log *slog.Logger) *endpoint {
	t.Helper()
	var tlsConfig *tls.Config
	if peer != nil {
		var err error
		if tlsConfig, err = ServerTLS(*peer); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(at.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{addr: l.Addr().String(), scheme: "http"}
	if tlsConfig != nil {
		e.scheme = "https"
	}
	answer := func() Answer { return Answer{Cluster: "etcd-main", Node: at.String(), List: listed, Phase: Fresh} }
	promise := func(list []string) Answer {
		e.mu.Lock()
		e.promises = append(e.promises, list)
		e.mu.Unlock()
		a := answer()
		a.Promised = list
		return a
	}
	wake := func() {
		e.mu.Lock()
		e.wakes++
		e.mu.Unlock()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	data := func(context.Context) DataReport {
		return DataReport{Node: at.String(), MemberID: "8e9e05c52164694d", LastTerm: 3, LastIndex: 120, Commit: 118, Revision: 99}
	}
	retire := func(caller netip.Addr, req RetireRequest) RetireAnswer {
		e.mu.Lock()
		e.retiredBy = append(e.retiredBy, caller)
		e.mu.Unlock()
		return RetireAnswer{Node: at.String(), Retired: true}
	}
	srv := Server(Handler(Endpoints{Answer: answer, Promise: promise, Wake: wake, Data: data, Retire: retire}, NewGuard(tlsConfig, log)), tlsConfig)
	go func() {
		if tlsConfig != nil {
			_ = srv.ServeTLS(l, "", "")
		} else {
			_ = srv.Serve(l)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return e
}

// caller is another host's HTTP client: it dials from the address from
// and presents cert (none when nil), trusting the CA.
func caller(t *testing.T, from netip.Addr, cert *config.TLSFiles, ca string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0))}).DialContext,
		DisableKeepAlives: true}
	if ca != "" {
		info := transport.TLSInfo{TrustedCAFile: ca}
		if cert != nil {
			info.CertFile, info.KeyFile = cert.CertFile, cert.KeyFile
		}
		c, err := info.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		tr.TLSClientConfig = c
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// outcome is what one request got: its status and, refused, the reason.
type outcome struct {
	status int
	body   string
}

func call(t *testing.T, c *http.Client, e *endpoint, method, path string, body []byte) outcome {
	t.Helper()
	req, err := http.NewRequest(method, e.scheme+"://"+e.addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return outcome{resp.StatusCode, string(b)}
}

// The security review: the peer endpoint took any certificate of the peer
// CA, from any address, so a client-only certificate of the same CA, or
// a peer certificate used from another address, could make a node
// promise a list (a forged promise with a silent address kept a cluster
// from ever forming) or run pass after pass. A caller is now taken only
// as etcd would take it as the peer at its address, and a promise or a
// wake-up only from a listed node.
func TestPeerEndpointAdmitsOnlyListedPeers(t *testing.T) {
	pki := newTestPKI(t)
	ca := pki.Peer.CAFile
	listed := []string{node1.String(), node2.String()}
	v6Listed := []string{netip.IPv6Loopback().String()}
	const (
		answered = http.StatusOK
		woken    = http.StatusNoContent
		refused  = http.StatusForbidden
	)
	tests := []struct {
		name   string
		at     netip.Addr // where the endpoint listens
		listed []string
		tls    bool // peer TLS with the CA; plaintext otherwise
		from   netip.Addr
		cert   *config.TLSFiles
		// What a GET (read the answer), a POST (ask for a promise) and a
		// wake-up get; why names the refusal.
		get, post, wake int
		why             string
	}{
		{name: "a listed node with its peer certificate is answered", at: node1, listed: listed, tls: true,
			from: node2, cert: &pki.Peer, get: answered, post: answered, wake: woken},
		{name: "a client-only certificate of the CA is refused (no IP SAN)", at: node1, listed: listed, tls: true,
			from: node2, cert: &pki.Client, get: refused, post: refused, wake: refused, why: "has no IP SAN for 127.0.201.2"},
		{name: "a peer certificate used from another address is refused", at: node1, listed: listed, tls: true,
			from: unlisted, cert: &pki.Peer, get: refused, post: refused, wake: refused, why: "has no IP SAN for 127.0.201.3"},
		{name: "another host's peer certificate from a listed address is refused", at: node1, listed: listed, tls: true,
			from: node2, cert: &pki.Other, get: refused, post: refused, wake: refused, why: "has no IP SAN for 127.0.201.2"},
		{name: "an unlisted host with its own peer certificate may read, not ask for a promise or wake", at: node1, listed: listed, tls: true,
			from: other, cert: &pki.Other, get: answered, post: refused, wake: refused, why: "only a node of this node's member list"},
		{name: "no list in force yet: nobody may ask for a promise", at: node1, tls: true,
			from: node2, cert: &pki.Peer, get: answered, post: refused, wake: refused, why: "no member list in force yet"},
		{name: "IPv6: a listed node with its peer certificate is answered", at: netip.IPv6Loopback(), listed: v6Listed, tls: true,
			from: netip.IPv6Loopback(), cert: &pki.IPv6, get: answered, post: answered, wake: woken},
		{name: "IPv6: an IPv4 peer certificate from ::1 is refused", at: netip.IPv6Loopback(), listed: v6Listed, tls: true,
			from: netip.IPv6Loopback(), cert: &pki.Peer, get: refused, post: refused, wake: refused, why: "has no IP SAN for ::1"},
		{name: "plaintext: a listed address is answered", at: node1, listed: listed,
			from: node2, get: answered, post: answered, wake: woken},
		{name: "plaintext: an unlisted address may read, not ask for a promise or wake", at: node1, listed: listed,
			from: unlisted, get: answered, post: refused, wake: refused, why: "only a node of this node's member list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var peer *config.TLSFiles
			caFile := ""
			if tt.tls {
				// The serving node's own certificate: the IPv6 one on ::1.
				peer, caFile = &pki.Peer, ca
				if tt.at.Is6() {
					peer = &pki.IPv6
				}
			}
			e := serve(t, tt.at, tt.listed, peer, nil)
			c := caller(t, tt.from, tt.cert, caFile)
			body, _ := json.Marshal(Request{List: []string{node2.String(), "127.0.201.99"}})
			retire, _ := json.Marshal(RetireRequest{Cluster: "cdf818194e3a8c32", By: tt.from.String()})
			got := map[string]outcome{
				"GET " + PathBootstrap:  call(t, c, e, http.MethodGet, PathBootstrap, nil),
				"POST " + PathBootstrap: call(t, c, e, http.MethodPost, PathBootstrap, body),
				"POST " + PathWake:      call(t, c, e, http.MethodPost, PathWake, nil),
				"POST " + PathRetire:    call(t, c, e, http.MethodPost, PathRetire, retire),
			}
			// A retirement is held to the rule of a promise.
			want := map[string]int{"GET " + PathBootstrap: tt.get, "POST " + PathBootstrap: tt.post, "POST " + PathWake: tt.wake, "POST " + PathRetire: tt.post}
			for req, o := range got {
				if o.status != want[req] {
					t.Errorf("%s: %d %q, want %d", req, o.status, o.body, want[req])
				}
				if o.status == refused && !strings.Contains(o.body, tt.why) {
					t.Errorf("%s refused with %q, which does not say %q", req, o.body, tt.why)
				}
			}
			// A refused request never reaches the node controller.
			promises, wakes := e.reached()
			if wantPromises := map[bool]int{true: 1}[tt.post == answered]; promises != wantPromises {
				t.Errorf("%d promises reached the node, want %d", promises, wantPromises)
			}
			if wantWakes := map[bool]int{true: 1}[tt.wake == woken]; wakes != wantWakes {
				t.Errorf("%d wake-ups reached the node, want %d", wakes, wantWakes)
			}
			// The node controller hears who asked for the retirement: it
			// keeps a promise to that node only.
			wantRetired := []netip.Addr(nil)
			if tt.post == answered {
				wantRetired = []netip.Addr{tt.from}
			}
			if got := e.retirements(); !slices.Equal(got, wantRetired) {
				t.Errorf("retirements reached the node from %v, want %v", got, wantRetired)
			}
		})
	}
}

// The agents' own client leaves from the node address WithSource gives,
// and reads a refusal as a RefusedError. From a host with many loopback
// addresses (or a multi-homed one) a request that did not pick its source
// would leave from another address (here 127.0.0.1, which the peer
// certificate does not name) and be refused.
func TestClientCallsFromItsNodeAddress(t *testing.T) {
	pki := newTestPKI(t)
	e := serve(t, node1, []string{node1.String(), node2.String()}, &pki.Peer, nil)
	port, _ := strconv.Atoi(e.addr[strings.LastIndex(e.addr, ":")+1:])
	c, err := NewClient(pki.Peer, port, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	from2 := WithSource(ctx, node2)
	if a, err := c.Promise(from2, node1, []string{node1.String(), node2.String()}); err != nil || len(a.Promised) != 2 {
		t.Errorf("a promise asked from node 2's address: %+v, %v", a, err)
	}
	if err := c.Wake(from2, node1); err != nil {
		t.Errorf("a wake-up from node 2's address: %v", err)
	}
	if d, err := c.Data(from2, node1); err != nil || d.Node != node1.String() || d.LastIndex != 120 || d.Commit != 118 || !d.HasData() {
		t.Errorf("node 1's data asked from node 2's address: %+v, %v", d, err)
	}
	for name, ctx := range map[string]context.Context{"an unlisted address": WithSource(ctx, unlisted), "no source address": ctx} {
		_, err := c.Promise(ctx, node1, []string{node1.String(), node2.String()})
		if !IsRefused(err) {
			t.Errorf("a promise asked from %s: %v, want a refusal", name, err)
		}
		if err := c.Wake(ctx, node1); !IsRefused(err) {
			t.Errorf("a wake-up from %s: %v, want a refusal", name, err)
		}
	}
	if promises, wakes := e.reached(); promises != 1 || wakes != 1 {
		t.Errorf("%d promises and %d wake-ups reached the node, want 1 and 1", promises, wakes)
	}
}

// A flood of refused requests writes one log line per RefusalLogEvery,
// which counts the ones left out.
func TestRefusalsAreLoggedAtABoundedRate(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	g := &Guard{Certs: true, Log: log, Now: func() time.Time { return now }}
	h := Handler(Endpoints{Answer: func() Answer { return Answer{List: []string{node1.String()}} }, Wake: func() {}}, g)
	flood := func(n int) {
		for range n {
			r, _ := http.NewRequest(http.MethodPost, PathWake, nil)
			r.RemoteAddr = "127.0.201.3:40000"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusForbidden {
				t.Fatalf("a request without a certificate got %d", w.Code)
			}
		}
	}
	flood(1000)
	now = now.Add(RefusalLogEvery)
	flood(1)
	mu.Lock()
	defer mu.Unlock()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("1001 refusals over %s logged %d lines, want 2:\n%s", RefusalLogEvery, len(lines), buf.String())
	}
	if got := lines[1]["notLogged"]; got != float64(999) {
		t.Errorf("the second line counts %v refusals left out, want 999", got)
	}
	if got := fmt.Sprint(lines[0]["reason"]); !strings.Contains(got, "no client certificate") {
		t.Errorf("the line gives the reason %v", got)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
