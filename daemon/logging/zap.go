package logging

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapLogger returns a zap logger that writes into an slog logger. etcd's
// embedded server logs through zap; routing it here keeps the agent's
// single format and adds the given attributes (component=etcd).
func ZapLogger(log *slog.Logger, level string) *zap.Logger {
	return zap.New(&slogCore{log: log, level: zapLevel(ParseLevel(level)), repeats: &repeats{}})
}

type slogCore struct {
	log     *slog.Logger
	level   zapcore.Level
	fields  []zapcore.Field
	repeats *repeats // shared by the cores With derives
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.level }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, level: c.level, fields: append(append([]zapcore.Field{}, c.fields...), fields...), repeats: c.repeats}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	level := slogLevel(e.Level)
	if expected(e.Message, enc.Fields) {
		level = slog.LevelDebug
		if !c.log.Enabled(context.Background(), level) {
			return nil
		}
	}
	admit, left := c.repeats.admit(e.Message, e.Time)
	if !admit {
		return nil
	}
	r := slog.NewRecord(e.Time, level, e.Message, 0)
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		r.AddAttrs(slog.Any(k, enc.Fields[k]))
	}
	if left > 0 {
		r.AddAttrs(slog.Int("repeatsNotLogged", left))
	}
	return c.log.Handler().Handle(context.Background(), r)
}

// repeatWindow is how often one etcd message is logged at most.
const repeatWindow = time.Second

// repeats keeps one etcd message from flooding the log. etcd retries some
// calls in a tight loop and logs every failure: a learner that applies the
// leader's snapshot of a large keyspace logs "failed to publish local
// member to cluster through raft" tens of thousands of times a second, and
// writing those lines cost the agent more than the copy it reports on (a
// join of a 1 GiB keyspace took half as long again). The first of a
// message is logged, then at most one per repeatWindow, which says how
// many were left out since the one before.
type repeats struct {
	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	logged time.Time
	left   int
}

// maxRepeatKeys bounds the messages remembered; etcd's are constants,
// so the bound is only a guard.
const maxRepeatKeys = 1024

// admit reports whether the message, seen at t, is logged, and how many
// of it were left out before.
func (r *repeats) admit(msg string, t time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil || len(r.seen) >= maxRepeatKeys {
		r.seen = map[string]*repeat{}
	}
	p, ok := r.seen[msg]
	if !ok {
		r.seen[msg] = &repeat{logged: t}
		return true, 0
	}
	if t.Sub(p.logged) < repeatWindow {
		p.left++
		return false, 0
	}
	left := p.left
	p.logged, p.left = t, 0
	return true, left
}

func (c *slogCore) Sync() error { return nil }

// expected tells whether an etcd server message reports nothing wrong
// for etcdlet; it is kept, at debug:
//
//   - a serve loop that ends because the server was closed on purpose:
//     etcd logs it as an error ("setting up serving from embedded etcd
//     failed." with "mux: server closed", or "mux: listener closed" when
//     the close came while the loop was still starting), which a stop of
//     the agent, or the end of a restore's temporary etcd, must not show
//     as one;
//   - the warning that gRPC and HTTP share the client port ("not
//     recommended for production"): that is etcd's default layout, and
//     kubeadm's, which etcdlet keeps on purpose; an operator reading it at
//     every start, or after a restore, would take it for a fault.
func expected(msg string, fields map[string]any) bool {
	switch msg {
	case "Running http and grpc server on single port. This is not recommended for production.":
		return true
	case "setting up serving from embedded etcd failed.":
		err := fmt.Sprint(fields["error"])
		for _, closed := range []string{"mux: server closed", "mux: listener closed", "http: Server closed", "use of closed network connection", "the server has been stopped"} {
			if strings.Contains(err, closed) {
				return true
			}
		}
	}
	return false
}
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l <= slog.LevelDebug:
		return zapcore.DebugLevel
	case l <= slog.LevelInfo:
		return zapcore.InfoLevel
	case l <= slog.LevelWarn:
		return zapcore.WarnLevel
	default:
		return zapcore.ErrorLevel
	}
}
