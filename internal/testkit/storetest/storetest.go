// Package storetest gives tests a migrated store on a fresh database of the
// test binary's PostgreSQL (see pgtest; TestMain must call pgtest.Run).
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// New returns a store on a new, migrated database, closed at cleanup.
func New(t testing.TB) *store.Store {
	t.Helper()
	st, _ := NewWithURL(t)
	return st
}

// NewWithURL is New, and also returns the database's URL for tests that
// open connections of their own beside the store.
func NewWithURL(t testing.TB) (*store.Store, string) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	st, err := store.Open(ctx, store.Config{URL: url})
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	return st, url
}

// SeedOutcomes stores, for each state in outcomes, one email of the team
// created an hour ago whose n recipients are all in that state (delivered,
// bounced, complained…), as account-health and metrics tests need them.
// It lifts the team's monthly quota out of the way first. The addresses are
// unique per call.
func SeedOutcomes(t testing.TB, st *store.Store, team uuid.UUID, outcomes map[string]int) {
	t.Helper()
	ctx := context.Background()
	if err := st.SetPlan(ctx, team, "50k"); err != nil {
		t.Fatalf("setting plan: %v", err)
	}
	for status, n := range outcomes {
		id := uuid.Must(uuid.NewV7())
		text := "hi"
		e := store.Email{ID: id, TeamID: team, From: "onboarding@posthaste.test", FromDomain: "posthaste.test",
			Subject: "seed", Text: &text, LastEvent: status, CreatedAt: time.Now().Add(-time.Hour)}
		for j := range n {
			addr := fmt.Sprintf("r%d-%s@dest.test", j, id)
			e.To = append(e.To, addr)
			e.Recipients = append(e.Recipients, store.Recipient{Address: addr, Kind: "to", Domain: "dest.test", Status: status})
		}
		if _, err := st.Accept(ctx, store.Acceptance{Emails: []store.Email{e}}); err != nil {
			t.Fatalf("seeding %d %s recipients: %v", n, status, err)
		}
	}
}
