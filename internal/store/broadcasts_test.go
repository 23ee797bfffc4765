package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// audience creates a segment of team with n contacts whose addresses are
// delivered+<i>@posthaste.test, and returns the segment and the contacts
// in id order.
func audience(t *testing.T, st *store.Store, team uuid.UUID, n int) (uuid.UUID, []store.Contact) {
	t.Helper()
	ctx := context.Background()
	seg, err := st.Audience.CreateSegment(ctx, store.Segment{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "all"})
	require.NoError(t, err)
	var out []store.Contact
	for i := range n {
		c := newContact(team, fmt.Sprintf("delivered+%d@posthaste.test", i))
		c.FirstName = fmt.Sprintf("Ann%d", i)
		got, err := st.Audience.CreateContact(ctx, c, []uuid.UUID{seg.ID}, nil)
		require.NoError(t, err)
		out = append(out, got)
	}
	return seg.ID, out
}

func newBroadcast(t *testing.T, st *store.Store, team, segment uuid.UUID) store.Broadcast {
	t.Helper()
	html := "<p>Hi {{{FIRST_NAME}}}</p>"
	b, err := st.Broadcasts.CreateBroadcast(context.Background(), store.Broadcast{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Name: "news", SegmentID: &segment, From: "onboarding@posthaste.test", Subject: "News", HTML: &html})
	require.NoError(t, err)
	return b
}

// renderNames fills FIRST_NAME, and refuses contacts without one.
func renderNames(b store.Broadcast, c store.BroadcastContact) (store.RenderedBroadcast, error) {
	if c.FirstName == "" {
		return store.RenderedBroadcast{}, errors.New("no first name")
	}
	h := strings.ReplaceAll(*b.HTML, "{{{FIRST_NAME}}}", c.FirstName)
	return store.RenderedBroadcast{Subject: b.Subject, HTML: &h}, nil
}

func chunk(b store.Broadcast, seq int, after *uuid.UUID, size int) store.BroadcastChunk {
	return store.BroadcastChunk{BroadcastID: b.ID, Seq: seq, After: after, Size: size, FromDomain: "posthaste.test",
		Now: time.Now()}
}

func TestBroadcastChunksHandEachContactOverOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	seg, contacts := audience(t, st, team, 7)
	b := newBroadcast(t, st, team, seg)

	// Not sent yet: a chunk refuses a draft.
	_, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 0, nil, 3), renderNames)
	require.Error(t, err)
	_, err = st.Broadcasts.SendBroadcast(ctx, team, b.ID, nil, nil)
	require.NoError(t, err)

	// One contact unsubscribed from everything, one whose render fails.
	unsub := true
	_, err = st.Audience.UpdateContact(ctx, team, store.ContactRef{ID: &contacts[1].ID}, store.ContactUpdate{Unsubscribed: &unsub})
	require.NoError(t, err)
	empty := ""
	_, err = st.Audience.UpdateContact(ctx, team, store.ContactRef{ID: &contacts[4].ID}, store.ContactUpdate{FirstName: &empty})
	require.NoError(t, err)

	r0, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 0, nil, 3), renderNames)
	require.NoError(t, err)
	require.Equal(t, 3, r0.Emails, "3 contacts after skipping the unsubscribed one")
	require.Equal(t, contacts[3].ID, *r0.Last)
	require.NotNil(t, r0.BatchID)

	// The same chunk again (a retried step) returns what it did and adds nothing.
	again, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 0, nil, 3), renderNames)
	require.NoError(t, err)
	require.Equal(t, r0, again)

	r1, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 1, r0.Last, 3), renderNames)
	require.NoError(t, err)
	require.Equal(t, 2, r1.Emails)
	require.Equal(t, 1, r1.Failed)
	require.Equal(t, contacts[6].ID, *r1.Last)

	r2, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 2, r1.Last, 3), renderNames)
	require.NoError(t, err)
	require.True(t, r2.Done)

	got, err := st.Broadcasts.Broadcast(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastSending, got.Status)

	counts, err := st.Broadcasts.BroadcastCounts(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, int64(6), counts.Total, "one email per contact but the unsubscribed one")
	require.Equal(t, int64(5), counts.Queued)
	require.Equal(t, int64(1), counts.Failed)

	// Each email names its contact once, and the failure says why.
	all, _, err := st.Broadcasts.BroadcastRecipients(ctx, team, b.ID, "", "", "", store.Page{Limit: 100})
	require.NoError(t, err)
	seen := map[uuid.UUID]bool{}
	for _, r := range all {
		require.False(t, seen[*r.ContactID], "contact %s got the broadcast twice", *r.ContactID)
		seen[*r.ContactID] = true
		require.NotEqual(t, contacts[1].ID, *r.ContactID, "the unsubscribed contact got it")
	}
	failed, _, err := st.Broadcasts.BroadcastRecipients(ctx, team, b.ID, "failed", "", "", store.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, contacts[4].ID, *failed[0].ContactID)
	evs, err := st.Emails.Events(ctx, failed[0].EmailID)
	require.NoError(t, err)
	require.Equal(t, store.EventFailed, evs[len(evs)-1].Type)
	require.Equal(t, "no first name", evs[len(evs)-1].Detail["reason"])

	// The sendable emails of a chunk form one batch, rendered per contact.
	e, err := st.Emails.GetEmail(ctx, team, all[len(all)-1].EmailID)
	require.NoError(t, err)
	require.Equal(t, r0.BatchID, e.BatchID)
	require.Equal(t, b.ID, *e.BroadcastID)
	require.Equal(t, "<p>Hi Ann0</p>", *e.HTML)

	// Another team sees none of it.
	other := newTeam(t, st)
	_, err = st.Broadcasts.Broadcast(ctx, other, b.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	oc, err := st.Broadcasts.BroadcastCounts(ctx, other, b.ID)
	require.NoError(t, err)
	require.Zero(t, oc.Total)
	_, err = st.Broadcasts.CancelBroadcast(ctx, other, b.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A topic's opt-outs are skipped; with an opt-in topic, contacts that
// never opted in are too.
func TestBroadcastChunksHonourTopics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	seg, contacts := audience(t, st, team, 3)
	for _, def := range []string{store.TopicOptIn, store.TopicOptOut} {
		topic, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: def,
			DefaultSubscription: def, Visibility: "public"})
		require.NoError(t, err)
		// Contact 0 opted out, contact 1 opted in, contact 2 chose nothing.
		require.NoError(t, st.Audience.UpdateContactTopics(ctx, team, contacts[0].ID,
			[]store.TopicChoice{{TopicID: topic.ID, Subscription: store.TopicOptOut}}))
		require.NoError(t, st.Audience.UpdateContactTopics(ctx, team, contacts[1].ID,
			[]store.TopicChoice{{TopicID: topic.ID, Subscription: store.TopicOptIn}}))
		b := newBroadcast(t, st, team, seg)
		_, err = st.Broadcasts.UpdateBroadcast(ctx, team, b.ID, func(b *store.Broadcast) error { b.TopicID = &topic.ID; return nil })
		require.NoError(t, err)
		_, err = st.Broadcasts.SendBroadcast(ctx, team, b.ID, nil, nil)
		require.NoError(t, err)
		_, err = st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 0, nil, 100), renderNames)
		require.NoError(t, err)
		got, _, err := st.Broadcasts.BroadcastRecipients(ctx, team, b.ID, "", "", "", store.Page{Limit: 100})
		require.NoError(t, err)
		var to []string
		for _, r := range got {
			to = append(to, r.Email)
		}
		want := []string{contacts[1].Email, contacts[2].Email} // opt_in topic: default subscribed
		if def == store.TopicOptOut {
			want = []string{contacts[1].Email}
		}
		require.ElementsMatch(t, want, to, "topic with default %s", def)
	}
}

