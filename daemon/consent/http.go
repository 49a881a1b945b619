package consent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlet/etcdlet/config"
)

// The agent peer endpoint's paths.
const (
	// PathBootstrap answers GET with this node's Answer, and a POST of a
	// list (Request) with its answer to a bootstrap of that list: a node
	// that agrees records its promise before it answers.
	PathBootstrap = "/etcdlet/v1/bootstrap"
	// PathWake takes a POST from another agent that changed membership in
	// a way this node should look at now (it was added as a learner), so
	// that it need not wait for its next pass.
	PathWake = "/etcdlet/v1/wake"
)

// maxAnswer bounds what is read of an answer.
const maxAnswer = 64 << 10

// Request asks a node to agree to a bootstrap of List.
type Request struct {
	List []string `json:"list"`
}

// Handler serves the agent peer endpoint: answer returns this node's
// current answer, promise its answer to a bootstrap of a list (recording
// the promise when it agrees), wake asks for a reconcile pass now (it
// must not block).
func Handler(answer func() Answer, promise func(list []string) Answer, wake func()) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathBootstrap, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer())
	})
	mux.HandleFunc("POST "+PathBootstrap, func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if err := json.NewDecoder(io.LimitReader(r.Body, maxAnswer)).Decode(&req); err != nil {
			http.Error(w, "want a JSON body {\"list\": [addresses]}: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(promise(req.List))
	})
	mux.HandleFunc("POST "+PathWake, func(w http.ResponseWriter, _ *http.Request) {
		wake()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// Server is the agent peer endpoint's HTTP server, with timeouts that a
// slow or hostile client cannot hold open.
func Server(h http.Handler, tlsConfig *tls.Config) *http.Server {
	return &http.Server{Handler: h, TLSConfig: tlsConfig,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
}

// ServerTLS is the peer endpoint's TLS: the member's peer certificate, and
// client certificates required and checked against the peer CA when one
// is configured. nil when peer TLS is off.
func ServerTLS(peer config.TLSFiles) (*tls.Config, error) {
	if peer.CertFile == "" {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: peer.CertFile, KeyFile: peer.KeyFile, TrustedCAFile: peer.CAFile, ClientCertAuth: peer.CAFile != ""}
	c, err := info.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("agent peer endpoint TLS (etcd.tls.peer): %w", err)
	}
	return c, nil
}

// Client asks other agents on their peer endpoints.
type Client struct {
	HTTP *http.Client
	// Scheme is https when peer TLS is on.
	Scheme string
	Port   int
}

// NewClient builds a client that presents this node's peer certificate
// and trusts the peer CA. timeout bounds each request.
func NewClient(peer config.TLSFiles, port int, timeout time.Duration) (*Client, error) {
	c := &Client{Scheme: "http", Port: port}
	transportConfig := &http.Transport{DialContext: (&net.Dialer{Timeout: timeout}).DialContext, MaxIdleConnsPerHost: 1,
		ResponseHeaderTimeout: timeout, IdleConnTimeout: time.Minute}
	if peer.CertFile != "" {
		info := transport.TLSInfo{CertFile: peer.CertFile, KeyFile: peer.KeyFile, TrustedCAFile: peer.CAFile}
		tlsConfig, err := info.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("agent peer client TLS (etcd.tls.peer): %w", err)
		}
		transportConfig.TLSClientConfig = tlsConfig
		c.Scheme = "https"
	}
	c.HTTP = &http.Client{Transport: transportConfig, Timeout: timeout}
	return c, nil
}

func (c *Client) url(node netip.Addr, path string) string {
	return c.Scheme + "://" + net.JoinHostPort(node.String(), strconv.Itoa(c.Port)) + path
}

// Ask asks one node for its answer, changing nothing there.
func (c *Client) Ask(ctx context.Context, node netip.Addr) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(node, PathBootstrap), nil)
	if err != nil {
		return Answer{}, err
	}
	return c.answer(req)
}

// Promise asks one node to agree to a bootstrap of list.
func (c *Client) Promise(ctx context.Context, node netip.Addr, list []string) (Answer, error) {
	body, err := json.Marshal(Request{List: list})
	if err != nil {
		return Answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(node, PathBootstrap), bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.answer(req)
}

func (c *Client) answer(req *http.Request) (Answer, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Answer{}, fmt.Errorf("agent peer endpoint answered %s", resp.Status)
	}
	var a Answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("read answer: %w", err)
	}
	return a, nil
}

// Wake asks one node's agent for a pass now.
func (c *Client) Wake(ctx context.Context, node netip.Addr) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(node, PathWake), nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("agent peer endpoint answered %s", resp.Status)
	}
	return nil
}
