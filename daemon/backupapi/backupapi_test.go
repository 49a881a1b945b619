package backupapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// backend answers as the test says; the real one (the agent's task
// runner) is driven by the end-to-end tests and by etcd-druid's own
// controller in test/druid_opstask_test.go.
type backend struct {
	out     json.RawMessage
	err     error
	healthy bool
	kinds   []string
}

func (b *backend) TakeSnapshot(_ context.Context, kind string, final bool) (json.RawMessage, error) {
	if final {
		kind += "+final"
	}
	b.kinds = append(b.kinds, kind)
	return b.out, b.err
}

func (b *backend) Latest(context.Context) (*snapshot.Snapshot, []snapshot.Snapshot, error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	return nil, nil, nil
}

func (b *backend) Healthy(context.Context) bool { return b.healthy }

// The reference's example Snapshot, as backup-restore marshals it.
const fullJSON = `{"createdOn":"2025-11-24T16:00:00.123456789Z","immutabilityExpriyTime":"0001-01-01T00:00:00Z","versionID":null,"kind":"Full","snapDir":"","snapName":"Full-00000000-00000042-1764000000.gz.final","prefix":"","compressionSuffix":".gz","startRevision":0,"lastRevision":42,"isChunk":false,"isFinal":true}`

func TestRoutes(t *testing.T) {
	indented := json.RawMessage("{\n  \"createdOn\": \"2025-11-24T16:00:00.123456789Z\",\n  \"immutabilityExpriyTime\": \"0001-01-01T00:00:00Z\",\n  \"versionID\": null,\n  \"kind\": \"Full\",\n  \"snapDir\": \"\",\n  \"snapName\": \"Full-00000000-00000042-1764000000.gz.final\",\n  \"prefix\": \"\",\n  \"compressionSuffix\": \".gz\",\n  \"startRevision\": 0,\n  \"lastRevision\": 42,\n  \"isChunk\": false,\n  \"isFinal\": true\n}")
	tests := []struct {
		name     string
		method   string
		path     string
		b        backend
		wantCode int
		wantBody string
		wantKind string
	}{
		{"full, final, any method; the stored JSON compacted", http.MethodGet, "/snapshot/full?final=true", backend{out: indented}, 200, fullJSON, "full+final"},
		{"final must be a boolean", http.MethodPost, "/snapshot/full?final=maybe", backend{}, 400, "", ""},
		{"a failed snapshot is 500 with an empty body", http.MethodPost, "/snapshot/full", backend{err: errors.New("no quorum")}, 500, "", "full"},
		{"a delta without events is exactly null", http.MethodPost, "/snapshot/delta", backend{}, 200, "null", "delta"},
		{"busy: 503 with a time to retry", http.MethodPost, "/snapshot/delta", backend{err: &BusyError{Reason: "a scheduled task waits for the task slot", RetryAfter: 2500 * time.Millisecond}}, 503, "", "delta"},
		{"latest with nothing stored", http.MethodGet, "/snapshot/latest", backend{}, 200, `{"fullSnapshot":null,"deltaSnapshots":null}`, ""},
		{"latest with a store error", http.MethodGet, "/snapshot/latest", backend{err: errors.New("403")}, 500, "", ""},
		{"healthy", http.MethodGet, "/healthz", backend{healthy: true}, 200, `{"health":true}`, ""},
		{"unhealthy", http.MethodGet, "/healthz", backend{}, 503, `{"health":false}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			srv := httptest.NewServer(Handler(&b, slog.New(slog.DiscardHandler), false))
			defer srv.Close()
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode || string(body) != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
			if tc.wantCode >= 400 && tc.wantBody == "" && resp.Header.Get("X-Etcdlet-Error") == "" {
				t.Error("an error answer must say why in X-Etcdlet-Error")
			}
			if tc.wantCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "3" && tc.path != "/healthz" {
				t.Errorf("Retry-After %q, want 3 (seconds, rounded)", resp.Header.Get("Retry-After"))
			}
			if tc.wantKind != "" && (len(b.kinds) != 1 || b.kinds[0] != tc.wantKind) {
				t.Errorf("snapshots taken %v, want one %s", b.kinds, tc.wantKind)
			}
		})
	}
}

func TestTLSHeaders(t *testing.T) {
	srv := httptest.NewTLSServer(Handler(&backend{healthy: true}, slog.New(slog.DiscardHandler), true))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Strict-Transport-Security") != "max-age=31536000" || resp.Header.Get("Content-Security-Policy") != "default-src 'self'" {
		t.Errorf("headers %v, want backup-restore's HSTS and CSP", resp.Header)
	}
}
