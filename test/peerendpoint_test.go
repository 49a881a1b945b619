package test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/test/harness"
)

// refusedMsg is the log line of a caller the agent peer endpoint refused.
const refusedMsg = "agent peer endpoint refused a caller"

// The security review: any certificate of the peer CA, from any address,
// could send unlimited wake-ups, each a full reconcile pass (3,400-5,300
// passes in 5 s against 5 of an idle agent). Now a wake-up is taken only
// from a listed node with a peer certificate for its address, and wake-ups
// are coalesced: a flood from such a node costs at most one pass per
// consent.WakeInterval. A client-only certificate of the same CA is
// refused, and the refusals are logged at a bounded rate.
func TestPeerWakeFloodIsCoalesced(t *testing.T) {
	t.Parallel()
	c, _ := startCluster(t, netPeerWake, 2)
	pki := c.Opts.TLS
	const workers = 4
	// Node 2's own peer certificate, from node 2's address: a listed peer.
	peer := peerClient(t, c.IP(2), pki.ServerCert, pki.ServerKey, pki.CA, workers)
	wakeURL := peerURL(c, 1, consent.PathWake)
	harness.Eventually(t, convergeTimeout, "agent 1's peer endpoint takes a wake-up from node 2", func() error {
		status, body, err := peerDo(peer, http.MethodPost, wakeURL, nil)
		if err != nil {
			return err
		}
		if status != http.StatusNoContent {
			return errorf("wake-up from node 2: %d %s", status, body)
		}
		return nil
	})

	// A client-only certificate of the CA (kubeadm's apiserver-etcd-client
	// and healthcheck-client have no IP SAN), from node 2's address.
	firstRefusal := time.Now()
	clientOnly := peerClient(t, c.IP(2), pki.ClientCert, pki.ClientKey, pki.CA, 1)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, consent.PathBootstrap}, {http.MethodPost, consent.PathBootstrap}, {http.MethodPost, consent.PathWake},
	} {
		status, body, err := peerDo(clientOnly, r.method, peerURL(c, 1, r.path), []byte(`{"list":[]}`))
		if err != nil {
			t.Fatalf("%s %s with a client-only certificate: %v", r.method, r.path, err)
		}
		if status != http.StatusForbidden || !strings.Contains(body, "no IP SAN for "+c.IP(2)) {
			t.Errorf("%s %s with a client-only certificate: %d %q, want 403 naming the missing IP SAN", r.method, r.path, status, body)
		}
	}

	// The flood, from the listed peer. Between the two reads of the pass
	// counter, passes come from the flood's wake-ups, at most one per
	// WakeInterval and one signalled before the first read still waiting
	// for the loop; from the timer, at most one per reconcile interval
	// (any pass puts the timer back by an interval); and from one pass
	// running at the first read.
	agent := c.Agent(1)
	const flood = 5 * time.Second
	before := metric(t, agent, "etcdlet_reconcile_passes_total")
	start := time.Now()
	sent, statuses := floodPost(peer, wakeURL, flood, workers)
	after := metric(t, agent, "etcdlet_reconcile_passes_total")
	window := time.Since(start)
	passes := int(after - before)
	most := int(window/consent.WakeInterval) + 1 + 1 + int(window/c.Opts.ReconcileInterval) + 1 + 1
	t.Logf("%d wake-ups in %s (statuses %v) ran %d passes; the bound is %d", sent, window.Round(time.Millisecond), statuses, passes, most)
	if sent < 100 {
		t.Errorf("the flood sent only %d wake-ups (%v)", sent, statuses)
	}
	if statuses[http.StatusNoContent] != sent {
		t.Errorf("the listed peer's wake-ups were not all taken: %v", statuses)
	}
	if passes > most {
		t.Errorf("%d wake-ups in %s ran %d reconcile passes, want at most %d (one per %s, plus the timer's)", sent, window, passes, most, consent.WakeInterval)
	}

	// A flood of refused requests: the log stays bounded.
	refused, statuses := floodPost(clientOnly, wakeURL, 2*time.Second, 1)
	if statuses[http.StatusForbidden] != refused {
		t.Errorf("client-only certificate flood: %v", statuses)
	}
	lines := agent.CountLog(refusedMsg, nil)
	if most := int(time.Since(firstRefusal)/consent.RefusalLogEvery) + 1; lines > most || lines == 0 {
		t.Errorf("%d refusals logged %d lines, want 1 to %d (one per %s)", refused+3, lines, most, consent.RefusalLogEvery)
	}
	if !agent.Running() {
		t.Fatalf("agent 1 died:\n%s", harness.Tail(agent.Log, 30))
	}
	// Agent 2 was only ever called by agent 1, from its node address.
	if n := c.Agent(2).CountLog(refusedMsg, nil); n != 0 {
		t.Errorf("agent 2 refused a caller %d times: a listed peer's call left from another address", n)
	}
}

