package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestTrackedRecipientAndClickEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team := newTeam(t, st)
	hook := store.Webhook{ID: uuid.Must(uuid.NewV7()), TeamID: team, Endpoint: "https://hooks.example/x",
		Events: []string{"email.opened", "email.clicked"}, Status: "enabled", Secret: []byte("sealed")}
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, hook))
	e := newEmail(team, "ann@posthaste.test", "bob@posthaste.test")
	_, err := storetest.InsertEmail(ctx, st, e)
	require.NoError(t, err)
	at := time.Now().UTC().Truncate(time.Millisecond)
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{
		{Type: store.EventSent, Recipient: "ann@posthaste.test"},
		{Type: store.EventDelivered, Recipient: "ann@posthaste.test", CreatedAt: at},
		{Type: store.EventBounced, Recipient: "bob@posthaste.test"},
	}))

	ann, err := st.Emails.TrackedRecipient(ctx, team, e.ID, 0)
	require.NoError(t, err)
	require.Equal(t, "ann@posthaste.test", ann.Address)
	require.Equal(t, store.EventDelivered, ann.Status)
	require.True(t, ann.DeliveredAt.Equal(at), "%v != %v", ann.DeliveredAt, at)
	require.True(t, store.Trackable(ann.Status))

	bob, err := st.Emails.TrackedRecipient(ctx, team, e.ID, 1)
	require.NoError(t, err)
	require.Equal(t, store.TrackedRecipient{Address: "bob@posthaste.test", Status: store.EventBounced}, bob)
	require.False(t, store.Trackable(bob.Status))
	require.True(t, store.Trackable(store.EventOpened))
	require.True(t, store.Trackable(store.EventClicked))
	for _, status := range []string{store.EventQueued, store.EventSent, store.EventDeliveryDelayed, store.EventComplained,
		store.EventFailed, store.EventSuppressed, store.EventCanceled} {
		require.False(t, store.Trackable(status), status)
	}

	for name, f := range map[string]func() error{
		"past the recipients": func() error { _, err := st.Emails.TrackedRecipient(ctx, team, e.ID, 2); return err },
		"negative":            func() error { _, err := st.Emails.TrackedRecipient(ctx, team, e.ID, -1); return err },
		"another team":        func() error { _, err := st.Emails.TrackedRecipient(ctx, newTeam(t, st), e.ID, 0); return err },
		"no such email":       func() error { _, err := st.Emails.TrackedRecipient(ctx, team, uuid.New(), 0); return err },
	} {
		require.ErrorIs(t, f(), store.ErrNotFound, name)
	}

	// As the tracking endpoints record them: opens and clicks repeat, and
	// move the recipient's state forward only: delivered → opened →
	// clicked, never back.
	click := func(link string, machine bool) store.Event {
		return store.Event{Type: "clicked", Recipient: "ann@posthaste.test", Detail: map[string]any{
			"link": link, "linkIndex": 0, "ipAddress": "203.0.113.9", "userAgent": "UA",
			"timestamp": "2026-11-25T02:00:00.000Z", "machine": machine}}
	}
	open := store.Event{Type: "opened", Recipient: "ann@posthaste.test", Detail: map[string]any{"machine": false}}
	state := func() (string, string, string) {
		got, err := st.Emails.GetEmail(ctx, team, e.ID)
		require.NoError(t, err)
		return got.Recipients[0].Status, got.Recipients[1].Status, got.LastEvent
	}
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{open, open}))
	ann1, bob1, last := state()
	require.Equal(t, []string{store.EventOpened, store.EventBounced, store.EventOpened}, []string{ann1, bob1, last})
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{click("https://shop.test/a", false),
		click("https://shop.test/a", true)}))
	ann1, bob1, last = state()
	require.Equal(t, []string{store.EventClicked, store.EventBounced, store.EventClicked}, []string{ann1, bob1, last})
	// A later open is recorded (and counted) but leaves the recipient
	// clicked; outcome events replayed by a retried delivery step do not
	// move an engaged recipient back.
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{open,
		{Type: store.EventDelivered, Recipient: "ann@posthaste.test"},
		{Type: store.EventBounced, Recipient: "ann@posthaste.test"}}))
	ann1, _, _ = state()
	require.Equal(t, store.EventClicked, ann1)
	require.True(t, store.IsFinal(ann1))
	require.True(t, store.IsFinal(store.EventOpened))
	// A recipient whose delivery ended otherwise (bob bounced) does not
	// move to opened even if an open is recorded for it.
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: "opened", Recipient: "bob@posthaste.test"}}))
	_, bob1, _ = state()
	require.Equal(t, store.EventBounced, bob1)
	// A complaint after a click still moves the recipient to complained.
	require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, []store.Event{{Type: store.EventComplained, Recipient: "ann@posthaste.test"}}))
	ann1, _, _ = state()
	require.Equal(t, store.EventComplained, ann1)
	evs, err := st.Emails.Events(ctx, e.ID)
	require.NoError(t, err)
	var opens, clicks int
	for _, ev := range evs {
		switch ev.Type {
		case "opened":
			opens++
		case "clicked":
			clicks++
			require.Equal(t, "ann@posthaste.test", ev.Recipient)
			require.Contains(t, ev.Detail, "machine")
		}
	}
	require.Equal(t, 4, opens)
	require.Equal(t, 2, clicks)

	msgs, _, err := st.Webhooks.ListWebhookMessages(ctx, team, hook.ID, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 6)
	var sawClick bool
	for _, m := range msgs {
		var p struct {
			Type string
			Data struct {
				EmailID string `json:"email_id"`
				Click   *struct {
					Link, IPAddress, UserAgent, Timestamp string
				} `json:"click"`
			}
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		require.Equal(t, e.ID.String(), p.Data.EmailID)
		if p.Type == "email.clicked" {
			sawClick = true
			require.NotNil(t, p.Data.Click)
			require.Equal(t, "https://shop.test/a", p.Data.Click.Link)
			require.Equal(t, "203.0.113.9", p.Data.Click.IPAddress)
			require.Equal(t, "UA", p.Data.Click.UserAgent)
			require.Equal(t, "2026-11-25T02:00:00.000Z", p.Data.Click.Timestamp)
		} else {
			require.Equal(t, "email.opened", p.Type)
			require.Nil(t, p.Data.Click)
		}
	}
	require.True(t, sawClick)
}

