package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestZapLoggerWritesIntoSlog(t *testing.T) {
	var buf bytes.Buffer
	log, _ := New(&buf, "json", "debug")
	z := ZapLogger(log.With("component", "etcd"), "warn").With(zap.String("local-member-id", "8e9e05c52164694d"))
	z.Info("below the etcd level: dropped")
	z.Warn("server error", zap.Error(errString("the member has been permanently removed from the cluster")), zap.Int("attempt", 2))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want exactly the warning, got:\n%s", buf.String())
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"level": "WARN", "msg": "server error", "component": "etcd",
		"local-member-id": "8e9e05c52164694d", "error": "the member has been permanently removed from the cluster", "attempt": float64(2)} {
		if entry[k] != v {
			t.Errorf("%s = %v, want %v (entry %v)", k, entry[k], v, entry)
		}
	}
}

func TestFormatAuto(t *testing.T) {
	var buf bytes.Buffer
	log, _ := New(&buf, "auto", "info") // a buffer is not a terminal: JSON
	log.Info("hello")
	if !json.Valid(bytes.TrimSpace(buf.Bytes())) {
		t.Errorf("auto format to a non-terminal must be JSON, got %q", buf.String())
	}
	buf.Reset()
	log, _ = New(&buf, "text", "info")
	log.Debug("hidden")
	log.Info("hello")
	if got := buf.String(); !strings.Contains(got, "msg=hello") || strings.Contains(got, "hidden") {
		t.Errorf("text format / level: %q", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
