// Package backupapi serves etcd-backup-restore's HTTP API on the node, so
// that etcd-druid's EtcdOpsTask controller (which POSTs to a member address
// on the backup port in externally managed mode) and any tool written for
// backup-restore drive etcdlet's snapshots. Routes, status codes and bodies
// are backup-restore's: /snapshot/full[?final=B] and /snapshot/delta answer
// 200 with the Snapshot JSON (a delta without events: exactly "null"),
// 400 for an unparsable final, 500 when the snapshot fails, all error
// bodies empty (the reason goes into the X-Etcdlet-Error header and the
// log); /snapshot/latest answers {"fullSnapshot":…,"deltaSnapshots":…};
// /healthz answers {"health":true|false} with 200 or 503. Like
// backup-restore, no route checks the method.
package backupapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// The kinds of snapshot the routes order (the snapshot task's kind
// parameter).
const (
	kindFull  = "full"
	kindDelta = "delta"
)

// Backend does the work behind the routes.
type Backend interface {
	// TakeSnapshot runs a snapshot task (kind full or delta) and returns
	// its output: the Snapshot JSON, or nil for a delta without events.
	TakeSnapshot(ctx context.Context, kind string, final bool) (json.RawMessage, error)
	// Latest lists the newest full snapshot and the deltas after it.
	Latest(ctx context.Context) (*snapshot.Snapshot, []snapshot.Snapshot, error)
	// Healthy reports whether the local member serves.
	Healthy(ctx context.Context) bool
}

// BusyError is a snapshot that cannot start now (another task holds the
// task slot, or a scheduled task waits for it): 503 with Retry-After.
type BusyError struct {
	Reason     string
	RetryAfter time.Duration
}

func (e *BusyError) Error() string { return e.Reason }

// Handler serves the routes.
func Handler(b Backend, log *slog.Logger, tlsOn bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/snapshot/full", func(w http.ResponseWriter, r *http.Request) {
		final := false
		if v := r.URL.Query().Get("final"); v != "" {
			var err error
			if final, err = strconv.ParseBool(v); err != nil {
				fail(w, log, r, http.StatusBadRequest, "final="+v+": not a boolean")
				return
			}
		}
		snap(w, r, b, log, kindFull, final)
	})
	mux.HandleFunc("/snapshot/delta", func(w http.ResponseWriter, r *http.Request) {
		snap(w, r, b, log, kindDelta, false)
	})
	mux.HandleFunc("/snapshot/latest", func(w http.ResponseWriter, r *http.Request) {
		full, deltas, err := b.Latest(r.Context())
		if err != nil {
			fail(w, log, r, http.StatusInternalServerError, err.Error())
			return
		}
		body, err := json.Marshal(struct {
			Full   *snapshot.Snapshot  `json:"fullSnapshot"`
			Deltas []snapshot.Snapshot `json:"deltaSnapshots"`
		}{full, deltas})
		if err != nil {
			fail(w, log, r, http.StatusInternalServerError, err.Error())
			return
		}
		write(w, http.StatusOK, body)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		healthy := b.Healthy(ctx)
		code := http.StatusOK
		if !healthy {
			code = http.StatusServiceUnavailable
		}
		body, _ := json.Marshal(struct {
			Health bool `json:"health"`
		}{healthy})
		write(w, code, body)
	})
	if !tlsOn {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		mux.ServeHTTP(w, r)
	})
}

func snap(w http.ResponseWriter, r *http.Request, b Backend, log *slog.Logger, kind string, final bool) {
	out, err := b.TakeSnapshot(r.Context(), kind, final)
	var busy *BusyError
	if errors.As(err, &busy) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(busy.RetryAfter.Round(time.Second).Seconds()))))
		fail(w, log, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	if err != nil {
		fail(w, log, r, http.StatusInternalServerError, err.Error())
		return
	}
	if len(out) == 0 {
		write(w, http.StatusOK, []byte("null"))
		return
	}
	// The task keeps its output as JSON; backup-restore writes
	// json.Marshal's compact form.
	var compact bytes.Buffer
	if err := json.Compact(&compact, out); err != nil {
		fail(w, log, r, http.StatusInternalServerError, "the task's output is not JSON: "+err.Error())
		return
	}
	write(w, http.StatusOK, compact.Bytes())
}

func write(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// fail answers with backup-restore's empty error body; the reason goes to
// a header and the log, where an operator with curl finds it.
func fail(w http.ResponseWriter, log *slog.Logger, r *http.Request, code int, reason string) {
	log.Warn("backup-restore API request failed", "path", r.URL.Path, "remote", r.RemoteAddr, "status", code, "error", reason)
	w.Header().Set("X-Etcdlet-Error", strings.ReplaceAll(reason, "\n", " "))
	w.WriteHeader(code)
}

// Server wraps the handler with backup-restore's header timeout; a
// snapshot request runs as long as its task (bounded by the task's
// timeout), so there is no write timeout.
func Server(h http.Handler, tlsConfig *tls.Config) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute, TLSConfig: tlsConfig}
}