// TestIsTeamTrackingHost checks that a host is a tracking host of a team
// only through a live domain of that team with tracking on: the same
// domain name added by another team is not its.
func TestIsTeamTrackingHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	teamA, teamB := newTeam(t, st), newTeam(t, st)
	a := newDomain(teamA, "a.test")
	a.OpenTracking = true
	require.NoError(t, st.Domains.CreateDomain(ctx, a))
	b := newDomain(teamB, "b.test")
	b.ClickTracking, b.TrackingSubdomain = true, "go"
	require.NoError(t, st.Domains.CreateDomain(ctx, b))
	untracked := newDomain(teamB, "a.test") // the same name, tracking off
	require.NoError(t, st.Domains.CreateDomain(ctx, untracked))

	for _, tc := range []struct {
		team uuid.UUID
		host string
		want bool
	}{
		{teamA, "links.a.test", true},
		{teamB, "links.a.test", false},
		{teamB, "go.b.test", true},
		{teamA, "go.b.test", false},
		{teamB, "links.b.test", false},
		{teamA, "a.test", false},
		{teamA, "test", false},
		{teamA, ".a.test", false},
		{newTeam(t, st), "links.a.test", false},
	} {
		got, err := st.Emails.IsTeamTrackingHost(ctx, tc.team, tc.host)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%s of team %s", tc.host, tc.team)
	}

	off := false
	require.NoError(t, st.Domains.UpdateDomain(ctx, teamB, b.ID, store.DomainUpdate{ClickTracking: &off}, audit.Entry{}))
	got, err := st.Emails.IsTeamTrackingHost(ctx, teamB, "go.b.test")
	require.NoError(t, err)
	require.False(t, got, "tracking turned off")
	require.NoError(t, st.Domains.DeleteDomain(ctx, teamA, a.ID, audit.Entry{}))
	got, err = st.Emails.IsTeamTrackingHost(ctx, teamA, "links.a.test")
	require.NoError(t, err)
	require.False(t, got, "the domain was deleted")
}
