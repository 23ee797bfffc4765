// Package sourcetest checks rules about the source of other packages in
// tests: a concept that must have one definition fails its package's test
// when a copy of it grows back elsewhere.
package sourcetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Forbid fails t when a Go file that is not a test in one of dirs
// contains one of the strings; why says what to use instead.
func Forbid(t testing.TB, dirs []string, forbidden []string, why string) {
	t.Helper()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range forbidden {
				if strings.Contains(string(b), s) {
					t.Errorf("%s contains %q: %s", f, s, why)
				}
			}
		}
	}
}

// ForbidTypes fails t when a Go file that is not a test in one of dirs
// names one of the types names of the package at importPath (as pkg.Name,
// under whatever name the file imports the package); why says what to use
// instead. Unlike Forbid it reads the syntax, so comments and strings do
// not count.
func ForbidTypes(t testing.TB, dirs []string, importPath string, names []string, why string) {
	t.Helper()
	forbidden := make(map[string]bool, len(names))
	for _, n := range names {
		forbidden[n] = true
	}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			local := ""
			for _, imp := range file.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == importPath {
					local = path.Base(importPath)
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local && forbidden[sel.Sel.Name] {
					t.Errorf("%s: %s.%s: %s", fset.Position(sel.Pos()), local, sel.Sel.Name, why)
				}
				return true
			})
		}
	}
}

// Embedders returns the names of the struct types declared in the Go
// file src that embed the type embedded (as embedded or *embedded).
func Embedders(t testing.TB, src, embedded string) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), src, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, fld := range st.Fields.List {
				typ := fld.Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok && len(fld.Names) == 0 && id.Name == embedded {
					out = append(out, ts.Name.Name)
				}
			}
		}
	}
	return out
}

// ForbidStore fails t when a Go file that is not a test in one of dirs
// names the store (internal/store's Store or one of its areas, the struct
// types declared in areasFile that embed Store); why says what to use
// instead. It is how an adapter proves it reaches data only through its
// services.
func ForbidStore(t testing.TB, areasFile string, dirs []string, why string) {
	t.Helper()
	handles := append(Embedders(t, areasFile, "Store"), "Store")
	if !slices.Contains(handles, "Insights") {
		t.Fatalf("the store's areas are not where the test looks (%s): %v", areasFile, handles)
	}
	ForbidTypes(t, dirs, "github.com/posthaste/posthaste/internal/store", handles, why)
}
