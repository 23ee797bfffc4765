// Package sourcetest checks rules about the source of other packages in
// tests: a concept that must have one definition fails its package's test
// when a copy of it grows back elsewhere.
package sourcetest

import (
	"os"
	"path/filepath"
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
