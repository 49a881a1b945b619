package consent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// RefusalLogEvery bounds the log of refused callers to one line per
// interval: a misconfigured peer asks again on every pass (5 s by
// default), an attacker as fast as it can, and neither may flood the
// journal. The line names the caller refused first and counts those left
// out since the previous line (at most 360 lines an hour).
const RefusalLogEvery = 10 * time.Second

// Guard decides who may call the agent peer endpoint. Its model is
// etcd's peer listener, which takes a caller as the peer at the address
// it calls from only when its client certificate, signed by the peer CA,
// is valid for that address (client/pkg/transport checkSAN, unless
// --peer-skip-client-san-verification). The guard is stricter in two
// ways:
//
//   - a certificate must have an IP SAN for the caller's address. etcd
//     accepts a certificate without any SAN (a client-only certificate of
//     the same CA, such as kubeadm's apiserver-etcd-client and
//     healthcheck-client), and matches DNS SANs through a reverse lookup
//     that whoever runs the resolver controls; etcdlet's members are IP
//     addresses.
//   - what changes this node's state or costs it a pass (a promise, a
//     wake-up) is taken only from a node of the list in force here. A read
//     of the answer is open to every authenticated peer, as etcd's peer
//     listener serves its member list: a node that holds a promise asks
//     the nodes of the promised list whether they abandoned it, and those
//     may read a later list that no longer names it (docs/membership.md).
//
// Without client certificates (plaintext on loopback or with
// etcd.insecure, or peer TLS without a CA) only the address is checked:
// anyone on the host can call from a listed loopback address, and with
// etcd.insecure anyone who can send from a listed address.
// docs/membership.md says what such a caller can and cannot do.
type Guard struct {
	// Certs says the endpoint requires client certificates signed by the
	// peer CA (ServerTLS with a caFile).
	Certs bool
	// Log hears of refused callers, at most once per RefusalLogEvery.
	Log *slog.Logger
	// Now is the clock of the log's rate limit; time.Now when nil.
	Now func() time.Time

	mu         sync.Mutex
	nextLog    time.Time // no refusal is logged before this
	suppressed int       // refusals left out of the log since the last line
}

// NewGuard is the guard of an endpoint served with serverTLS (nil in
// plaintext): certificates are checked when it requires them.
func NewGuard(serverTLS *tls.Config, log *slog.Logger) *Guard {
	return &Guard{Certs: serverTLS != nil && serverTLS.ClientAuth == tls.RequireAndVerifyClientCert, Log: log}
}

// The refusals of a caller that may not ask for a promise or a wake-up.
var (
	errNotListed = errors.New("only a node of this node's member list may ask for a promise or a wake-up")
	errNoList    = errors.New("this node has no member list in force yet, so no node may ask it for a promise or a wake-up")
)

// Admit returns why the caller of r is refused, nil when it is admitted.
// write says the request changes this node's state or costs it a pass
// (a promise, a wake-up); listed is the member list in force on this node
// (canonical addresses, as Answer.List has them).
func (g *Guard) Admit(r *http.Request, write bool, listed []string) error {
	caller, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return fmt.Errorf("cannot tell the caller's address from %q: %w", r.RemoteAddr, err)
	}
	addr := caller.Addr().Unmap().WithZone("")
	if g.Certs {
		if err := certifies(r.TLS, addr); err != nil {
			return err
		}
	}
	switch {
	case !write:
	case len(listed) == 0:
		return errNoList
	case !isListed(listed, addr):
		return errNotListed
	}
	return nil
}

// certifies reports why the connection's client certificate does not
// speak for the peer at addr.
func certifies(state *tls.ConnectionState, addr netip.Addr) error {
	// The TLS configuration requires and verifies the certificate; a
	// connection without a verified chain is not one it accepted.
	if state == nil || len(state.PeerCertificates) == 0 || len(state.VerifiedChains) == 0 {
		return errors.New("no client certificate signed by the peer CA")
	}
	leaf := state.PeerCertificates[0]
	if !hasIPSAN(leaf, addr) {
		return fmt.Errorf("the client certificate (subject %q) has no IP SAN for %s, the address it calls from: etcd would not take it as the peer at that address", leaf.Subject.CommonName, addr)
	}
	return nil
}

// hasIPSAN reports whether cert names addr among its IP SANs.
func hasIPSAN(cert *x509.Certificate, addr netip.Addr) bool {
	for _, ip := range cert.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok && a.Unmap() == addr {
			return true
		}
	}
	return false
}

func isListed(listed []string, addr netip.Addr) bool {
	for _, s := range listed {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap().WithZone("") == addr {
			return true
		}
	}
	return false
}

// refuse answers a refused caller 403 with why, and logs it within the
// rate limit. The asking agent takes it as no consent.
func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, why error) {
	g.logRefusal(r, why)
	http.Error(w, "refused: "+why.Error(), http.StatusForbidden)
}

func (g *Guard) logRefusal(r *http.Request, why error) {
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	g.mu.Lock()
	t := now()
	if t.Before(g.nextLog) {
		g.suppressed++
		g.mu.Unlock()
		return
	}
	suppressed := g.suppressed
	g.nextLog, g.suppressed = t.Add(RefusalLogEvery), 0
	g.mu.Unlock()
	if g.Log != nil {
		g.Log.Warn("agent peer endpoint refused a caller", "caller", r.RemoteAddr, "method", r.Method, "path", r.URL.Path,
			"reason", why.Error(), "notLogged", suppressed, "logEvery", RefusalLogEvery.String())
	}
}
