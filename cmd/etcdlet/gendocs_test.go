package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func genDocs(t *testing.T, args ...string) error {
	t.Helper()
	root := newRootCommand()
	root.SetArgs(append([]string{"gen-docs"}, args...))
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	return root.Execute()
}

// gen-docs writes one man page per visible command, dated by
// SOURCE_DATE_EPOCH in UTC, and the three completions; two runs write the
// same bytes, so the packages built from them are reproducible.
func TestGenDocs(t *testing.T) {
	// 23:30 UTC on the last day of November: a local time zone east of UTC
	// would already say December.
	epoch := time.Date(2026, 11, 30, 23, 30, 0, 0, time.UTC).Unix()
	t.Setenv("SOURCE_DATE_EPOCH", strconv.FormatInt(epoch, 10))
	var runs [2]string
	for i := range runs {
		runs[i] = t.TempDir()
		if err := genDocs(t, "--man", filepath.Join(runs[i], "man"), "--completions", filepath.Join(runs[i], "completions")); err != nil {
			t.Fatal(err)
		}
	}

	pages, _ := filepath.Glob(filepath.Join(runs[0], "man", "*.1"))
	var names []string
	for _, p := range pages {
		names = append(names, filepath.Base(p))
	}
	for _, want := range []string{"etcdlet.1", "etcdlet-run.1", "etcdlet-validate.1", "etcdlet-task-run-snapshot.1", "etcdlet-completion-bash.1"} {
		if !slices.Contains(names, want) {
			t.Errorf("no man page %s among %v", want, names)
		}
	}
	for _, n := range names {
		if strings.Contains(n, "gen-docs") || strings.Contains(n, "help") {
			t.Errorf("man page %s of a hidden or help command", n)
		}
	}
	page, err := os.ReadFile(filepath.Join(runs[0], "man", "etcdlet-validate.1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `.TH "ETCDLET-VALIDATE" "1" "Nov 2026" "etcdlet `+version+`" "etcdlet manual"`) {
		t.Errorf("etcdlet-validate.1 header:\n%s", strings.SplitN(string(page), "\n", 3)[1])
	}
	if strings.Contains(string(page), "Auto generated") {
		t.Error("the man page carries cobra's auto-generation line")
	}

	for name, first := range map[string]string{
		"etcdlet":      "# bash completion V2 for etcdlet",
		"_etcdlet":     "#compdef etcdlet",
		"etcdlet.fish": "# fish completion for etcdlet",
	} {
		b, err := os.ReadFile(filepath.Join(runs[0], "completions", name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), first) {
			t.Errorf("completion %s starts with %q, want %q", name, strings.SplitN(string(b), "\n", 2)[0], first)
		}
	}

	// The second run wrote the same files, byte for byte.
	for _, sub := range []string{"man", "completions"} {
		entries, err := os.ReadDir(filepath.Join(runs[0], sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			a, _ := os.ReadFile(filepath.Join(runs[0], sub, e.Name()))
			b, err := os.ReadFile(filepath.Join(runs[1], sub, e.Name()))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s/%s differs between two runs (%v)", sub, e.Name(), err)
			}
		}
	}
}

// Without SOURCE_DATE_EPOCH the man pages would carry the build's date:
// gen-docs refuses.
func TestGenDocsNeedsSourceDate(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	err := genDocs(t, "--man", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH is not set") {
		t.Errorf("gen-docs without SOURCE_DATE_EPOCH: %v", err)
	}
	// Completions carry no date and need none.
	if err := genDocs(t, "--completions", t.TempDir()); err != nil {
		t.Errorf("gen-docs --completions without SOURCE_DATE_EPOCH: %v", err)
	}
}

// The command is hidden: not in the help a user sees.
func TestGenDocsHidden(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "gen-docs") {
		t.Errorf("etcdlet --help lists gen-docs:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "completion") {
		t.Errorf("etcdlet --help does not list cobra's completion command:\n%s", out.String())
	}
}
