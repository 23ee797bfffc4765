package delivery_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
	"github.com/posthaste/posthaste/workflows/contract"
)

// TestPrepareBatchPreparesEachEmailAsPrepare sends twins: every case is
// stored twice, one copy prepared alone by Prepare and the other with all
// the other cases' by one PrepareBatch, and each twin must come out alike:
// the result (Prepare's error as Failed), the recipients' states, the
// events with their webhooks, and a stored, signed message. A second
// PrepareBatch (a retried step) changes nothing.
func TestPrepareBatchPreparesEachEmailAsPrepare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	box := newBox(t)
	d, key := insertDomain(t, st, box, "shop.test")
	team := d.TeamID
	_, _, err := st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: team,
		Email: "gone@dest.test", Reason: store.SuppressionComplaint})
	require.NoError(t, err)
	news, err := st.Audience.CreateTopic(ctx, store.Topic{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "news",
		DefaultSubscription: store.TopicOptIn, Visibility: "private"})
	require.NoError(t, err)
	_, err = st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: team, Email: "left@dest.test"},
		nil, []store.TopicChoice{{TopicID: news.ID, Subscription: store.TopicOptOut}})
	require.NoError(t, err)
	hook := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: hook, TeamID: team,
		Endpoint: "https://hooks.example/x", Status: "enabled", Secret: []byte("s"),
		Events: []string{"email.sent", "email.suppressed", "email.failed"}}))
	acts := delivery.New(delivery.Config{Hostname: "out.example", Keys: box, Unsubscribe: testLinks(t)}, st, nil, nil, nil)

	email := func(rcpts ...string) store.Email {
		text := "Hello"
		e := store.Email{TeamID: team, DomainID: &d.ID, From: "Shop <hello@shop.test>", FromDomain: "shop.test",
			To: rcpts, Subject: "Twins", Text: &text, LastEvent: store.EventQueued, CreatedAt: time.Now()}
		for _, r := range rcpts {
			_, dom, _ := strings.Cut(r, "@")
			e.Recipients = append(e.Recipients, store.Recipient{Address: r, Kind: "to", Domain: dom, Status: store.EventQueued})
		}
		return e
	}
	scheduled := func(e store.Email, at time.Time) store.Email {
		e.ScheduledAt, e.LastEvent = &at, store.EventScheduled
		for i := range e.Recipients {
			e.Recipients[i].Status = store.EventScheduled
		}
		return e
	}
	record := func(evs ...store.Event) func(uuid.UUID) {
		return func(id uuid.UUID) { require.NoError(t, st.Emails.RecordEvents(ctx, id, evs)) }
	}
	cases := []struct {
		name   string
		email  store.Email
		before func(uuid.UUID) // run on each twin once stored
	}{
		{name: "groups, sandbox and the suppression list",
			email: email("a@dest.test", "b@other.test", "Gone@dest.test", "delivered@posthaste.test", "c@dest.test")},
		{name: "topic", email: func() store.Email {
			e := email("Left@dest.test", "stranger@dest.test")
			e.TopicID = &news.ID
			return e
		}()},
		{name: "sandbox sender", email: func() store.Email {
			e := email("delivered@posthaste.test", "complained+x@posthaste.test")
			e.DomainID, e.From, e.FromDomain = nil, "onboarding@posthaste.test", "posthaste.test"
			return e
		}()},
		{name: "canceled", email: email("a@dest.test"), before: record(store.Event{Type: store.EventCanceled})},
		{name: "scheduled later", email: scheduled(email("a@dest.test"), time.Now().Add(time.Hour))},
		{name: "scheduled and due", email: scheduled(email("a@dest.test"), time.Now().Add(-time.Minute))},
		{name: "a recipient with an outcome", email: email("a@dest.test", "done@dest.test"),
			before: record(store.Event{Type: store.EventDelivered, Recipient: "done@dest.test"})},
		{name: "unbuildable", email: func() store.Email {
			e := email("a@dest.test")
			e.Headers = []store.Header{{Name: "X-A", Value: "a\x01b"}}
			return e
		}()},
	}
	twins := make([][2]uuid.UUID, len(cases))
	for i, c := range cases {
		for j := range 2 {
			e := c.email
			e.ID = uuid.Must(uuid.NewV7())
			_, err := storetest.InsertEmail(ctx, st, e)
			require.NoError(t, err)
			if c.before != nil {
				c.before(e.ID)
			}
			twins[i][j] = e.ID
		}
	}
	// An email erased whole is skipped by both; a bad id is left to
	// Prepare.
	gone := uuid.Must(uuid.NewV7())
	ids := []string{gone.String(), "not an id"}
	for _, tw := range twins {
		ids = append(ids, tw[1].String())
	}

	res, err := run[contract.PrepareBatchInput, contract.PrepareBatchResult](t, acts.PrepareBatch, contract.PrepareBatchInput{EmailIDs: ids})
	require.NoError(t, err)
	require.Equal(t, team, res.TeamID)
	require.Len(t, res.Emails, len(ids))
	require.Equal(t, contract.PreparedEmail{EmailID: gone.String(), Result: contract.PrepareResult{Skip: true}}, res.Emails[0])
	require.Equal(t, contract.PreparedEmail{EmailID: "not an id", Alone: true}, res.Emails[1])
	alone, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: gone.String()})
	require.NoError(t, err)
	require.True(t, alone.Skip)

	verp := box.DeriveKey(reports.VERPKeyPurpose)
	returnPath := func(e store.Email, id uuid.UUID) string {
		if e.DomainID == nil {
			return "bounces+" + id.String() + "@out.example"
		}
		return delivery.DomainReturnPath(verp, id, d)
	}
	// twin makes a result of the twin prepared alone read as the other's.
	twin := func(r contract.PrepareResult, e store.Email, from, to uuid.UUID) contract.PrepareResult {
		r.TeamID = uuid.Nil
		r.Groups = slices.Clone(r.Groups)
		for i := range r.Groups {
			if r.Groups[i].ReturnPath == returnPath(e, from) {
				r.Groups[i].ReturnPath = returnPath(e, to)
			}
		}
		return r
	}
	for i, c := range cases {
		a, b := twins[i][0], twins[i][1]
		got := res.Emails[i+2]
		require.Equal(t, b.String(), got.EmailID, c.name)
		want, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: a.String()})
		if err != nil {
			reason, ok := contract.PermanentReason(err)
			require.True(t, ok, "%s: %v", c.name, err)
			require.Equal(t, contract.PreparedEmail{EmailID: b.String(), Failed: reason}, got, c.name)
		} else {
			require.False(t, got.Alone, c.name)
			require.Empty(t, got.Failed, c.name)
			require.Equal(t, twin(want, c.email, a, b), got.Result, c.name)
		}

		ea, err := st.Emails.GetEmail(ctx, team, a)
		require.NoError(t, err)
		eb, err := st.Emails.GetEmail(ctx, team, b)
		require.NoError(t, err)
		require.Equal(t, ea.LastEvent, eb.LastEvent, c.name)
		require.Equal(t, ea.Recipients, eb.Recipients, c.name)
		require.Equal(t, eventsOf(t, st, a), eventsOf(t, st, b), c.name)
		require.Equal(t, webhooksOf(t, st, team, hook, a), webhooksOf(t, st, team, hook, b), c.name)

		ma, errA := st.Emails.Message(ctx, a)
		mb, errB := st.Emails.Message(ctx, b)
		require.Equal(t, errA == nil, errB == nil, "%s: a message is stored for both twins or neither", c.name)
		if errB == nil {
			ha, hb := header(t, ma), header(t, mb)
			require.Equal(t, "<"+b.String()+"@"+c.email.FromDomain+">", hb.Get("Message-Id"), c.name)
			require.Equal(t, ha.Get("Subject"), hb.Get("Subject"), c.name)
			if c.email.DomainID != nil {
				verifyDKIM(t, mb, "shop.test", key)
			}
		}
	}
	// The cases take the branches they are named for.
	byName := map[string]contract.PreparedEmail{}
	for i, c := range cases {
		byName[c.name] = res.Emails[i+2]
	}
	require.Len(t, byName["groups, sandbox and the suppression list"].Result.Groups, 2)
	require.Len(t, byName["groups, sandbox and the suppression list"].Result.Sandbox, 1)
	require.Equal(t, []string{"email.failed", "email.sent"}, webhooksOf(t, st, team, hook, twins[1][1]), "topic")
	require.Len(t, byName["sandbox sender"].Result.Sandbox, 2)
	require.True(t, byName["canceled"].Result.Skip)
	require.NotNil(t, byName["scheduled later"].Result.NotDue)
	require.Len(t, byName["scheduled and due"].Result.Groups, 1)
	require.Equal(t, []string{"a@dest.test"}, byName["a recipient with an outcome"].Result.Groups[0].Recipients)
	require.Contains(t, byName["unbuildable"].Failed, "building message")
	require.Equal(t, []string{"email.sent", "email.suppressed"}, webhooksOf(t, st, team, hook, twins[0][1]))

	// A retry of the step finds every email claimed and its message
	// stored: the same answer, and nothing recorded or stored twice.
	messages := map[uuid.UUID][]byte{}
	events := map[uuid.UUID][]string{}
	for _, tw := range twins {
		if m, err := st.Emails.Message(ctx, tw[1]); err == nil {
			messages[tw[1]] = m
		}
		events[tw[1]] = eventsOf(t, st, tw[1])
	}
	again, err := run[contract.PrepareBatchInput, contract.PrepareBatchResult](t, acts.PrepareBatch, contract.PrepareBatchInput{EmailIDs: ids})
	require.NoError(t, err)
	require.Equal(t, res, again)
	for _, tw := range twins {
		if m, ok := messages[tw[1]]; ok {
			got, err := st.Emails.Message(ctx, tw[1])
			require.NoError(t, err)
			require.Equal(t, m, got)
		}
		require.Equal(t, events[tw[1]], eventsOf(t, st, tw[1]))
	}
}

