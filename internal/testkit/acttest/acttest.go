// Package acttest runs activities in tests the way a worker does, so that
// the activities of every area (package activities and the area packages
// that hold their workflows' activities) are tested alike.
package acttest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/testsuite"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// Run executes the activity fn with input in the way a worker does (with
// activity info) and returns its result, decoded as O.
func Run[I, O any](t testing.TB, fn any, in I) (O, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(fn)
	var out O
	val, err := env.ExecuteActivity(fn, in)
	if err == nil && val.HasValue() {
		if derr := val.Get(&out); derr != nil {
			t.Fatalf("decoding the activity's result: %v", derr)
		}
	}
	return out, err
}

// InsertEmail stores a queued email from the sandbox sender to rcpts (an
// HTML body with a link, a text part generated from it, one custom
// header) in a new team, created now.
func InsertEmail(t testing.TB, st *store.Store, rcpts ...string) store.Email {
	t.Helper()
	return InsertEmailAt(t, st, time.Now(), rcpts...)
}

// InsertEmailAt is InsertEmail, created at at.
func InsertEmailAt(t testing.TB, st *store.Store, at time.Time, rcpts ...string) store.Email {
	t.Helper()
	ctx := context.Background()
	team := uuid.Must(uuid.NewV7())
	if err := st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}); err != nil {
		t.Fatalf("creating a team: %v", err)
	}
	html := "<p>Hello <a href=\"https://example.com\">there</a></p>"
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "Acme <onboarding@posthaste.test>",
		FromDomain: "posthaste.test", To: rcpts, Subject: "Hi ✓", HTML: &html, GenerateText: true,
		Headers:   []store.Header{{Name: "X-Entity-Ref-ID", Value: "7"}},
		LastEvent: store.EventQueued, CreatedAt: at}
	for _, r := range rcpts {
		_, domain, _ := strings.Cut(r, "@")
		e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: domain, Status: store.EventQueued})
	}
	if _, err := storetest.InsertEmail(ctx, st, e); err != nil {
		t.Fatalf("inserting an email: %v", err)
	}
	return e
}
