package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// However many problems a file has and however long their values, what
// is reported is bounded: MaxReportedProblems lines and a count of the
// rest, values, paths and rules cut with their full length.
func TestProblemsAreBounded(t *testing.T) {
	const nameRule = "must be at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
	const flagRule = "must be an etcd flag name without leading dashes, e.g. snapshot-count"
	var many strings.Builder
	many.WriteString(base + "etcd:\n  extraArgs:\n")
	for i := range 1000 {
		fmt.Fprintf(&many, "    A%03d: x\n", i)
	}
	var first20 []string
	for i := range 20 {
		first20 = append(first20, fmt.Sprintf(`etcd.extraArgs.A%03d: "x": %s`, i, flagRule))
	}
	for _, tt := range []struct {
		name string
		yaml string
		want []string
	}{
		{"1000 problems", many.String(), append(first20, "… and 980 more problems")},
		{"a long value", strings.Replace(base, "etcd-main", strings.Repeat("x", 300), 1), []string{
			`cluster.name: "` + strings.Repeat("x", 200) + `"… (300 bytes): ` + nameRule}},
		{"a long value cut at a rune", strings.Replace(base, "etcd-main", strings.Repeat("é", 300), 1), []string{
			`cluster.name: "` + strings.Repeat("é", 200) + `"… (600 bytes): ` + nameRule}},
		{"a long key", base + "etcd:\n  extraArgs:\n    " + strings.Repeat("A", 1000) + ": x\n", []string{
			"etcd.extraArgs." + strings.Repeat("A", 185) + `… (1015 bytes): "x": ` + flagRule}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := parseAndValidate(t, tt.yaml)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%.5000s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// Lists joined from lists that were cut already report the problems
// every one of them found.
func TestReportedCountsJoinedLists(t *testing.T) {
	var a, b Errors
	for i := range 30 {
		a.add("a", i, "rule")
	}
	for i := range 25 {
		b.add("b", i, "rule")
	}
	if len(a) != MaxReportedProblems+1 {
		t.Errorf("a list of 30 keeps %d entries, want %d", len(a), MaxReportedProblems+1)
	}
	joined := append(append(Errors{{Path: "c", Rule: "first"}}, a...), b...)
	lines := strings.Split(joined.Error(), "\n")
	if len(lines) != MaxReportedProblems+1 || lines[0] != "c: first" || lines[19] != "a: 18: rule" || lines[20] != "… and 36 more problems" {
		t.Errorf("reported:\n%s", strings.Join(lines, "\n"))
	}
	one := append(Errors{}, a[:MaxReportedProblems]...)
	one = append(one, FieldError{Path: "d", Rule: "last"})
	if got := one.Error(); !strings.HasSuffix(got, "\n… and 1 more problem") {
		t.Errorf("21 problems end with:\n%s", got[strings.LastIndex(got, "\n")+1:])
	}
	long := FieldError{Path: "etcd.tls.client.certFile", Value: "/x", Rule: "cannot be opened: " + strings.Repeat("/x", 1000)}
	if got := long.Error(); len(got) > 700 || !strings.HasSuffix(got, "… (2018 bytes)") {
		t.Errorf("a long rule is written as %d bytes: %.100s…%s", len(got), got, got[len(got)-40:])
	}
}

// A members file's problems echo its lines, up to MaxMembersFileBytes
// each: they are cut too.
func TestMembersFileProblemsAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "members")
	line := "192.0.2.1 " + strings.Repeat("x", 100<<10) + "\n"
	if err := os.WriteFile(path, []byte(strings.Repeat(line, MaxMembers)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Members: Members{Source: SourceFile, File: path}}
	_, errs := cfg.DesiredMembers()
	text := errs.Error()
	if len(errs) != MaxMembers || len(text) > MaxMembers*300 {
		t.Errorf("%d problems in %d bytes:\n%.3000s", len(errs), len(text), text)
	}
	if want := `members.file line 1: "192.0.2.1 ` + strings.Repeat("x", 190) + `"… (102410 bytes): one address per line`; !strings.HasPrefix(text, want+"\n") {
		t.Errorf("first problem:\n%.300s\nwant:\n%s", text, want)
	}
}
