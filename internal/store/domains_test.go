package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
)

func newDomain(team uuid.UUID, name string) store.Domain {
	return store.Domain{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: name, Region: "us-east-1",
		Status: store.DomainNotStarted, ReturnPath: "send", TLS: store.TLSOpportunistic, DKIMSelector: "posthaste",
		DKIMPublicKey: "cHVibGlj", DKIMPrivateKey: []byte("sealed"), RecordStatus: map[string]string{"dkim": "not_started"}}
}

func TestDomainLifecycleAndTeamIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	has, err := st.HasDomains(ctx)
	require.NoError(t, err)
	require.False(t, has)

	d := newDomain(teamA, "example.test")
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	require.ErrorIs(t, st.Domains.CreateDomain(ctx, newDomain(teamA, "example.test")), store.ErrConflict, "one live domain per name and team")
	require.NoError(t, st.Domains.CreateDomain(ctx, newDomain(teamB, "example.test")), "another team may add it too")
	has, err = st.HasDomains(ctx)
	require.NoError(t, err)
	require.True(t, has)

	got, err := st.Domains.GetDomain(ctx, teamA, d.ID)
	require.NoError(t, err)
	require.Equal(t, "example.test", got.Name)
	require.Equal(t, []byte("sealed"), got.DKIMPrivateKey)
	require.False(t, got.Sendable())
	_, err = st.Domains.GetDomain(ctx, teamB, d.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's domain is not found")
	require.ErrorIs(t, st.Domains.UpdateDomain(ctx, teamB, d.ID, store.DomainUpdate{}, audit.Entry{}), store.ErrNotFound)
	require.ErrorIs(t, st.Domains.DeleteDomain(ctx, teamB, d.ID, audit.Entry{}), store.ErrNotFound)
	list, more, err := st.Domains.ListDomains(ctx, teamA, store.Page{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, list, 1)

	tls := store.TLSEnforced
	yes := true
	require.NoError(t, st.Domains.UpdateDomain(ctx, teamA, d.ID, store.DomainUpdate{TLS: &tls, ClickTracking: &yes}, audit.Entry{}))
	got, err = st.Domains.GetDomain(ctx, teamA, d.ID)
	require.NoError(t, err)
	require.Equal(t, store.TLSEnforced, got.TLS)
	require.True(t, got.ClickTracking)
	require.False(t, got.OpenTracking, "unset fields stay")

	got, err = st.Domains.MarkDomainPending(ctx, teamA, d.ID)
	require.NoError(t, err)
	require.Equal(t, store.DomainPending, got.Status)
	require.Equal(t, map[string]string{"dkim": "pending"}, got.RecordStatus)
	require.NoError(t, st.Domains.SetDomainStatus(ctx, d.ID, store.DomainVerified, map[string]string{"dkim": "verified"}))
	got, err = st.Domains.DomainByName(ctx, teamA, "example.test")
	require.NoError(t, err)
	require.True(t, got.Sendable())
	require.NotNil(t, got.VerifiedAt)
	got, err = st.Domains.MarkDomainPending(ctx, teamA, d.ID)
	require.NoError(t, err)
	require.Equal(t, store.DomainVerified, got.Status, "a verified domain stays verified while rechecked")

	require.NoError(t, st.Domains.DeleteDomain(ctx, teamA, d.ID, audit.Entry{}))
	_, err = st.Domains.DomainByName(ctx, teamA, "example.test")
	require.ErrorIs(t, err, store.ErrNotFound, "a deleted domain sends nothing new")
	old, err := st.Domains.DomainByID(ctx, d.ID)
	require.NoError(t, err, "but its key still signs what was accepted")
	require.NotNil(t, old.DeletedAt)
	require.False(t, old.Sendable())
	require.NoError(t, st.Domains.CreateDomain(ctx, newDomain(teamA, "example.test")), "the name can be added again")
}

func TestSuppressionsAndTeamIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	emailID := uuid.Must(uuid.NewV7())
	sp, created, err := st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: teamA,
		Email: "Gone@Example.test", Reason: store.SuppressionBounce, EmailID: &emailID})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "gone@example.test", sp.Email)
	again, created, err := st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: teamA,
		Email: "gone@example.test", Reason: store.SuppressionManual})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, sp.ID, again.ID, "the first entry stays")
	require.Equal(t, store.SuppressionBounce, again.Reason)

	got, err := st.Emails.Suppressed(ctx, teamA, []string{"GONE@example.test", "ok@example.test"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"gone@example.test": true}, got)
	got, err = st.Emails.Suppressed(ctx, teamB, []string{"gone@example.test"})
	require.NoError(t, err)
	require.Empty(t, got, "suppression lists are per team")
	list, _, err := st.Emails.ListSuppressions(ctx, teamB, "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)
	by := audit.Entry{ActorType: audit.ActorSystem, Outcome: audit.Success}
	_, err = st.Emails.DeleteSuppression(ctx, teamB, &sp.ID, "", by)
	require.ErrorIs(t, err, store.ErrNotFound)

	del, err := st.Emails.DeleteSuppression(ctx, teamA, nil, "gone@EXAMPLE.test", by)
	require.NoError(t, err)
	require.Equal(t, sp.ID, del.ID)
	_, err = st.Emails.DeleteSuppression(ctx, teamA, &sp.ID, "", by)
	require.ErrorIs(t, err, store.ErrNotFound)
}
