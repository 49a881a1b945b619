// Package logging sets up etcdlet's log/slog logger and bridges the zap
// logger of the embedded etcd server into it, so one process writes one
// log in one format.
package logging

import (
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/etcdlet/etcdlet/config"
)

// New returns a logger writing to w in the configured format and level.
// Format "auto" is text when w is a terminal and JSON otherwise (journald,
// files, pipes), which is what log collectors want.
func New(w io.Writer, format, level string) (*slog.Logger, *slog.LevelVar) {
	lvl := &slog.LevelVar{}
	lvl.Set(ParseLevel(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == config.LogFormatJSON || (format == config.LogFormatAuto && !isTerminal(w)) {
		return slog.New(slog.NewJSONHandler(w, opts)), lvl
	}
	return slog.New(slog.NewTextHandler(w, opts)), lvl
}

// ParseLevel maps a validated level name to a slog level.
func ParseLevel(level string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return slog.LevelInfo
	}
	return l
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
