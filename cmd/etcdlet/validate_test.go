package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
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