// eventsOf lists an email's events as type:recipient:detail (JSON), the
// email's id in a detail replaced by ID.
func eventsOf(t *testing.T, st *store.Store, id uuid.UUID) []string {
	t.Helper()
	evs, err := st.Emails.Events(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, ev := range evs {
		detail, err := json.Marshal(ev.Detail)
		require.NoError(t, err)
		out = append(out, ev.Type+":"+ev.Recipient+":"+strings.ReplaceAll(string(detail), id.String(), "ID"))
	}
	return out
}

// webhooksOf lists the types of the webhook messages queued for an email.
func webhooksOf(t *testing.T, st *store.Store, team, hook, id uuid.UUID) []string {
	t.Helper()
	msgs, _, err := st.Webhooks.ListWebhookMessages(context.Background(), team, hook, store.Page{Limit: 100})
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.OrderKey == id.String() {
			out = append(out, m.Type)
		}
	}
	slices.Sort(out)
	return out
}

func TestRecordBatchEventsRecordsEveryEmailsEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	acts := delivery.New(delivery.Config{}, st, nil, nil, nil)
	a := insertEmail(t, st, "delivered@posthaste.test")
	b := insertEmail(t, st, "complained@posthaste.test")
	for _, e := range []store.Email{a, b} {
		_, err := run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: e.ID.String()})
		require.NoError(t, err)
	}
	in := contract.RecordBatchEventsInput{Emails: []contract.RecordEventsInput{
		{EmailID: a.ID.String(), Events: []contract.EventInput{{Type: "delivered", Recipient: "delivered@posthaste.test"}}},
		{EmailID: b.ID.String(), Events: []contract.EventInput{{Type: "delivered", Recipient: "complained@posthaste.test"},
			{Type: "complained", Recipient: "complained@posthaste.test", Detail: map[string]any{"feedback_type": "abuse"}}}},
	}}
	_, err := run[contract.RecordBatchEventsInput, struct{}](t, acts.RecordBatchEvents, in)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"delivered@posthaste.test": "delivered"}, recipientStatus(t, st, a))
	require.Equal(t, map[string]string{"complained@posthaste.test": "complained"}, recipientStatus(t, st, b))

	// Again, with an email erased meanwhile: its events are dropped, the
	// others' are recorded (once).
	c := insertEmail(t, st, "delivered@posthaste.test")
	_, err = run[contract.PrepareInput, contract.PrepareResult](t, acts.Prepare, contract.PrepareInput{EmailID: c.ID.String()})
	require.NoError(t, err)
	gone := uuid.Must(uuid.NewV7())
	in.Emails = append(in.Emails,
		contract.RecordEventsInput{EmailID: gone.String(), Events: []contract.EventInput{{Type: "complained", Recipient: "x@posthaste.test"}}},
		contract.RecordEventsInput{EmailID: c.ID.String(), Events: []contract.EventInput{{Type: "delivered", Recipient: "delivered@posthaste.test"}}})
	_, err = run[contract.RecordBatchEventsInput, struct{}](t, acts.RecordBatchEvents, in)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"delivered@posthaste.test": "delivered"}, recipientStatus(t, st, c))
	evs, err := st.Emails.Events(ctx, b.ID)
	require.NoError(t, err)
	require.Len(t, evs, 4, "queued, sent, delivered, complained: once each")
}
