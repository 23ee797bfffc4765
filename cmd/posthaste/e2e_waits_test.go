package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// sleepsAllowed are the functions of the end-to-end tests that may call
// time.Sleep, and why: none of them waits for a condition.
var sleepsAllowed = map[string]string{
	"poll":                "the pause between two polls of eventually",
	"raw":                 "a client honouring Retry-After",
	"swaks":               "a mail program trying again as the 451 asks",
	"sendRetrying":        "a client retrying a keyed send while the process is down",
	"TestDatabaseOutage":  "the outage must last a given time",
	"TestDevInboundFlood": "the moment the tenth flood message is accepted (10 ms) and the delivery delay during the flood (20 ms) are measurements",
}

// TestWaitsGoThroughEventually fails when a test of this package waits for
// a condition other than through eventually (or poll): a time.Sleep outside
// the functions of sleepsAllowed, or testify's Eventually, which runs its
// condition on another goroutine (where require cannot stop the test).
func TestWaitsGoThroughEventually(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch {
				case pkg.Name == "time" && sel.Sel.Name == "Sleep":
					if _, ok := sleepsAllowed[fn.Name.Name]; !ok {
						t.Errorf("%s: %s sleeps: wait with eventually", fset.Position(call.Pos()), fn.Name.Name)
					}
				case (pkg.Name == "require" || pkg.Name == "assert") &&
					(sel.Sel.Name == "Eventually" || sel.Sel.Name == "Eventuallyf" || sel.Sel.Name == "EventuallyWithT"):
					t.Errorf("%s: %s uses %s.%s: wait with eventually", fset.Position(call.Pos()), fn.Name.Name,
						pkg.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
