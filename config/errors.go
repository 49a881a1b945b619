package config

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on what a list of problems says. A configuration file can make
// any number of problems, each echoing a value of up to MaxConfigBytes:
// written out in full they once made a 1 MiB file print gigabytes. Each
// bound is far above what a real mistake needs.
const (
	// MaxReportedProblems is how many problems a list keeps and reports;
	// the rest are only counted, in a last "… and M more problems" entry.
	// A person fixes a file a few problems at a time, and twenty are more
	// than a screen.
	MaxReportedProblems = 20
	// maxValueRunes is how much of a value a message quotes: longer than
	// any path, URL or flag value a real file has, and than an image
	// reference pinned by its digest (71 characters of it).
	maxValueRunes = 200
	// maxPathRunes is how much of a field path a message shows: the path
	// holds keys as the file spells them (an etcd.extraArgs name, an
	// unknown field), which can be as long as the file.
	maxPathRunes = 200
	// maxRuleRunes is how much of a rule a message shows: twice the
	// longest rule etcdlet writes; a rule can quote an error that quotes
	// a value (a path that cannot be opened, an etcd flag's value).
	maxRuleRunes = 600
)

// FieldError is one validation problem: which field, which value, which rule.
type FieldError struct {
	// Path names the field, e.g. "etcd.clientPort" or "members.file line 3".
	Path string
	// Value is the offending value as the user wrote it; nil when the
	// problem is the absence of a value.
	Value any
	// Rule says what the value must satisfy.
	Rule string
}

// morePath is the Path of the entry that ends a list cut at
// MaxReportedProblems; its Value is a moreProblems.
const morePath = "…"

// moreProblems counts the problems a list found but did not keep.
type moreProblems int

// Error renders "<field>: <value>: <rule>". It is the one place every
// problem is written out, wherever it was made, so that every rule's
// value, path and text are bounded here (see maxValueRunes).
func (e FieldError) Error() string {
	if n, ok := e.Value.(moreProblems); ok {
		return fmt.Sprintf("%s and %d more %s", morePath, n, plural(int(n), "problem", "problems"))
	}
	path, rule := clip(e.Path, maxPathRunes), clip(e.Rule, maxRuleRunes)
	if e.Value == nil {
		return path + ": " + rule
	}
	return fmt.Sprintf("%s: %s: %s", path, formatValue(e.Value), rule)
}

// formatValue quotes a value as the file has it, cut at maxValueRunes
// with its full length, e.g. "xxx…"… (1048576 bytes).
func formatValue(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case fmt.Stringer:
		s = v.String()
	default:
		return clip(fmt.Sprint(v), maxValueRunes)
	}
	if cut, ok := cutAt(s, maxValueRunes); ok {
		return fmt.Sprintf("%q… (%d bytes)", cut, len(s))
	}
	return fmt.Sprintf("%q", s)
}

// clip cuts s after max runes, marking the cut with its full length.
func clip(s string, max int) string {
	if cut, ok := cutAt(s, max); ok {
		return fmt.Sprintf("%s… (%d bytes)", cut, len(s))
	}
	return s
}

// cutAt returns the first max runes of s, and whether that is not all of
// it. It never looks further into s than those runes.
func cutAt(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false // at most max bytes: at most max runes
	}
	i := 0
	for n := 0; n < max && i < len(s); n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], i < len(s)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Errors is a list of validation problems; it is an error when non-empty.
// Error() renders one problem per line, which is what `etcdlet validate`
// prints. Lists built with add keep at most MaxReportedProblems problems
// and count the rest; lists joined with append are cut by Reported.
type Errors []FieldError

// Error renders the Reported problems, one per line.
func (es Errors) Error() string {
	reported := es.Reported()
	lines := make([]string, len(reported))
	for i, e := range reported {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Reported is the list as it is reported: its first MaxReportedProblems
// problems, then, if there are more, one entry that counts them ("… and
// M more problems"). It accepts lists joined from lists that were cut
// already, and counts what those left out.
func (es Errors) Reported() Errors {
	var (
		kept Errors
		more int
	)
	for _, e := range es {
		switch n, ok := e.Value.(moreProblems); {
		case ok:
			more += int(n)
		case len(kept) < MaxReportedProblems:
			kept = append(kept, e)
		default:
			more++
		}
	}
	if more > 0 {
		kept = append(kept, FieldError{Path: morePath, Value: moreProblems(more)})
	}
	return kept
}

// Err returns nil for an empty list, so callers can `return errs.Err()`.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// add appends a problem; past MaxReportedProblems it only counts it, so
// that a file with a hundred thousand problems costs no more to check
// than one with twenty.
func (es *Errors) add(path string, value any, rule string, args ...any) {
	if len(*es) >= MaxReportedProblems {
		es.countMore(1)
		return
	}
	*es = append(*es, FieldError{Path: path, Value: value, Rule: fmt.Sprintf(rule, args...)})
}

// countMore counts n problems that are not kept, in the list's last
// entry.
func (es *Errors) countMore(n int) {
	if last := len(*es) - 1; last >= 0 {
		if m, ok := (*es)[last].Value.(moreProblems); ok {
			(*es)[last].Value = m + moreProblems(n)
			return
		}
	}
	*es = append(*es, FieldError{Path: morePath, Value: moreProblems(n)})
}
