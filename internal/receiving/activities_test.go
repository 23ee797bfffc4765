package receiving_test

import (
	"os"
	"testing"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/dkim"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/acttest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// newActivities is the activity of ProcessInbound with the keys a process
// with master key box derives, acting on the complaints of the feedback
// loops of fbl.
func newActivities(st *store.Store, box *seal.Box, fbl ...string) *receiving.Activities {
	return receiving.NewActivities(receiving.ActivitiesConfig{VERPKey: box.DeriveKey(reports.VERPKeyPurpose),
		UnsubscribeMailtoKey: box.DeriveKey(mailto.KeyPurpose), FBLDomains: fbl}, st)
}

// run executes an activity the way a worker does (with activity info).
func run[I, O any](t *testing.T, fn any, in I) (O, error) {
	t.Helper()
	return acttest.Run[I, O](t, fn, in)
}

func newBox(t *testing.T) *seal.Box {
	t.Helper()
	return acttest.NewBox(t)
}

func insertDomain(t *testing.T, st *store.Store, box *seal.Box, name string) (store.Domain, dkim.Key) {
	t.Helper()
	return acttest.InsertDomain(t, st, box, name)
}

func domainEmail(t *testing.T, st *store.Store, d store.Domain, rcpts ...string) store.Email {
	t.Helper()
	return acttest.DomainEmail(t, st, d, rcpts...)
}

func recipientStatus(t *testing.T, st *store.Store, e store.Email) map[string]string {
	t.Helper()
	return acttest.RecipientStatus(t, st, e)
}

// perEmailPath is the signed per-email return path of an email from d, as
// emails were sent before per-recipient return paths.
func perEmailPath(key []byte, emailID uuid.UUID, d store.Domain) string {
	return reports.SignedReturnPath(key, emailID, d.ReturnPath+"."+d.Name)
}
