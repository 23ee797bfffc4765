// Package docs holds the documentation pages of Posthaste and the tests that
// keep them true: every environment variable the code reads is listed in
// configuration.md, and every relative link in README.md, SECURITY.md and docs/*.md
// points at a file and heading that exist.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the module root, one level above this directory.
const root = ".."

// envName is the shape of an environment variable name.
var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// posthasteName is a variable of our own prefix, wherever it appears.
var posthasteName = regexp.MustCompile(`^POSTHASTE_[A-Z0-9_]+$`)

// TestConfigurationListsEveryVariable fails when a variable read by the
// non-test Go source is missing from the first column of a table in
// configuration.md. A variable counts as read when its name is the first
// argument of os.Getenv, os.LookupEnv, a getenv function value or a method
// of internal/config's reader (str, secret, duration, ...), as a string
// literal or a named string constant, or when a string literal in the source
// is a POSTHASTE_* name.
func TestConfigurationListsEveryVariable(t *testing.T) {
	read := variablesRead(t)
	if len(read) < 50 {
		t.Fatalf("found only %d variables read by the code; the scan is broken", len(read))
	}
	documented := documentedVariables(t, "configuration.md")
	var missing []string
	for name, where := range read {
		if !documented[name] {
			missing = append(missing, name+" (read in "+where+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("docs/configuration.md has no table row for %s", m)
	}
}

// TestDocumentedVariablesScan proves that the scan sees what the config
// loader reads: a few variables read only through reader methods and
// getenv are found.
func TestDocumentedVariablesScan(t *testing.T) {
	read := variablesRead(t)
	for _, name := range []string{"DATABASE_URL", "REDIS_URL", "TEMPORAL_NAMESPACE", "POSTHASTE_IP_POOLS", "POSTHASTE_TEST_DATABASE_URL"} {
		if _, ok := read[name]; !ok {
			t.Errorf("the scan missed %s", name)
		}
	}
}

// variablesRead scans the non-test Go source of the module and returns each
// variable read with the first file that reads it.
func variablesRead(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			base := d.Name()
			if path != root && (strings.HasPrefix(base, ".") || base == "third_party" || base == "testdata" || base == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		names = append(names, filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator))))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The functions whose first argument names a variable: the standard
	// library's, a getenv value, and every method of the config reader.
	envFuncs := map[string]bool{"Getenv": true, "LookupEnv": true, "getenv": true}
	readers := map[string]bool{}
	// String constants, by directory and name (and by package name and
	// name, for pkg.Name), so that os.Getenv(EnvDatabaseURL) counts.
	consts := map[string]string{}
	for i, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if f.Name.Name == "config" && d.Recv != nil && len(d.Recv.List) == 1 && recvType(d.Recv.List[0].Type) == "reader" {
					readers[d.Name.Name] = true
				}
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for k, n := range vs.Names {
						if k < len(vs.Values) {
							if v, ok := stringLit(vs.Values[k]); ok {
								consts[pathDir(names[i])+" "+n.Name] = v
								consts[f.Name.Name+"."+n.Name] = v
							}
						}
					}
				}
			}
		}
	}
	if len(readers) < 5 {
		t.Fatalf("found no methods of internal/config's reader (only %v); was it renamed?", readers)
	}

	read := map[string]string{}
	add := func(name, file string) {
		if _, ok := read[name]; !ok {
			read[name] = file
		}
	}
	for i, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if v, ok := stringLit(n); ok && posthasteName.MatchString(v) {
					add(v, names[i])
				}
			case *ast.CallExpr:
				var fn string
				switch fun := n.Fun.(type) {
				case *ast.Ident:
					fn = fun.Name
				case *ast.SelectorExpr:
					fn = fun.Sel.Name
				}
				// The reader's methods count only inside internal/config,
				// where they are the reader's; Getenv and friends anywhere.
				if len(n.Args) == 0 || !(envFuncs[fn] || readers[fn] && f.Name.Name == "config") {
					return true
				}
				var v string
				switch a := n.Args[0].(type) {
				case *ast.BasicLit:
					v, _ = stringLit(a)
				case *ast.Ident:
					v = consts[pathDir(names[i])+" "+a.Name]
				case *ast.SelectorExpr:
					if pkg, ok := a.X.(*ast.Ident); ok {
						v = consts[pkg.Name+"."+a.Sel.Name]
					}
				}
				if envName.MatchString(v) {
					add(v, names[i])
				}
			}
			return true
		})
	}
	return read
}

