// Package storetest gives tests a migrated store on a fresh database of the
// test binary's PostgreSQL (see pgtest; TestMain must call pgtest.Run).
package storetest

import (
	"context"
	"testing"

	"github.com/posthaste/posthaste/internal/pgtest"
	"github.com/posthaste/posthaste/internal/store"
)

// New returns a store on a new, migrated database, closed at cleanup.
func New(t testing.TB) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: pgtest.NewDatabase(t)})
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	return st
}
