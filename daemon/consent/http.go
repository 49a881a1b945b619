package consent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
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

// Endpoints are what the agent peer endpoint serves: Answer returns this
// node's current answer, Promise its answer to a bootstrap of a list
// (recording the promise when it agrees), Wake asks for a reconcile pass
// now (it must not block), Data what the member's data holds, Retire its
// answer to a recovering node (recording the promise when it gives it).
type Endpoints struct {
	Answer  func() Answer
	Promise func(list []string) Answer
	Wake    func()
	Data    func(context.Context) DataReport
	Retire  func(caller netip.Addr, req RetireRequest) RetireAnswer
}

// Handler serves the agent peer endpoint. guard admits the callers first:
// a promise, a retirement and a wake-up only from a node of the list in
// force here (Answer's List).
func Handler(e Endpoints, guard *Guard) http.Handler {
	answer, promise, wake := e.Answer, e.Promise, e.Wake
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathData, dataHandler(e.Data))
	mux.HandleFunc("POST "+PathRetire, retireHandler(e.Retire))
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only a GET reads; anything else, even a request the mux will
		// not route, is held to the stricter rule.
		write := r.Method != http.MethodGet && r.Method != http.MethodHead
		if err := guard.Admit(r, write, answer().List); err != nil {
			guard.refuse(w, r, err)
			return
		}
		mux.ServeHTTP(w, r)
	})
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
// and trusts the peer CA. timeout bounds each request. A request leaves
// from the address WithSource puts in its context: the other agent takes
// the caller for the node at the address it calls from.
func NewClient(peer config.TLSFiles, port int, timeout time.Duration) (*Client, error) {
	c := &Client{Scheme: "http", Port: port}
	// No connection is kept for a next request: each one is dialled from
	// its own request's source address, and asks are rare (a few per pass
	// while a bootstrap is pending, a wake-up per learner added).
	transportConfig := &http.Transport{DialContext: dialFromSource(timeout), DisableKeepAlives: true,
		ResponseHeaderTimeout: timeout}
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

type sourceKey struct{}

// WithSource makes requests made with ctx leave from addr, this node's
// own address. A host with several addresses (a multi-homed host, or
// loopback addresses of test clusters) would otherwise pick one by its
// routes, and the other agent would refuse a promise or a wake-up from
// an address that is not listed, or that the certificate does not name.
func WithSource(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, sourceKey{}, addr)
}

// SourceOf is the source address WithSource put in ctx, if any.
func SourceOf(ctx context.Context) (netip.Addr, bool) {
	src, ok := ctx.Value(sourceKey{}).(netip.Addr)
	return src, ok && src.IsValid()
}

// dialFromSource dials from the context's source address, when it has one
// (a failed dial names it: "dial tcp 192.0.2.1:0->192.0.2.2:2382").
func dialFromSource(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		if src, ok := SourceOf(ctx); ok {
			d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
		}
		return d.DialContext(ctx, network, addr)
	}
}

// RefusedError is another agent's refusal to answer this node (403): it
// does not take the caller for a listed peer (docs/membership.md). It is
// no consent, and never silence: an operator's approval, which outweighs
// silence, does not outweigh it.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "its agent refuses this node: " + e.Reason }

// IsRefused reports whether err is another agent's refusal to answer.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// statusError is the error of an unexpected answer: a RefusedError for a
// 403, with the reason the agent gave.
func statusError(resp *http.Response) error {
	if resp.StatusCode == http.StatusForbidden {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxReason))
		return &RefusedError{Reason: strings.TrimSpace(strings.TrimPrefix(string(body), "refused: "))}
	}
	return fmt.Errorf("agent peer endpoint answered %s", resp.Status)
}

// maxReason bounds what is read of a refusal's reason.
const maxReason = 1 << 10

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
	req, err := c.post(ctx, node, PathBootstrap, Request{List: list})
	if err != nil {
		return Answer{}, err
	}
	return c.answer(req)
}

func (c *Client) answer(req *http.Request) (Answer, error) {
	return decodeAnswer[Answer](c, req, "answer")
}

// decodeAnswer sends req and decodes the JSON answer of another agent; what names
// it in an error.
func decodeAnswer[T any](c *Client, req *http.Request, what string) (T, error) {
	var v T
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, statusError(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&v); err != nil {
		return v, fmt.Errorf("read the %s: %w", what, err)
	}
	return v, nil
}

// post is a POST of body as JSON to path on node.
func (c *Client) post(ctx context.Context, node netip.Addr, path string, body any) (*http.Request, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(node, path), bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
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
	if resp.StatusCode != http.StatusNoContent {
		return statusError(resp)
	}
	return nil
}
