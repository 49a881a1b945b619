package httpserve

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Only clients from the allowed networks get a connection that answers;
// any other is closed before it can send a byte that is read.
func TestAllowOnly(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.9.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := AllowOnly(inner, []netip.Prefix{netip.MustParsePrefix("127.0.9.2/32"), netip.MustParsePrefix("127.0.10.0/24")}, slog.New(slog.DiscardHandler))
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = c.Write([]byte("hello")) }()
		}
	}()
	for _, tc := range []struct {
		from    string
		allowed bool
	}{
		{"127.0.9.2", true},
		{"127.0.10.77", true},
		{"127.0.9.3", false},
		{"127.0.0.1", false},
	} {
		t.Run(tc.from, func(t *testing.T) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from)}, Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", inner.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, _ := io.ReadAll(c)
			if tc.allowed != (string(got) == "hello") {
				t.Errorf("a client from %s read %q (allowed: %t)", tc.from, got, tc.allowed)
			}
		})
	}
}
