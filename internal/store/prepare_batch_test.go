package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// TestClaimManyForSending: one call claims what ClaimForSending would
// claim of each email (queued, or scheduled and due) and reports the state
// of the others; a repeat claims nothing and records `sent` once.
func TestClaimManyForSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	now := time.Now()
	queued := newEmail(team, "delivered@posthaste.test")
	due := scheduledEmail(team, now.Add(time.Second)) // within the skew
	later := scheduledEmail(team, now.Add(time.Hour))
	canceled := scheduledEmail(team, now.Add(time.Hour))
	for _, e := range []store.Email{queued, due, later, canceled} {
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
	}
	_, err := st.Emails.CancelEmail(ctx, team, canceled.ID)
	require.NoError(t, err)
	gone := uuid.Must(uuid.NewV7())
	ids := []uuid.UUID{queued.ID, due.ID, later.ID, canceled.ID, gone}

	claims, err := st.Emails.ClaimManyForSending(ctx, ids, now, 2*time.Second)
	require.NoError(t, err)
	require.Len(t, claims, 4, "the unknown email has no claim")
	require.Equal(t, store.SendClaim{Claimed: true, LastEvent: store.EventSent}, claims[queued.ID])
	require.True(t, claims[due.ID].Claimed)
	require.Equal(t, store.EventSent, claims[due.ID].LastEvent)
	require.False(t, claims[later.ID].Claimed)
	require.Equal(t, store.EventScheduled, claims[later.ID].LastEvent)
	require.WithinDuration(t, *later.ScheduledAt, *claims[later.ID].ScheduledAt, time.Millisecond)
	require.Equal(t, store.SendClaim{LastEvent: store.EventCanceled, ScheduledAt: claims[canceled.ID].ScheduledAt},
		claims[canceled.ID])

	again, err := st.Emails.ClaimManyForSending(ctx, ids, now, 2*time.Second)
	require.NoError(t, err)
	for _, id := range []uuid.UUID{queued.ID, due.ID} {
		require.False(t, again[id].Claimed, "claimed once")
		require.Equal(t, store.EventSent, again[id].LastEvent)
		evs, err := st.Emails.Events(ctx, id)
		require.NoError(t, err)
		require.Len(t, evs, 2, "accepted, sent")
		require.Equal(t, store.EventSent, evs[1].Type)
		got, err := st.Emails.GetEmail(ctx, team, id)
		require.NoError(t, err)
		require.Equal(t, store.EventSent, got.Recipients[0].Status)
		require.Equal(t, id.String()+"@posthaste.test", got.MessageID, "the claim fixes the Message-ID")
	}
	one, err := st.Emails.ClaimForSending(ctx, later.ID, now, 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, one, again[later.ID], "as ClaimForSending reports it")

	none, err := st.Emails.ClaimManyForSending(ctx, nil, now, time.Second)
	require.NoError(t, err)
	require.Empty(t, none)
}

// TestEmailsForSendingLoadsAsEmailForSending: the set-based load returns,
// for each email, what EmailForSending returns for it alone, sealed
// content opened: the email with its attachments and submitted source,
// its domain, its IP pool and its stored message.
func TestEmailsForSendingLoadsAsEmailForSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, _ := sealedStore(t)
	team := newTeam(t, st)
	d := newDomain(team, "shop.test")
	require.NoError(t, st.Domains.CreateDomain(ctx, d))
	require.NoError(t, st.Domains.SyncIPPools(ctx, []store.IPPool{{Name: "bulk", Addresses: []store.IPAddress{
		ipAddr("203.0.113.5", "mta1.example.com")}}}))
	require.NoError(t, st.Domains.SetDomainIPPool(ctx, d.ID, "bulk"))

	plain := newEmail(team, "delivered@posthaste.test")
	plain.Attachments = append(plain.Attachments, store.Attachment{Filename: "b.bin", ContentType: "application/octet-stream",
		Content: []byte{0, 1, 2}})
	submitted := newEmail(team, "delivered@posthaste.test")
	submitted.Attachments, submitted.Source = nil, []byte("Subject: as submitted\r\n\r\nhi\r\n")
	fromDomain := newEmail(team, "a@dest.test")
	fromDomain.DomainID, fromDomain.From, fromDomain.FromDomain = &d.ID, "hello@shop.test", "shop.test"
	built := newEmail(team, "delivered@posthaste.test")
	for _, e := range []store.Email{plain, submitted, fromDomain, built} {
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
	}
	_, err := st.Emails.SaveMessage(ctx, team, built.ID, "m@x", []byte("Subject: built\r\n\r\nhi\r\n"))
	require.NoError(t, err)

	ids := []uuid.UUID{plain.ID, submitted.ID, fromDomain.ID, built.ID, uuid.Must(uuid.NewV7())}
	for _, attachments := range []bool{true, false} {
		got, err := st.Emails.EmailsForSending(ctx, ids, attachments)
		require.NoError(t, err)
		require.Len(t, got, 4, "the unknown email is left out")
		for _, id := range ids[:4] {
			want, err := st.Emails.EmailForSending(ctx, id, attachments)
			require.NoError(t, err)
			require.Equal(t, want, *got[id], "email %s, attachments %v", id, attachments)
		}
		require.Len(t, got[plain.ID].Email.Attachments, map[bool]int{true: 2, false: 0}[attachments])
	}
	got, err := st.Emails.EmailsForSending(ctx, ids, true)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 1, 2}, got[plain.ID].Email.Attachments[1].Content, "opened")
	require.Equal(t, submitted.Source, got[submitted.ID].Email.Source)
	require.Equal(t, "bulk", got[fromDomain.ID].IPPool)
	require.Equal(t, d.ID, got[fromDomain.ID].Domain.ID)
	require.Nil(t, got[plain.ID].Domain)
	require.Equal(t, "Subject: built\r\n\r\nhi\r\n", string(got[built.ID].Message))
	require.Nil(t, got[plain.ID].Message)
}

