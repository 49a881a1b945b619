package config

import (
	"fmt"
	"strings"
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

func (e FieldError) Error() string {
	if e.Value == nil {
		return e.Path + ": " + e.Rule
	}
	return fmt.Sprintf("%s: %s: %s", e.Path, formatValue(e.Value), e.Rule)
}

func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case fmt.Stringer:
		return fmt.Sprintf("%q", v.String())
	default:
		return fmt.Sprint(v)
	}
}

// Errors is a list of validation problems; it is an error when non-empty.
// Error() renders one problem per line, which is what `etcdlet validate`
// prints.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns nil for an empty list, so callers can `return errs.Err()`.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

func (es *Errors) add(path string, value any, rule string, args ...any) {
	*es = append(*es, FieldError{Path: path, Value: value, Rule: fmt.Sprintf(rule, args...)})
}
