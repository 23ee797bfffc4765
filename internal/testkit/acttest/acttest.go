// Package acttest runs activities in tests the way a worker does, so that
// the activities of every area (each in the package of its area) are
// tested alike, and makes what they run on: queued emails, verified
// domains with sealed keys.
package acttest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/testsuite"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/seal"
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

// NewBox returns a sealing box under a new master key.
func NewBox(t testing.TB) *seal.Box {
	t.Helper()
	k, err := seal.NewKey()
	if err != nil {
		t.Fatalf("making a master key: %v", err)
	}
	raw, err := seal.ParseKey(k)
	if err != nil {
		t.Fatalf("parsing the master key: %v", err)
	}
	b, err := seal.New(raw)
	if err != nil {
		t.Fatalf("making a box: %v", err)
	}
	return b
}

// InsertDomain adds a verified domain called name, with a DKIM key sealed
// by box, to a new team, and returns it with its key.
func InsertDomain(t testing.TB, st *store.Store, box *seal.Box, name string) (store.Domain, dkim.Key) {
	t.Helper()
	ctx := context.Background()
	team := uuid.Must(uuid.NewV7())
	if err := st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}); err != nil {
		t.Fatalf("creating a team: %v", err)
	}
	key, err := dkim.GenerateKey()
	if err != nil {
		t.Fatalf("making a DKIM key: %v", err)
	}
	d := store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: name, Region: "eu-west-1",
		Status: store.DomainVerified, ReturnPath: "bounce", TLS: store.TLSEnforced, DKIMSelector: "sel",
		DKIMPublicKey: key.PublicBase64}
	if d.DKIMPrivateKey, err = box.Seal(key.PrivatePKCS8, d.ID[:]); err != nil {
		t.Fatalf("sealing the DKIM key: %v", err)
	}
	if err := st.Domains.CreateDomain(ctx, d); err != nil {
		t.Fatalf("creating a domain: %v", err)
	}
	return d, key
}

// DomainEmail stores a queued text email from domain d to rcpts (a
// Reply-To and a List-Unsubscribe header), created now.
func DomainEmail(t testing.TB, st *store.Store, d store.Domain, rcpts ...string) store.Email {
	t.Helper()
	text := "Hello from a verified domain."
	e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: d.TeamID, DomainID: &d.ID,
		From: "Shop <hello@" + d.Name + ">", FromDomain: d.Name, To: rcpts, Subject: "Signed", Text: &text,
		ReplyTo:   []string{"help@" + d.Name},
		Headers:   []store.Header{{Name: "List-Unsubscribe", Value: "<mailto:u@" + d.Name + ">"}},
		LastEvent: store.EventQueued, CreatedAt: time.Now()}
	for _, r := range rcpts {
		_, dom, _ := strings.Cut(r, "@")
		e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: dom, Status: store.EventQueued})
	}
	if _, err := storetest.InsertEmail(context.Background(), st, e); err != nil {
		t.Fatalf("inserting an email: %v", err)
	}
	return e
}

// RecipientStatus maps each recipient of e to its current status.
func RecipientStatus(t testing.TB, st *store.Store, e store.Email) map[string]string {
	t.Helper()
	got, err := st.Emails.GetEmail(context.Background(), e.TeamID, e.ID)
	if err != nil {
		t.Fatalf("reading an email: %v", err)
	}
	out := map[string]string{}
	for _, r := range got.Recipients {
		out[r.Address] = r.Status
	}
	return out
}
