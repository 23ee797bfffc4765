package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// TestIdempotencyClaimRenewal: a renewed claim keeps its key past the
// lease it was claimed with, an unrenewed one is taken over, and a holder
// that lost its key can neither renew nor complete it.
func TestIdempotencyClaimRenewal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	claim := func(key string) store.IdempotencyClaim {
		return store.IdempotencyClaim{TeamID: team, Key: key, Endpoint: "POST /emails", Hash: []byte{1}, Token: uuid.New()}
	}

	// A lease that has already run out stands for a live holder whose
	// lease would have run out had it not been renewed.
	live := claim("live")
	rec, err := st.Emails.ClaimIdempotencyKey(ctx, live, -time.Second, 24*time.Hour)
	require.NoError(t, err)
	require.Nil(t, rec)
	require.NoError(t, st.Emails.RenewIdempotencyClaim(ctx, live, time.Minute))
	rival := live
	rival.Token = uuid.New()
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, rival, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.NotNil(t, rec, "a renewed claim keeps its key")
	require.Equal(t, store.IdempotencyInFlight, rec.State)
	e := newEmail(team, "delivered@posthaste.test")
	_, err = st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{e}, Idempotency: &live, Response: []byte(`{"id":"live"}`)})
	require.NoError(t, err)
	require.ErrorIs(t, st.Emails.RenewIdempotencyClaim(ctx, live, time.Minute), store.ErrClaimLost,
		"a completed claim is not in flight any more")
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, rival, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.IdempotencyCompleted, rec.State, "renewing a completed claim does not reopen it")
	require.JSONEq(t, `{"id":"live"}`, string(rec.Response))

	// A holder that stopped renewing (its process died) loses the key to
	// the next request, and then can neither renew nor write.
	dead := claim("dead")
	_, err = st.Emails.ClaimIdempotencyKey(ctx, dead, -time.Second, 24*time.Hour)
	require.NoError(t, err)
	heir := dead
	heir.Token = uuid.New()
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, heir, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Nil(t, rec, "an unrenewed claim is taken over")
	require.ErrorIs(t, st.Emails.RenewIdempotencyClaim(ctx, dead, time.Minute), store.ErrClaimLost)
	late := newEmail(team, "delivered@posthaste.test")
	_, err = st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{late}, Idempotency: &dead, Response: []byte(`{"id":"late"}`)})
	require.ErrorIs(t, err, store.ErrClaimLost)
	_, err = st.Emails.GetEmail(ctx, team, late.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "a lost claim writes nothing")
	require.NoError(t, st.Emails.RenewIdempotencyClaim(ctx, heir, time.Minute), "the heir holds the key")

	// A released claim is gone.
	gone := claim("gone")
	_, err = st.Emails.ClaimIdempotencyKey(ctx, gone, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.NoError(t, st.Emails.ReleaseIdempotencyKey(ctx, gone))
	require.ErrorIs(t, st.Emails.RenewIdempotencyClaim(ctx, gone, time.Minute), store.ErrClaimLost)
}
