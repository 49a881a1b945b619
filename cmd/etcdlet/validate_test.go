package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config"
)

// Every command loads its configuration through validateConfig (through
// loadValidConfig, or validate itself), which checks the files it names
// and the programs it runs: a command that called config.Load or
// config.Parse itself would skip those checks, as status, restore, certs,
// task and pacemaker status once did.
func TestOneLoadingPath(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || pkg.Name != "config" || (sel.Sel.Name != "Load" && sel.Sel.Name != "Parse") {
					return true
				}
				if fn.Name.Name != "validateConfig" {
					t.Errorf("%s: %s calls config.%s: load the configuration with loadValidConfig, which checks what the command acts on",
						fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// head is a valid configuration on loopback, which needs no TLS.
const head = "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.1]\netcd:\n  extraArgs:\n"

// What `validate` prints, and what `run` and a reload report, stays
// bounded however the file multiplies its problems: by aliasing a large
// value into thousands of fields, or by writing them out.
func TestValidateOutputIsBounded(t *testing.T) {
	var aliased, unknown strings.Builder
	aliased.WriteString(head + "    A0: &v " + strings.Repeat("x", 64<<10) + "\n")
	for i := 1; i < config.MaxMappingEntries; i++ {
		fmt.Fprintf(&aliased, "    A%d: *v\n", i)
	}
	// Flags the embedded etcd does not know: package etcdflags reports
	// each, with its value, in a list of its own.
	unknown.WriteString(head)
	for i := range 1000 {
		fmt.Fprintf(&unknown, "    unknown-%04d: %s\n", i, strings.Repeat("y", 1000))
	}
	for _, tt := range []struct {
		name  string
		yaml  string
		lines int
		first string
		last  string
	}{
		{"a 64 KiB value aliased 1000 times", aliased.String(), 1,
			"etcd.extraArgs.A1: YAML aliases may add at most 64 KiB to the file, and with the aliases before it the alias *v (about 65537 bytes) would add more: write the values out (line 9)",
			""},
		{"1000 problems of 1000 bytes", unknown.String(), config.MaxReportedProblems + 1,
			`etcd.extraArgs.unknown-0000: "` + strings.Repeat("y", 200) + `"… (1000 bytes): not a flag the embedded etcd server understands`,
			"… and 980 more problems"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := newRootCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs([]string{"validate", "--config", path})
			err := cmd.Execute()
			if got := exitCode(err); got != 1 {
				t.Errorf("exit code %d (%v), want 1", got, err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != tt.lines || out.Len() > 32<<10 {
				t.Errorf("%d lines, %d bytes, want %d lines; they start:\n%.3000s", len(lines), out.Len(), tt.lines, out.String())
			}
			if lines[0] != tt.first {
				t.Errorf("first line:\n%.500s\nwant:\n%s", lines[0], tt.first)
			}
			if tt.last != "" && lines[len(lines)-1] != tt.last {
				t.Errorf("last line:\n%.500s\nwant:\n%s", lines[len(lines)-1], tt.last)
			}
			// run, at start (loadValidConfig) and on SIGHUP (config.Load,
			// which leaves etcd.extraArgs to loadValidConfig).
			if _, err := loadValidConfig(path); err == nil || len(err.Error()) > 32<<10 {
				t.Errorf("run: %.3000v", err)
			}
			if _, err := config.Load(path); err != nil && len(err.Error()) > 32<<10 {
				t.Errorf("reload: %.3000v", err)
			}
		})
	}
}
