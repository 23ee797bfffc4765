package submit

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func strPtr(s string) *string { return &s }

// TestSuppressionAddress: the checks the API's POST /suppressions made
// before the Service, with the same messages.
func TestSuppressionAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		in      *string
		want    string
		missing bool
		msg     string
	}{
		{name: "absent", in: nil, missing: true, msg: "Missing `email` field."},
		{name: "blank", in: strPtr("  "), missing: true, msg: "Missing `email` field."},
		{name: "not an address", in: strPtr("nobody"),
			msg: "The `email` field must be an email address such as someone@example.com."},
		{name: "display name", in: strPtr("Ann <ann@example.com>"),
			msg: "The `email` field must be an email address such as someone@example.com."},
		{name: "sandbox", in: strPtr("bounced@posthaste.test"), msg: "Sandbox addresses of posthaste.test cannot be suppressed."},
		{name: "ok", in: strPtr("Ann@Example.COM"), want: "ann@example.com"},
	} {
		got, err := SuppressionAddress(tc.in)
		if tc.msg == "" {
			require.NoError(t, err, tc.name)
			require.Equal(t, tc.want, got, tc.name)
			continue
		}
		var ie *invalid.Error
		require.True(t, errors.As(err, &ie), "%s: %v", tc.name, err)
		require.Equal(t, tc.missing, ie.Missing, tc.name)
		require.Equal(t, tc.msg, ie.Message, tc.name)
		require.Equal(t, "email", ie.Field, tc.name)
	}
}

// TestSuppressionsAreAudited: adding and removing an entry by hand writes
// its audit entry with the actor given, and a refused or missing one
// writes none.
func TestSuppressionsAreAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	team, other := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, id := range []uuid.UUID{team, other} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: id, Name: "t"}))
	}
	s := NewEmails(st.Emails)
	key := uuid.Must(uuid.NewV7())
	by := audit.Entry{ActorType: audit.ActorAPIKey, ActorID: &key, ClientAddr: "192.0.2.1", UserAgent: "test"}
	entries := func() []audit.Entry {
		t.Helper()
		list, _, err := st.Privacy.ListAudit(ctx, team, audit.Filter{}, store.Page{Limit: 10})
		require.NoError(t, err)
		return list
	}

	_, err := s.AddSuppression(ctx, team, strPtr("nobody"), by)
	var ie *invalid.Error
	require.True(t, errors.As(err, &ie))
	require.Empty(t, entries(), "a refused change writes no entry")

	sp, err := s.AddSuppression(ctx, team, strPtr("Gone@Example.com"), by)
	require.NoError(t, err)
	require.Equal(t, "gone@example.com", sp.Email)
	require.Equal(t, store.SuppressionManual, sp.Reason)
	again, err := s.AddSuppression(ctx, team, strPtr("gone@example.com"), by)
	require.NoError(t, err)
	require.Equal(t, sp.ID, again.ID, "an address already listed keeps its entry")
	list := entries()
	require.Len(t, list, 2)
	for _, e := range list {
		require.Equal(t, audit.SuppressionCreate, e.Action)
		require.Equal(t, audit.Success, e.Outcome)
		require.Equal(t, "suppression", e.TargetType)
		require.Equal(t, sp.ID.String(), e.TargetID)
		require.Equal(t, audit.ActorAPIKey, e.ActorType)
		require.Equal(t, key, *e.ActorID)
		require.Equal(t, team, *e.TeamID)
	}

	for _, ref := range []string{"nothing", "a@b@c"} {
		_, err = s.DeleteSuppression(ctx, team, ref, by)
		var se *Error
		require.True(t, errors.As(err, &se), "%s: %v", ref, err)
		require.Equal(t, KindInvalidParameter, se.Kind)
		require.Equal(t, "The path must end in a suppression id or an email address.", se.Message)
	}
	_, err = s.DeleteSuppression(ctx, other, sp.ID.String(), by)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's entry")
	require.Len(t, entries(), 2)

	del, err := s.DeleteSuppression(ctx, team, "GONE@example.com", by)
	require.NoError(t, err)
	require.Equal(t, sp.ID, del.ID)
	list = entries()
	require.Len(t, list, 3)
	require.Equal(t, audit.SuppressionDelete, list[0].Action)
	require.Equal(t, sp.ID.String(), list[0].TargetID)
	_, err = s.DeleteSuppression(ctx, team, sp.ID.String(), by)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Len(t, entries(), 3)

	got, _, err := s.ListSuppressions(ctx, team, "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestGetWithBouncesOfAnotherTeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	_, _, err := NewEmails(st.Emails).GetWithBounces(ctx, uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()))
	require.ErrorIs(t, err, store.ErrNotFound)
}