func pathDir(name string) string {
	return filepath.Dir(filepath.FromSlash(name))
}

func recvType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

// documentedVariables returns the names in backquotes in the first cell of
// every table row of the page.
func documentedVariables(t *testing.T, page string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	code := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.SplitN(line, " | ", 2)
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			names[m[1]] = true
		}
	}
	return names
}

// TestDocumentedVariablesFromTableRowsOnly proves the check is strict: a
// name mentioned in a row's meaning, not in its first cell, does not count.
func TestDocumentedVariablesFromTableRowsOnly(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "c.md")
	text := "| variable | default | meaning |\n|---|---|---|\n| `POSTHASTE_A`, `POSTHASTE_B` | 1 | like `POSTHASTE_C` |\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := documentedVariables(t, page)
	if !got["POSTHASTE_A"] || !got["POSTHASTE_B"] || got["POSTHASTE_C"] {
		t.Fatalf("documentedVariables = %v, want A and B only", got)
	}
}

// TestRelativeLinks fails when a relative link in README.md, SECURITY.md or docs/*.md
// points at a file that does not exist or at a heading its page lacks.
func TestRelativeLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "SECURITY.md"))
	if len(pages) < 10 {
		t.Fatalf("found only %d pages: %v", len(pages), pages)
	}
	for _, page := range pages {
		for _, l := range links(t, page) {
			if err := checkLink(page, l); err != "" {
				t.Errorf("%s: link %q: %s", page, l, err)
			}
		}
	}
}

// TestCheckLinkFindsBrokenLinks proves the link check can fail.
func TestCheckLinkFindsBrokenLinks(t *testing.T) {
	for _, l := range []string{"nosuch.md", "configuration.md#no-such-heading", "#no-such-heading"} {
		if checkLink("architecture.md", l) == "" {
			t.Errorf("checkLink(%q) passed", l)
		}
	}
	for _, l := range []string{"configuration.md", "../SECURITY.md", "configuration.md#configuration"} {
		if err := checkLink("architecture.md", l); err != "" {
			t.Errorf("checkLink(%q): %s", l, err)
		}
	}
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
)

// links returns the relative link targets of a page, outside code.
func links(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = inlineCodeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, target)
		}
	}
	return out
}

// checkLink returns what is wrong with a relative link from page, or "".
func checkLink(page, link string) string {
	path, anchor, _ := strings.Cut(link, "#")
	target := page
	if path != "" {
		target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
	}
	info, err := os.Stat(target)
	if err != nil {
		return "no such file " + target
	}
	if anchor == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(target, ".md") {
		return "an anchor into a file that is not a page"
	}
	b, err := os.ReadFile(target)
	if err != nil {
		return err.Error()
	}
	if !anchors(string(b))[anchor] {
		return "no heading with anchor #" + anchor + " in " + target
	}
	return ""
}

// anchors returns the anchors GitHub gives the headings of a page: lower
// case, punctuation dropped, spaces as hyphens, a repeated anchor numbered.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if out[a] {
			for i := 1; ; i++ {
				if n := a + "-" + strconv.Itoa(i); !out[n] {
					a = n
					break
				}
			}
		}
		out[a] = true
	}
	return out
}

// TestReadmeIsAFrontPage keeps README.md a front page: what Posthaste is,
// the two commands, a first send and links. Reference text belongs in a
// page of docs/.
func TestReadmeIsAFrontPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const most = 8 << 10
	if len(b) > most {
		t.Errorf("README.md is %d bytes, more than %d: move the new text to the page of docs/ it belongs to", len(b), most)
	}
	for _, want := range []string{"./dev.sh", "./test.sh", "docs/configuration.md", "docs/architecture.md"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md does not mention %s", want)
		}
	}
}
