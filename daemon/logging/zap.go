package logging

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapLogger returns a zap logger that writes into an slog logger. etcd's
// embedded server logs through zap; routing it here keeps the agent's
// single format and adds the given attributes (component=etcd).
func ZapLogger(log *slog.Logger, level string) *zap.Logger {
	return zap.New(&slogCore{log: log, level: zapLevel(ParseLevel(level))})
}

type slogCore struct {
	log    *slog.Logger
	level  zapcore.Level
	fields []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.level }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, level: c.level, fields: append(append([]zapcore.Field{}, c.fields...), fields...)}
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
	r := slog.NewRecord(e.Time, level, e.Message, 0)
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		r.AddAttrs(slog.Any(k, enc.Fields[k]))
	}
	return c.log.Handler().Handle(context.Background(), r)
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
