package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func scheduledEmail(team uuid.UUID, at time.Time) store.Email {
	e := newEmail(team, "delivered@posthaste.test")
	e.Attachments = nil
	e.ScheduledAt = &at
	e.LastEvent = store.EventScheduled
	e.Recipients[0].Status = store.EventScheduled
	return e
}

func TestIdempotencyClaimCompleteReplayAndRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	claim := store.IdempotencyClaim{TeamID: team, Key: "welcome/1", Endpoint: "POST /emails", Hash: []byte{1}, Token: uuid.New()}
	rec, err := st.Emails.ClaimIdempotencyKey(ctx, claim, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Nil(t, rec, "the first request claims the key")

	other := claim
	other.Token = uuid.New()
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, other, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.IdempotencyInFlight, rec.State, "a second request sees it in flight")

	// Only the holder completes the claim.
	e := newEmail(team, "delivered@posthaste.test")
	_, err = st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{e}, Idempotency: &other, Response: []byte(`{"id":"x"}`)})
	require.ErrorIs(t, err, store.ErrClaimLost)
	_, err = st.Emails.GetEmail(ctx, team, e.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "a lost claim writes nothing")

	_, err = st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{e}, Idempotency: &claim, Response: []byte(`{"id":"x"}`)})
	require.NoError(t, err)
	got, err := st.Emails.GetEmail(ctx, team, e.ID)
	require.NoError(t, err)
	require.Equal(t, "welcome/1", *got.IdempotencyKey)

	rec, err = st.Emails.ClaimIdempotencyKey(ctx, other, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.IdempotencyCompleted, rec.State)
	require.JSONEq(t, `{"id":"x"}`, string(rec.Response))
	require.Equal(t, []byte{1}, rec.Hash)

	// Another team's key space is its own.
	claimB := claim
	claimB.TeamID = newTeam(t, st)
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, claimB, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Nil(t, rec)
	require.NoError(t, st.Emails.ReleaseIdempotencyKey(ctx, claimB))
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, claimB, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Nil(t, rec, "a released key can be claimed again")

	// A claim whose lease ran out (its process died) is taken over, and an
	// expired record is replaced.
	dead := store.IdempotencyClaim{TeamID: team, Key: "dead", Endpoint: "POST /emails", Hash: []byte{2}, Token: uuid.New()}
	_, err = st.Emails.ClaimIdempotencyKey(ctx, dead, -time.Second, 24*time.Hour)
	require.NoError(t, err)
	heir := dead
	heir.Token = uuid.New()
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, heir, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Nil(t, rec)
	old := store.IdempotencyClaim{TeamID: team, Key: "old", Endpoint: "POST /emails", Hash: []byte{3}, Token: uuid.New()}
	_, err = st.Emails.ClaimIdempotencyKey(ctx, old, time.Minute, -time.Second)
	require.NoError(t, err)
	rec, err = st.Emails.ClaimIdempotencyKey(ctx, store.IdempotencyClaim{TeamID: team, Key: "old", Endpoint: "POST /emails/batch",
		Hash: []byte{4}, Token: uuid.New()}, time.Minute, 24*time.Hour)
	require.NoError(t, err)
	require.Nil(t, rec, "an expired key is free again")
	n, err := st.PurgeIdempotencyKeys(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestClaimForSendingRespectsScheduleAndCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	now := time.Now()
	e := scheduledEmail(team, now.Add(time.Hour))
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)

	c, err := st.Emails.ClaimForSending(ctx, e.ID, now, 2*time.Second)
	require.NoError(t, err)
	require.False(t, c.Claimed, "not due yet")
	require.Equal(t, store.EventScheduled, c.LastEvent)
	require.WithinDuration(t, now.Add(time.Hour), *c.ScheduledAt, time.Millisecond)

	// Rescheduled earlier: the workflow has started (no outbox entry), so
	// it is woken inside the transaction.
	_, err = st.Webhooks.DrainOutbox(ctx, 100, func(_ context.Context, items []store.OutboxItem) []store.OutboxResult {
		ids := make([]store.OutboxResult, len(items))
		for i, it := range items {
			ids[i] = store.OutboxResult{ID: it.ID, Done: true}
		}
		return ids
	})
	require.NoError(t, err)
	var woke []store.EmailRef
	soon := now.Add(time.Second)
	require.NoError(t, st.Emails.RescheduleEmail(ctx, team, e.ID, soon, func(_ context.Context, r store.EmailRef) error {
		woke = append(woke, r)
		return nil
	}))
	require.Len(t, woke, 1)
	require.True(t, woke[0].Started)
	got, err := st.Emails.GetEmail(ctx, team, e.ID)
	require.NoError(t, err)
	require.WithinDuration(t, soon, *got.ScheduledAt, time.Millisecond)
	require.Equal(t, store.EventScheduled, got.LastEvent)

	// A failing wake rolls the reschedule back.
	err = st.Emails.RescheduleEmail(ctx, team, e.ID, now.Add(2*time.Hour), func(context.Context, store.EmailRef) error {
		return errors.New("temporal down")
	})
	require.Error(t, err)
	got, _ = st.Emails.GetEmail(ctx, team, e.ID)
	require.WithinDuration(t, soon, *got.ScheduledAt, time.Millisecond)

	c, err = st.Emails.ClaimForSending(ctx, e.ID, now, 2*time.Second)
	require.NoError(t, err)
	require.True(t, c.Claimed, "due within the skew")
	c, err = st.Emails.ClaimForSending(ctx, e.ID, now, 2*time.Second)
	require.NoError(t, err)
	require.False(t, c.Claimed, "claimed once")
	require.Equal(t, store.EventSent, c.LastEvent)

	_, err = st.Emails.CancelEmail(ctx, team, e.ID)
	var se *store.StateError
	require.ErrorAs(t, err, &se)
	require.Equal(t, store.EventSent, se.LastEvent)
	err = st.Emails.RescheduleEmail(ctx, team, e.ID, now.Add(time.Hour), nil)
	require.ErrorAs(t, err, &se)
	_, err = st.Emails.CancelEmail(ctx, newTeam(t, st), e.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's email is not found")

	// Canceled before its time: never claimed, not reschedulable.
	e2 := scheduledEmail(team, now.Add(time.Hour))
	_, err = storetest.InsertEmail(ctx, st, e2)
	require.NoError(t, err)
	ref, err := st.Emails.CancelEmail(ctx, team, e2.ID)
	require.NoError(t, err)
	require.False(t, ref.Started, "its workflow had not started")
	n, err := storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Zero(t, n, "nor will it: the outbox entry went with the cancel")
	c, err = st.Emails.ClaimForSending(ctx, e2.ID, now.Add(2*time.Hour), 0)
	require.NoError(t, err)
	require.False(t, c.Claimed)
	require.Equal(t, store.EventCanceled, c.LastEvent)
	err = st.Emails.RescheduleEmail(ctx, team, e2.ID, now.Add(time.Hour), nil)
	require.ErrorAs(t, err, &se)
	require.Equal(t, store.EventCanceled, se.LastEvent)
	got, _ = st.Emails.GetEmail(ctx, team, e2.ID)
	require.Equal(t, store.EventCanceled, got.Recipients[0].Status)
}

