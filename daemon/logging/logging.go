// Package logging sets up etcdlet's log/slog logger and bridges the zap
// logger of the embedded etcd server into it, so one process writes one
// log in one format.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"github.com/etcdlet/etcdlet/config"
)

// New returns a logger writing to w in the configured format and level.
// Format "auto" is text (logfmt, key=value) on a terminal and on the
// systemd journal, where people read it with journalctl; JSON otherwise
// (files, pipes, a container runtime's log), which is what log collectors
// want. The time stays in the journal's lines: it is when etcdlet wrote
// the line, the journal's own is when it read it.
func New(w io.Writer, format, level string) (*slog.Logger, *slog.LevelVar) {
	lvl := &slog.LevelVar{}
	lvl.Set(ParseLevel(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == config.LogFormatJSON || (format == config.LogFormatAuto && !isJournal(w, os.Getenv("JOURNAL_STREAM")) && !isTerminal(w)) {
		return slog.New(slog.NewJSONHandler(w, opts)), lvl
	}
	return slog.New(slog.NewTextHandler(w, opts)), lvl
}

// isJournal tells whether w is the stream systemd connected to the
// journal: stream is $JOURNAL_STREAM, "<device>:<inode>" of that stream,
// which a process must compare with its stderr's (systemd.exec(5)): the
// variable is inherited by children whose stderr goes elsewhere.
func isJournal(w io.Writer, stream string) bool {
	f, ok := w.(*os.File)
	if !ok || stream == "" {
		return false
	}
	var dev, ino uint64
	if _, err := fmt.Sscanf(stream, "%d:%d", &dev, &ino); err != nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == dev && st.Ino == ino
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