// The forged promise of the security review: with a listed node silent
// (its host not up yet), a caller with any certificate of the peer CA
// made the other node promise a list with an address that never answers.
// That node then refused the real list, and could not release the promise
// (the silent address never confirms it abandoned the bootstrap): the
// cluster never formed. Now a promise is asked for only by a listed node
// with a peer certificate for its address; the forgeries are refused, no
// promise is recorded, and the cluster forms once the silent node is up.
func TestForgedPromiseCannotKeepAClusterFromForming(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netForgedPromise})
	c.WriteMembers(1, 2)
	c.WriteConfig(1)
	c.Start(2)
	pki := c.Opts.TLS

	// What node 2 answers node 1 (a listed node, its peer certificate).
	reader := peerClient(t, c.IP(1), pki.ServerCert, pki.ServerKey, pki.CA, 1)
	answer := func() (consent.Answer, error) {
		status, body, err := peerDo(reader, http.MethodGet, peerURL(c, 2, consent.PathBootstrap), nil)
		if err != nil {
			return consent.Answer{}, err
		}
		if status != http.StatusOK {
			return consent.Answer{}, errorf("%d %s", status, body)
		}
		var a consent.Answer
		return a, json.Unmarshal([]byte(body), &a)
	}
	harness.Eventually(t, convergeTimeout, "node 2 answers that it is fresh", func() error {
		a, err := answer()
		if err == nil && a.Phase != consent.Fresh {
			err = errorf("node 2 answers %s: %s", a.Phase, a.Detail)
		}
		return err
	})

	// The forged list: node 2 and an address that never answers.
	forged, _ := json.Marshal(consent.Request{List: []string{c.IP(2), c.IP(7)}})
	attackers := []struct {
		name, from, cert, key, why string
	}{
		{"a client-only certificate of the CA from the silent node's address", c.IP(1), pki.ClientCert, pki.ClientKey, "no IP SAN for " + c.IP(1)},
		{"a client-only certificate of the CA from an unlisted address", c.IP(7), pki.ClientCert, pki.ClientKey, "no IP SAN for " + c.IP(7)},
		{"a peer certificate from an address the list does not name", c.IP(7), pki.ServerCert, pki.ServerKey, "only a node of this node's member list"},
		{"a peer certificate from 127.0.0.1, which kubeadm's peer certificates name too", "127.0.0.1", pki.ServerCert, pki.ServerKey, "only a node of this node's member list"},
	}
	for _, a := range attackers {
		status, body, err := peerDo(peerClient(t, a.from, a.cert, a.key, pki.CA, 1), http.MethodPost, peerURL(c, 2, consent.PathBootstrap), forged)
		switch {
		case err != nil:
			t.Errorf("%s: %v", a.name, err)
		case status != http.StatusForbidden || !strings.Contains(body, a.why):
			t.Errorf("%s asked node 2 for a promise of the forged list: %d %q, want 403 saying %q", a.name, status, body, a.why)
		}
	}
	if a, err := answer(); err != nil || len(a.Promised) != 0 || a.Phase != consent.Fresh {
		t.Errorf("after the forgeries node 2 answers %s with the promise %v (%v), want fresh without a promise", a.Phase, a.Promised, err)
	}

	// Node 1's host comes up: the two form the cluster of the real list.
	c.Start(1)
	c.Wait(c.Client(), convergeTimeout, 1, 2)
	// Agent 1 was only ever asked by agent 2, from its node address.
	if n := c.Agent(1).CountLog(refusedMsg, nil); n != 0 {
		t.Errorf("agent 1 refused a caller %d times: a listed peer's call left from another address", n)
	}
}

// peerClient is another host's client of the agent peer endpoints: it
// dials from the address from, presents the certificate cert (key),
// trusts the cluster's CA, and keeps up to conns connections.
func peerClient(t *testing.T, from, cert, key, ca string, conns int) *http.Client {
	t.Helper()
	tlsConfig, err := transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: ca}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	src := net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(from), 0))
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second, LocalAddr: src}).DialContext,
		TLSClientConfig: tlsConfig, MaxIdleConnsPerHost: conns}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// peerURL is agent n's peer endpoint URL of path.
func peerURL(c *harness.Cluster, n int, path string) string {
	return "https://" + net.JoinHostPort(c.IP(n), strconv.Itoa(c.Ports.AgentPeer)) + path
}

// peerDo sends one request and returns the status and body.
func peerDo(hc *http.Client, method, url string, body []byte) (int, string, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), err
}

// floodPost POSTs to url from workers goroutines for d, and returns how
// many requests were answered and with which statuses (0: an error).
func floodPost(hc *http.Client, url string, d time.Duration, workers int) (int, map[int]int) {
	var (
		mu       sync.Mutex
		sent     int
		statuses = map[int]int{}
		wg       sync.WaitGroup
	)
	end := time.Now().Add(d)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				status, _, _ := peerDo(hc, http.MethodPost, url, nil)
				mu.Lock()
				statuses[status]++
				if status != 0 {
					sent++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sent, statuses
}

// metric reads one of the agent's metrics, failing the test without it.
func metric(t *testing.T, a *harness.Agent, name string) float64 {
	t.Helper()
	v, err := a.Metric(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}
