package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

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

// Under systemd, stderr is the journal's stream (JOURNAL_STREAM names its
// device and inode): auto writes logfmt there. A file that JOURNAL_STREAM does not name, and a
// malformed variable, are not the journal: JSON.
func TestFormatAutoOnTheJournal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	tests := []struct {
		name, stream string
		journal      bool
	}{
		{"the journal's stream", fmt.Sprintf("%d:%d", st.Dev, st.Ino), true},
		{"another stream (inherited variable)", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1), false},
		{"malformed", "journal", false},
		{"unset", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isJournal(f, tt.stream); got != tt.journal {
				t.Fatalf("isJournal = %v, want %v", got, tt.journal)
			}
			t.Setenv("JOURNAL_STREAM", tt.stream)
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Seek(0, 0); err != nil {
				t.Fatal(err)
			}
			log, _ := New(f, "auto", "info")
			log.Info("local member", "member", "etcd-main-2001:db8::1", "decision", "keep")
			data, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			line := strings.TrimSpace(string(data))
			if tt.journal {
				if want := ` level=INFO msg="local member" member=etcd-main-2001:db8::1 decision=keep`; !strings.HasPrefix(line, "time=") || !strings.HasSuffix(line, want) {
					t.Errorf("on the journal: %q, want %q", line, want)
				}
			} else if !json.Valid([]byte(line)) {
				t.Errorf("not on the journal: %q, want JSON", line)
			}
		})
	}
}

// A serve loop that ends because etcd was closed on purpose is no error,
// and etcd's advice about its default port layout no warning: both are
// logged at debug; a serve loop that fails otherwise stays an error.
func TestExpectedEtcdMessagesAreDebug(t *testing.T) {
	var buf bytes.Buffer
	log, _ := New(&buf, "text", "info")
	ZapLogger(log, "warn").Warn("Running http and grpc server on single port. This is not recommended for production.")
	if buf.Len() != 0 {
		t.Errorf("etcd's single-port advice logged at info: %q", buf.String())
	}
	testStoppedServing(t)
}

func testStoppedServing(t *testing.T) {
	tests := []struct {
		name, err, want string
	}{
		{"closed on purpose", "mux: server closed", ""},
		{"http server closed", "http: Server closed", ""},
		// cmux's listener closed under a serve loop that was still
		// starting (a restore's temporary etcd closed right after it
		// became ready).
		{"listener closed", "mux: listener closed", ""},
		{"a real failure", "listen tcp 127.0.0.1:2379: bind: address already in use", "level=ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, _ := New(&buf, "text", "info")
			ZapLogger(log, "warn").Error("setting up serving from embedded etcd failed.", zap.Error(errString(tt.err)))
			if got := buf.String(); (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("logged %q, want %q", got, tt.want)
			}
			buf.Reset()
			log, _ = New(&buf, "text", "debug")
			ZapLogger(log, "debug").Error("setting up serving from embedded etcd failed.", zap.Error(errString(tt.err)))
			if !strings.Contains(buf.String(), tt.err) {
				t.Errorf("at debug, the message is gone: %q", buf.String())
			}
		})
	}
}

// A message etcd repeats in a tight loop is logged once, then at most once
// a second with the count of those left out; another message, and the
// same one through a logger With derives, count on their own and together.
func TestRepeatedEtcdMessagesAreLoggedOnceASecond(t *testing.T) {
	var buf bytes.Buffer
	log, _ := New(&buf, "text", "info")
	zl := ZapLogger(log, "warn")
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	publish := func(l *zap.Logger, at time.Duration) {
		if ce := l.Check(zap.WarnLevel, "failed to publish local member to cluster through raft"); ce != nil {
			ce.Time = start.Add(at)
			ce.Write(zap.String("error", "etcdserver: too many requests"))
		}
	}
	child := zl.With(zap.String("local-member-id", "1a5a"))
	for i := range 1000 {
		publish(zl, time.Duration(i)*time.Millisecond)
		publish(child, time.Duration(i)*time.Millisecond)
	}
	zl.Warn("another message")
	publish(zl, 1200*time.Millisecond)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("logged %d lines, want 3 (the first, another message, one a second later):\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "failed to publish") || strings.Contains(lines[0], "repeatsNotLogged") {
		t.Errorf("first line %q, want the message without a count", lines[0])
	}
	if !strings.Contains(lines[1], "another message") {
		t.Errorf("second line %q, want the other message, not held back", lines[1])
	}
	if !strings.Contains(lines[2], "failed to publish") || !strings.Contains(lines[2], "repeatsNotLogged=1999") {
		t.Errorf("third line %q, want the message a second later with the 1999 left out", lines[2])
	}
}