// TestClaimRacesCancel runs the sender's claim against a cancel at the
// same moment, many times: exactly one of them wins each time.
func TestClaimRacesCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	for range 30 {
		now := time.Now()
		e := scheduledEmail(team, now)
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var claimed, canceled bool
		var claimErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			var c store.SendClaim
			c, claimErr = st.Emails.ClaimForSending(ctx, e.ID, now, time.Second)
			claimed = c.Claimed
		}()
		go func() {
			defer wg.Done()
			_, err := st.Emails.CancelEmail(ctx, team, e.ID)
			canceled = err == nil
		}()
		wg.Wait()
		require.NoError(t, claimErr)
		require.True(t, claimed != canceled, "claimed %v, canceled %v", claimed, canceled)
		evs, err := st.Emails.Events(ctx, e.ID)
		require.NoError(t, err)
		require.Len(t, evs, 2, "scheduled and one of sent/canceled")
	}
}

func TestBatchAcceptance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	accept := func(n int) ([]store.Email, uuid.UUID, time.Duration) {
		batch := uuid.Must(uuid.NewV7())
		var emails []store.Email
		for range n {
			e := newEmail(team, "delivered@posthaste.test")
			e.Attachments = nil
			emails = append(emails, e)
		}
		start := time.Now()
		used, err := st.Emails.Accept(ctx, store.Acceptance{Emails: emails, BatchID: &batch})
		require.NoError(t, err)
		require.Positive(t, used, "the quota counts the batch")
		return emails, batch, time.Since(start)
	}
	accept(1) // prepares the statements on a connection
	var one, hundred time.Duration
	for range 5 {
		_, _, d := accept(1)
		one += d
		_, _, d = accept(100)
		hundred += d
	}
	t.Logf("accepting in the store: 1 email %v, 100 emails %v", one/5, hundred/5)
	emails, batch, _ := accept(100)
	got, err := st.Emails.BatchEmails(ctx, batch)
	require.NoError(t, err)
	require.Len(t, got, 100)
	for i := range got {
		require.Equal(t, emails[i].ID, got[i].ID, "request order")
	}
	// Listed again after some emails were claimed (a SendBatch whose first
	// task died), the claimed and delayed ones are still its to finish;
	// those with an outcome are not.
	_, err = st.Emails.ClaimForSending(ctx, emails[0].ID, time.Now(), 0)
	require.NoError(t, err)
	_, err = st.Emails.ClaimForSending(ctx, emails[1].ID, time.Now(), 0)
	require.NoError(t, err)
	require.NoError(t, st.Emails.RecordEvents(ctx, emails[1].ID, []store.Event{{Type: store.EventDeliveryDelayed,
		Recipient: "delivered@posthaste.test"}}))
	_, err = st.Emails.ClaimForSending(ctx, emails[2].ID, time.Now(), 0)
	require.NoError(t, err)
	require.NoError(t, st.Emails.RecordEvents(ctx, emails[2].ID, []store.Event{{Type: store.EventDelivered,
		Recipient: "delivered@posthaste.test"}}))
	got, err = st.Emails.BatchEmails(ctx, batch)
	require.NoError(t, err)
	require.Len(t, got, 99)
	require.Equal(t, []uuid.UUID{emails[0].ID, emails[1].ID, emails[3].ID}, []uuid.UUID{got[0].ID, got[1].ID, got[2].ID})
	l, err := storetest.OutboxLen(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 12, l, "one outbox entry per batch")
}
