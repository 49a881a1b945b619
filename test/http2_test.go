package test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/etcdlet/etcdlet/test/harness"
)

// The attack of the security review: an HTTP/2 client that sends requests
// while it keeps changing SETTINGS_HEADER_TABLE_SIZE crashed the agent
// (and the etcd member it runs) through a race in go1.26's HTTP/2 server.
// etcdlet now builds with a fixed toolchain and its own listeners serve
// HTTP/1.1 only: every listener answers an h2 offer with http/1.1, and the
// flood against each of them leaves the agent alive and answering.
func TestHTTP2FloodLeavesTheAgentAlive(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netHTTP2})
	pki := c.Opts.TLS
	apiPort := freeLoopbackPort(t)
	c.Opts.AgentConfig = fmt.Sprintf("  listenTLS: {certFile: %s, keyFile: %s, caFile: %s}\n", pki.ServerCert, pki.ServerKey, pki.CA)
	c.Opts.Extra = fmt.Sprintf("backup:\n  store: {provider: local, directory: %s}\n  api: {port: %d, tls: {certFile: %s, keyFile: %s}}\n",
		t.TempDir(), apiPort, pki.ServerCert, pki.ServerKey)
	c.WriteMembers(1)
	agent := c.Start(1)
	c.Wait(c.Client(), convergeTimeout, 1)

	withCert, err := pki.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	anonymous := &tls.Config{RootCAs: withCert.RootCAs}
	// The peer endpoint answers only a peer certificate valid for the
	// address it calls from (the test cluster's names 127.0.0.1 too).
	asPeer, err := transport.TLSInfo{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, TrustedCAFile: pki.CA}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	listeners := []struct {
		name, addr, path string
		tls              *tls.Config
	}{
		{"backup-restore API", net.JoinHostPort(c.IP(1), strconv.Itoa(apiPort)), "/healthz", anonymous},
		{"agent listener", net.JoinHostPort(c.LocalIP(1), strconv.Itoa(c.Ports.Agent)), "/healthz", withCert},
		{"agent peer endpoint", net.JoinHostPort(c.IP(1), strconv.Itoa(c.Ports.AgentPeer)), "/etcdlet/v1/bootstrap", asPeer},
	}
	// The peer endpoint opens once the node address is known.
	harness.Eventually(t, convergeTimeout, "every listener answers over HTTP/1.1", func() error {
		for _, l := range listeners {
			if err := getHTTP1(l.addr, l.path, l.tls); err != nil {
				return fmt.Errorf("%s: %w", l.name, err)
			}
		}
		return nil
	})

	// The attack, two connections at a time against every listener.
	const flood = 5 * time.Second
	type outcome struct{ conns, h2 int }
	results := make([]outcome, 2*len(listeners))
	var wg sync.WaitGroup
	for i := range results {
		l := listeners[i%len(listeners)]
		wg.Go(func() {
			conns, h2 := h2Flood(l.addr, l.path, l.tls, flood)
			results[i] = outcome{conns, h2}
		})
	}
	wg.Wait()

	for i, r := range results {
		l := listeners[i%len(listeners)]
		if r.conns == 0 {
			t.Errorf("%s: the flood never connected", l.name)
		}
		if r.h2 != 0 {
			t.Errorf("%s agreed to HTTP/2 on %d of %d connections", l.name, r.h2, r.conns)
		}
	}
	if !agent.Running() {
		t.Fatalf("the agent died under the flood:\n%s", harness.Tail(agent.Log, 30))
	}
	for _, l := range listeners {
		if err := getHTTP1(l.addr, l.path, l.tls); err != nil {
			t.Errorf("%s after the flood: %v", l.name, err)
		}
	}
}

// getHTTP1 gets path from addr over https, HTTP/1.1, and wants a 200.
func getHTTP1(addr, path string, cfg *tls.Config) error {
	var p http.Protocols
	p.SetHTTP1(true)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: &p, TLSClientConfig: cfg.Clone()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + addr + path)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// h2Flood plays the attack against addr for d: connection after
// connection, each offering h2 in ALPN and then speaking HTTP/2 whatever
// was negotiated: the preface, and GET path requests, each after a
// SETTINGS frame with a new header table size. It returns how many
// connections it made and on how many the server agreed to HTTP/2.
func h2Flood(addr, path string, cfg *tls.Config, d time.Duration) (conns, h2 int) {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			time.Sleep(50 * time.Millisecond) // a refused dial: the next try, until the end
			continue
		}
		conns++
		if conn.ConnectionState().NegotiatedProtocol == "h2" {
			h2++
		}
		until := time.Now().Add(time.Second)
		if until.After(end) {
			until = end
		}
		floodConn(conn, addr, path, until)
		conn.Close()
	}
	return conns, h2
}

// floodConn sends the attack's frames on one connection until until or the
// connection fails, reading (and acknowledging) what the server sends.
func floodConn(conn net.Conn, authority, path string, until time.Time) {
	_ = conn.SetDeadline(until)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return
	}
	fr := http2.NewFramer(conn, conn)
	var mu sync.Mutex // one writer of frames at a time
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				mu.Lock()
				_ = fr.WriteSettingsAck()
				mu.Unlock()
			}
		}
	}()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for stream := uint32(1); time.Now().Before(until) && stream < 1<<20; stream += 2 {
		block.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", path},
			{"x-pad", strconv.Itoa(rand.IntN(1 << 30))}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		mu.Lock()
		err := fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: uint32(rand.IntN(4096))})
		if err == nil {
			err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
		}
		mu.Unlock()
		if err != nil {
			return
		}
	}
}
