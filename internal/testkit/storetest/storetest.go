// Package storetest gives tests a migrated store on a fresh database of the
// test binary's PostgreSQL (see pgtest; TestMain must call pgtest.Run). The
// migrations run once per server, into a template database that each new
// database copies.
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/store/migrations"
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
	url := NewDatabase(t)
	return Open(t, store.Config{URL: url}), url
}

// Open opens a store on the existing database of cfg.URL (it does not
// migrate), closed at cleanup. The helpers of this package that read or
// write with plain SQL (OutboxLen, SessionByHash, …) work on the stores
// New, NewWithURL and Open return.
func Open(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	track(t, st, cfg.URL)
	t.Cleanup(st.Close)
	return st
}

// NewDatabase returns the URL of a new database with every migration
// applied, for tests that open the store themselves. It is dropped at
// cleanup.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabaseFrom(t, migrated)
}

// migrated is the template of a database with every migration applied.
// Its Key is the digest of the migration files, so a template made by a
// different migration set is never copied.
var migrated = pgtest.Template{Key: "store migrations " + digest(), Prepare: migrate}

func digest() string {
	d, err := pgtest.Digest(migrations.FS)
	if err != nil {
		panic(err) // the files are embedded: reading them cannot fail
	}
	return d
}

func migrate(ctx context.Context, url string) error {
	st, err := store.Open(ctx, store.Config{URL: url})
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx)
}

// SeedOutcomes stores, for each state in outcomes, one email of the team
// created an hour ago whose n recipients are all in that state (delivered,
// bounced, complained…), as account-health and metrics tests need them.
// It lifts the team's monthly quota out of the way first. The addresses are
// unique per call.
func SeedOutcomes(t testing.TB, st *store.Store, team uuid.UUID, outcomes map[string]int) {
	t.Helper()
	ctx := context.Background()
	if err := st.Accounts.SetPlan(ctx, team, "50k"); err != nil {
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
		if _, err := st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{e}}); err != nil {
			t.Fatalf("seeding %d %s recipients: %v", n, status, err)
		}
	}
}