// A chunk is cut to the quota left; with none left the broadcast pauses
// with the reason, and a cancel stops every later chunk.
func TestBroadcastChunksPauseAtTheQuotaAndStopWhenCanceled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	seg, _ := audience(t, st, team, 6)
	// Use the free plan's 3,000 emails but 4.
	var rcpts []string
	for i := range 2996 {
		rcpts = append(rcpts, fmt.Sprintf("r%d@example.com", i))
	}
	_, err := storetest.InsertEmail(ctx, st, newEmail(team, rcpts...))
	require.NoError(t, err)

	b := newBroadcast(t, st, team, seg)
	_, err = st.Broadcasts.SendBroadcast(ctx, team, b.ID, nil, nil)
	require.NoError(t, err)
	r0, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 0, nil, 5), renderNames)
	require.NoError(t, err)
	require.Equal(t, 4, r0.Emails, "cut to the 4 emails the quota allows")
	r1, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 1, r0.Last, 5), renderNames)
	require.NoError(t, err)
	require.True(t, r1.Paused)
	got, err := st.Broadcasts.Broadcast(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastPaused, got.Status)
	require.Contains(t, *got.StatusReason, "quota")
	used, err := st.Accounts.QuotaUsed(ctx, team, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(3000), used)

	// A plan with room lets the same chunk go on.
	require.NoError(t, st.Accounts.SetPlan(ctx, team, "50k"))
	r1, err = st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 1, r0.Last, 1), renderNames)
	require.NoError(t, err)
	require.Equal(t, 1, r1.Emails)
	got, err = st.Broadcasts.Broadcast(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastSending, got.Status)
	require.Nil(t, got.StatusReason)

	_, err = st.Broadcasts.CancelBroadcast(ctx, team, b.ID)
	require.NoError(t, err)
	r2, err := st.Broadcasts.HandOffBroadcastChunk(ctx, chunk(b, 2, r1.Last, 5), renderNames)
	require.NoError(t, err)
	require.True(t, r2.Canceled)
	counts, err := st.Broadcasts.BroadcastCounts(ctx, team, b.ID)
	require.NoError(t, err)
	require.Equal(t, int64(5), counts.Total, "nothing handed over after the cancel")
	again, err := st.Broadcasts.CancelBroadcast(ctx, team, b.ID)
	require.NoError(t, err, "canceling twice is fine")
	require.Equal(t, store.BroadcastCanceled, again.Status)
}

func TestBroadcastStatusRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	seg, _ := audience(t, st, team, 1)
	b := newBroadcast(t, st, team, seg)
	var se *store.BroadcastStateError
	_, err := st.Broadcasts.CancelBroadcast(ctx, team, b.ID)
	require.ErrorAs(t, err, &se, "a draft cannot be canceled")

	at := time.Now().Add(time.Hour)
	sent, err := st.Broadcasts.SendBroadcast(ctx, team, b.ID, &at, nil)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastScheduled, sent.Status)
	_, err = st.Broadcasts.SendBroadcast(ctx, team, b.ID, nil, nil)
	require.ErrorAs(t, err, &se, "sent twice")
	_, err = st.Broadcasts.UpdateBroadcast(ctx, team, b.ID, func(*store.Broadcast) error { return nil })
	require.ErrorAs(t, err, &se, "only drafts are edited")
	_, err = st.Broadcasts.DeleteBroadcast(ctx, team, b.ID)
	require.ErrorAs(t, err, &se, "only drafts are deleted")

	dup, err := st.Broadcasts.DuplicateBroadcast(ctx, team, b.ID, uuid.Must(uuid.NewV7()), "Copy of news")
	require.NoError(t, err)
	require.Equal(t, store.BroadcastDraft, dup.Status)
	require.Equal(t, *b.HTML, *dup.HTML)
	_, err = st.Broadcasts.DeleteBroadcast(ctx, team, dup.ID)
	require.NoError(t, err)

	// A refusing check writes nothing.
	b2 := newBroadcast(t, st, team, seg)
	_, err = st.Broadcasts.SendBroadcast(ctx, team, b2.ID, nil, func(store.Broadcast) error { return errors.New("no") })
	require.EqualError(t, err, fmt.Sprintf("sending broadcast %s: no", b2.ID))
	got, err := st.Broadcasts.Broadcast(ctx, team, b2.ID)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastDraft, got.Status)
}

// The pace is shared by a team's broadcasts: reservations follow each
// other at the rate.
func TestBroadcastPaceIsSharedPerTeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team, other := newTeam(t, st), newTeam(t, st)
	first, err := st.Broadcasts.ReserveBroadcastPace(ctx, team, 100, 10) // 10 s of emails
	require.NoError(t, err)
	require.Zero(t, first, "the first reservation goes now")
	second, err := st.Broadcasts.ReserveBroadcastPace(ctx, team, 100, 10)
	require.NoError(t, err)
	require.Greater(t, second, 9*time.Second, "the second waits for the first's 10 s")
	third, err := st.Broadcasts.ReserveBroadcastPace(ctx, team, 100, 10)
	require.NoError(t, err)
	require.Greater(t, third, 19*time.Second)
	others, err := st.Broadcasts.ReserveBroadcastPace(ctx, other, 100, 10)
	require.NoError(t, err)
	require.Zero(t, others, "another team has its own pace")
}
