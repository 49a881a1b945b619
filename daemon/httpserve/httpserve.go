// Package httpserve serves etcdlet's own HTTP listeners: the agent
// listener, the agent peer endpoint and etcd-backup-restore's API.
//
// They serve HTTP/1.1 only. None of them needs HTTP/2 (every exchange is
// one small request, or one long one for a snapshot), and HTTP/2's server
// is a large attack surface for a node agent that also runs etcd: header
// compression state shared between a connection's reader and writer let
// an unauthenticated client crash the process with go1.26's HTTP/2 server
// (concurrent map writes in hpack). A client that offers h2 in ALPN is
// answered with http/1.1; one that sends HTTP/2's preface anyway (h2c
// with prior knowledge) gets an HTTP/1.1 error and a closed connection.
package httpserve

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// HTTP1Only makes srv serve HTTP/1.1 only, over TLS and in plaintext:
// HTTP/2 is off, and its TLS configuration (a copy) offers only http/1.1
// in ALPN, whatever the configuration it was built from offered (etcd's
// transport package offers h2).
func HTTP1Only(srv *http.Server) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	srv.Protocols = &p
	if srv.TLSConfig != nil {
		c := srv.TLSConfig.Clone()
		c.NextProtos = []string{"http/1.1"}
		srv.TLSConfig = c
	}
	return srv
}

// Serve serves srv on l, HTTP/1.1 only (HTTP1Only), over TLS when srv has
// a TLS configuration, in a goroutine of wg until srv is shut down. An
// error other than the shutdown is logged with what the listener is.
func Serve(wg *sync.WaitGroup, log *slog.Logger, what string, srv *http.Server, l net.Listener) {
	HTTP1Only(srv)
	if srv.ErrorLog == nil {
		// The server's own complaints (a failed TLS handshake, a malformed
		// request) go to the agent's log, at debug: a scanner must not
		// flood the journal.
		srv.ErrorLog = slog.NewLogLogger(log.With("listener", what).Handler(), slog.LevelDebug)
	}
	wg.Go(func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(l, "", "")
		} else {
			err = srv.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" stopped", "error", err)
		}
	})
}
