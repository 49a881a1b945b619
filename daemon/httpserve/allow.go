package httpserve

import (
	"log/slog"
	"net"
	"net/netip"
)

// AllowOnly wraps l so that it hands out only connections from addresses
// in nets. Any other is closed at once, before TLS or HTTP: a caller that
// is not allowed gets nothing to talk to. The refusals are logged at
// debug level, so that a scanner cannot flood the journal.
func AllowOnly(l net.Listener, nets []netip.Prefix, log *slog.Logger) net.Listener {
	return &allowListener{Listener: l, nets: nets, log: log}
}

type allowListener struct {
	net.Listener
	nets []netip.Prefix
	log  *slog.Logger
}

func (l *allowListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.allowed(c.RemoteAddr()) {
			return c, nil
		}
		l.log.Debug("connection refused: the address is not among the allowed clients", "remote", c.RemoteAddr().String())
		c.Close()
	}
}

func (l *allowListener) allowed(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap() // an IPv4 client of a dual-stack listener
	for _, n := range l.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