// TestSaveMessagesKeepsTheFirst: SaveMessages stores each email's message
// once (sealed like SaveMessage's), and only for the team's own emails.
func TestSaveMessagesKeepsTheFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, _ := sealedStore(t)
	team, other := newTeam(t, st), newTeam(t, st)
	a, b, theirs := newEmail(team, "delivered@posthaste.test"), newEmail(team, "delivered@posthaste.test"),
		newEmail(other, "delivered@posthaste.test")
	for _, e := range []store.Email{a, b, theirs} {
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
	}
	_, err := st.Emails.SaveMessage(ctx, team, a.ID, "first@x", []byte("first"))
	require.NoError(t, err)
	require.NoError(t, st.Emails.SaveMessages(ctx, team, []store.BuiltMessage{
		{EmailID: a.ID, MessageID: "second@x", Data: []byte("second")},
		{EmailID: b.ID, MessageID: "b@x", Data: []byte("b")},
		{EmailID: theirs.ID, MessageID: "t@x", Data: []byte("t")},
	}))
	require.NoError(t, st.Emails.SaveMessages(ctx, team, nil))
	for id, want := range map[uuid.UUID]string{a.ID: "first", b.ID: "b"} {
		msg, err := st.Emails.Message(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, string(msg))
	}
	_, err = st.Emails.Message(ctx, theirs.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another team's email gets no message")
	got, err := st.Emails.GetEmail(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, "b@x", got.MessageID)
	got, err = st.Emails.GetEmail(ctx, team, a.ID)
	require.NoError(t, err)
	require.Equal(t, "first@x", got.MessageID)
}

// TestRecordManyEvents: the events of several emails are recorded as
// RecordEvents records them, all or none.
func TestRecordManyEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	a, b := newEmail(team, "delivered@posthaste.test"), newEmail(team, "complained@posthaste.test")
	for _, e := range []store.Email{a, b} {
		_, err := storetest.InsertEmail(ctx, st, e)
		require.NoError(t, err)
	}
	delivered := func(rcpt string) store.Event { return store.Event{Type: store.EventDelivered, Recipient: rcpt} }
	batch := []store.EmailEvents{
		{EmailID: a.ID, Events: []store.Event{delivered("delivered@posthaste.test")}},
		{EmailID: b.ID, Events: []store.Event{delivered("complained@posthaste.test"),
			{Type: store.EventComplained, Recipient: "complained@posthaste.test"}}},
	}
	require.NoError(t, st.Emails.RecordManyEvents(ctx, batch))
	require.NoError(t, st.Emails.RecordManyEvents(ctx, batch), "a repeat records nothing twice")
	require.NoError(t, st.Emails.RecordManyEvents(ctx, nil))
	for id, want := range map[uuid.UUID][]string{a.ID: {"queued", "delivered"}, b.ID: {"queued", "delivered", "complained"}} {
		evs, err := st.Emails.Events(ctx, id)
		require.NoError(t, err)
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		require.Equal(t, want, types)
	}
	got, err := st.Emails.GetEmail(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventComplained, got.LastEvent)

	// An email that no longer exists fails the whole call, and nothing
	// of it is recorded.
	c := newEmail(team, "delivered@posthaste.test")
	_, err = storetest.InsertEmail(ctx, st, c)
	require.NoError(t, err)
	err = st.Emails.RecordManyEvents(ctx, []store.EmailEvents{
		{EmailID: c.ID, Events: []store.Event{delivered("delivered@posthaste.test")}},
		{EmailID: uuid.Must(uuid.NewV7()), Events: []store.Event{{Type: store.EventComplained, Recipient: "x@posthaste.test"}}},
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	evs, err := st.Emails.Events(ctx, c.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1, "only its acceptance")
}
