package sourcetest_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/posthaste/posthaste/internal/testkit/sourcetest"
)

// recorder is a testing.TB that keeps the errors it is given.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }

func write(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestForbidTypes: a type named through the package's import, under any
// local name, is caught; comments, strings, other types of the package,
// other packages' types of the same name and test files are not.
func TestForbidTypes(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.go", `package a

import st "example.com/store"

// Config holds a st.Store, says this comment.
type Config struct{ S *st.Store }

var _ = "st.Store"
var _ st.Page
`)
	write(t, dir, "b.go", `package a

import "example.com/other/store"

var _ *store.Store
`)
	write(t, dir, "c.go", `package a

import "example.com/store"

func f(a *store.Areas) {}
`)
	write(t, dir, "a_test.go", `package a

import "example.com/store"

var _ *store.Store
`)
	r := &recorder{TB: t}
	sourcetest.ForbidTypes(r, []string{dir}, "example.com/store", []string{"Store", "Areas"}, "use a service")
	if r.errors != 2 {
		t.Fatalf("ForbidTypes reported %d errors, want 2 (a.go's *st.Store, c.go's *store.Areas)", r.errors)
	}
}

func TestEmbedders(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "areas.go", `package store

type Store struct{}
type Emails struct{ *Store }
type Plain struct{ Store }
type Named struct{ s *Store }
type Other struct{ *Emails }
`)
	got := sourcetest.Embedders(t, filepath.Join(dir, "areas.go"), "Store")
	if !slices.Equal(got, []string{"Emails", "Plain"}) {
		t.Fatalf("Embedders = %v, want [Emails Plain]", got)
	}
}
