package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// suppressionFixture is two teams; the first has a webhook endpoint
// subscribed to the suppression events, so the events written with each
// change can be read back.
type suppressionFixture struct {
	st          *store.Store
	s           *Emails
	team, other uuid.UUID
	hook        uuid.UUID
	by          audit.Entry
}

func newSuppressionFixture(t *testing.T) suppressionFixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	key := uuid.Must(uuid.NewV7())
	f := suppressionFixture{st: st, s: NewEmails(st.Emails), team: uuid.Must(uuid.NewV7()), other: uuid.Must(uuid.NewV7()),
		hook: uuid.Must(uuid.NewV7()), by: audit.Entry{ActorType: audit.ActorAPIKey, ActorID: &key, ClientAddr: "192.0.2.1"}}
	for _, team := range []uuid.UUID{f.team, f.other} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: team, Name: "t"}))
	}
	require.NoError(t, st.Webhooks.CreateWebhook(ctx, store.Webhook{ID: f.hook, TeamID: f.team,
		Endpoint: "https://hooks.example/x", Status: "enabled", Secret: []byte("s"),
		Events: []string{store.EventSuppressionAdded, store.EventSuppressionRemoved}}))
	return f
}

type suppressionEvent struct {
	Type string `json:"type"`
	Data struct {
		ID        string  `json:"id"`
		Email     string  `json:"email"`
		Origin    string  `json:"origin"`
		SourceID  *string `json:"source_id"`
		CreatedAt string  `json:"created_at"`
	} `json:"data"`
}

// events are the events written so far for the first team, oldest first.
func (f suppressionFixture) events(t *testing.T) []suppressionEvent {
	t.Helper()
	msgs, _, err := f.st.Webhooks.ListWebhookMessages(context.Background(), f.team, f.hook, store.Page{Limit: 100})
	require.NoError(t, err)
	var out []suppressionEvent
	for _, m := range msgs {
		var e suppressionEvent
		require.NoError(t, json.Unmarshal(m.Payload, &e))
		require.Equal(t, m.Type, e.Type)
		out = append(out, e)
	}
	slices.Reverse(out) // listed newest first
	return out
}

func (f suppressionFixture) audits(t *testing.T, team uuid.UUID) []audit.Entry {
	t.Helper()
	list, _, err := f.st.Privacy.ListAudit(context.Background(), team, audit.Filter{}, store.Page{Limit: 100})
	require.NoError(t, err)
	return list
}

func addresses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user%d@example.com", i)
	}
	return out
}

// TestSuppressionBatchValidation: a batch that is absent, empty, too long
// or holds a bad item is refused whole, naming the field (and the item),
// and writes nothing: no entry, no audit entry, no event.
func TestSuppressionBatchValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSuppressionFixture(t)
	id := uuid.Must(uuid.NewV7()).String()
	for _, tc := range []struct {
		name    string
		add     bool
		emails  []string
		ids     []string
		field   string
		missing bool
		param   bool // a *submit.Error of KindInvalidParameter, not an *invalid.Error
		msg     string
	}{
		{name: "add absent", add: true, field: "emails", missing: true, msg: "Missing `emails` field."},
		{name: "add empty", add: true, emails: []string{}, field: "emails",
			msg: "The `emails` field must hold between 1 and 100 items."},
		{name: "add 101", add: true, emails: addresses(101), field: "emails",
			msg: "The `emails` field must hold between 1 and 100 items."},
		{name: "add not an address", add: true, emails: []string{"ok@example.com", "nobody"}, field: "emails",
			msg: "`emails[1]` must be an email address such as someone@example.com."},
		{name: "add display name", add: true, emails: []string{"Ann <ann@example.com>"}, field: "emails",
			msg: "`emails[0]` must be an email address such as someone@example.com."},
		{name: "add blank", add: true, emails: []string{" "}, field: "emails",
			msg: "`emails[0]` must be an email address such as someone@example.com."},
		{name: "add sandbox", add: true, emails: []string{"ok@example.com", "x@example.com", "bounced+a@posthaste.test"},
			field: "emails", msg: "`emails[2]`: sandbox addresses of posthaste.test cannot be suppressed."},
		{name: "remove neither", field: "emails", missing: true, msg: "Missing `emails` or `ids` field."},
		{name: "remove both", emails: []string{"a@example.com"}, ids: []string{id}, field: "ids",
			msg: "Provide either `emails` or `ids`, not both."},
		{name: "remove empty ids", ids: []string{}, field: "ids", msg: "The `ids` field must hold between 1 and 100 items."},
		{name: "remove empty emails", emails: []string{}, field: "emails",
			msg: "The `emails` field must hold between 1 and 100 items."},
		{name: "remove 101", emails: addresses(101), field: "emails",
			msg: "The `emails` field must hold between 1 and 100 items."},
		{name: "remove bad id", ids: []string{id, "nope"}, field: "ids", param: true, msg: "`ids[1]` must be a suppression id."},
		{name: "remove bad email", emails: []string{"a@b@c"}, field: "emails",
			msg: "`emails[0]` must be an email address such as someone@example.com."},
	} {
		var err error
		if tc.add {
			_, err = f.s.AddSuppressions(ctx, f.team, tc.emails, f.by)
		} else {
			_, err = f.s.RemoveSuppressions(ctx, f.team, tc.emails, tc.ids, f.by)
		}
		if tc.param {
			var se *Error
			require.True(t, errors.As(err, &se), "%s: %v", tc.name, err)
			require.Equal(t, KindInvalidParameter, se.Kind, tc.name)
			require.Equal(t, tc.field, se.Field, tc.name)
			require.Equal(t, tc.msg, se.Message, tc.name)
			continue
		}
		var ie *invalid.Error
		require.True(t, errors.As(err, &ie), "%s: %v", tc.name, err)
		require.Equal(t, tc.field, ie.Field, tc.name)
		require.Equal(t, tc.missing, ie.Missing, tc.name)
		require.Equal(t, tc.msg, ie.Message, tc.name)
	}
	list, _, err := f.s.ListSuppressions(ctx, f.team, "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list)
	require.Empty(t, f.audits(t, f.team))
	require.Empty(t, f.events(t))

	// 100 is allowed, both ways.
	added, err := f.s.AddSuppressions(ctx, f.team, addresses(100), f.by)
	require.NoError(t, err)
	require.Len(t, added, 100)
	removed, err := f.s.RemoveSuppressions(ctx, f.team, addresses(100), nil, f.by)
	require.NoError(t, err)
	require.Len(t, removed, 100)
	for _, r := range removed {
		require.True(t, r.Deleted)
	}

	_, _, err = f.s.ListSuppressions(ctx, f.team, "spam", store.Page{Limit: 10})
	var ie *invalid.Error
	require.True(t, errors.As(err, &ie))
	require.Equal(t, "origin", ie.Field)
	require.Equal(t, "The `origin` parameter must be one of bounce, complaint, manual.", ie.Message)
	for _, ref := range []string{"nothing", "a@b@c"} {
		_, err := f.s.GetSuppression(ctx, f.team, ref)
		var se *Error
		require.True(t, errors.As(err, &se), "%s: %v", ref, err)
		require.Equal(t, KindInvalidParameter, se.Kind)
	}
}

// TestSuppressionBatches: a batch adds in order (an address listed
// already, or twice, keeps its one entry), gets by id or address, filters
// by origin, and removes by ids or addresses, answering each item; each
// new or removed entry writes its audit entry and its suppression.added
// or suppression.removed event with Resend's fields.
func TestSuppressionBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSuppressionFixture(t)

	first, _, err := f.st.Emails.AddSuppression(ctx, store.Suppression{ID: uuid.Must(uuid.NewV7()), TeamID: f.team,
		Email: "bounced@example.com", Reason: store.SuppressionBounce})
	require.NoError(t, err)
	added, err := f.s.AddSuppressions(ctx, f.team, []string{"Ann@Example.com", "bounced@example.com", "ann@example.com",
		"bob@example.com"}, f.by)
	require.NoError(t, err)
	require.Len(t, added, 4)
	ann, bob := added[0], added[3]
	require.True(t, ann.Created)
	require.Equal(t, "ann@example.com", ann.Email)
	require.Equal(t, store.SuppressionManual, ann.Reason)
	require.Equal(t, first.ID, added[1].ID, "an address listed already keeps its entry")
	require.False(t, added[1].Created)
	require.Equal(t, store.SuppressionBounce, added[1].Reason)
	require.Equal(t, ann.ID, added[2].ID, "an address named twice is one entry")
	require.False(t, added[2].Created)
	require.True(t, bob.Created)
	require.Len(t, f.audits(t, f.team), 4, "one audit entry per item")

	evs := f.events(t)
	require.Len(t, evs, 3, "one suppression.added per new entry")
	for i, want := range []store.Suppression{first, ann.Suppression, bob.Suppression} {
		require.Equal(t, store.EventSuppressionAdded, evs[i].Type)
		require.Equal(t, want.ID.String(), evs[i].Data.ID)
		require.Equal(t, want.Email, evs[i].Data.Email)
		require.Equal(t, want.Reason, evs[i].Data.Origin)
		require.Nil(t, evs[i].Data.SourceID)
		require.NotEmpty(t, evs[i].Data.CreatedAt)
	}

	got, err := f.s.GetSuppression(ctx, f.team, "ANN@example.com")
	require.NoError(t, err)
	require.Equal(t, ann.ID, got.ID)
	got, err = f.s.GetSuppression(ctx, f.team, bob.ID.String())
	require.NoError(t, err)
	require.Equal(t, "bob@example.com", got.Email)

	bounces, _, err := f.s.ListSuppressions(ctx, f.team, store.SuppressionBounce, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, bounces, 1)
	require.Equal(t, first.ID, bounces[0].ID)
	manual, _, err := f.s.ListSuppressions(ctx, f.team, store.SuppressionManual, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, manual, 2)
	complaints, _, err := f.s.ListSuppressions(ctx, f.team, store.SuppressionComplaint, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, complaints)

	unknown := uuid.Must(uuid.NewV7())
	removed, err := f.s.RemoveSuppressions(ctx, f.team, nil, []string{bob.ID.String(), unknown.String()}, f.by)
	require.NoError(t, err)
	require.Equal(t, []SuppressionRemoval{{ID: &bob.ID, Email: "bob@example.com", Deleted: true},
		{ID: &unknown, Deleted: false}}, removed)
	removed, err = f.s.RemoveSuppressions(ctx, f.team, []string{"Ann@example.com", "nobody@example.com"}, nil, f.by)
	require.NoError(t, err)
	require.Equal(t, []SuppressionRemoval{{ID: &ann.ID, Email: "ann@example.com", Deleted: true},
		{Email: "nobody@example.com"}}, removed)

	evs = f.events(t)
	require.Len(t, evs, 5)
	require.Equal(t, store.EventSuppressionRemoved, evs[3].Type)
	require.Equal(t, bob.ID.String(), evs[3].Data.ID)
	require.Equal(t, "manual", evs[3].Data.Origin)
	require.Equal(t, store.EventSuppressionRemoved, evs[4].Type)
	require.Equal(t, "ann@example.com", evs[4].Data.Email)
	list := f.audits(t, f.team)
	require.Len(t, list, 6)
	require.Equal(t, audit.SuppressionDelete, list[0].Action)
	require.Equal(t, ann.ID.String(), list[0].TargetID)

	_, err = f.s.DeleteSuppression(ctx, f.team, first.ID.String(), f.by)
	require.NoError(t, err)
	evs = f.events(t)
	require.Len(t, evs, 6)
	require.Equal(t, store.EventSuppressionRemoved, evs[5].Type, "DELETE /suppressions/{id} too")
	require.Equal(t, "bounce", evs[5].Data.Origin)
}

// TestSuppressionTeamIsolation: a team cannot see, filter, get or remove
// another team's entries, one by one or in a batch, and its batches write
// no event to the other team's endpoints.
func TestSuppressionTeamIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSuppressionFixture(t)
	added, err := f.s.AddSuppressions(ctx, f.team, []string{"ann@example.com"}, f.by)
	require.NoError(t, err)
	ann := added[0]
	require.Len(t, f.events(t), 1)

	for _, origin := range []string{"", store.SuppressionManual} {
		list, _, err := f.s.ListSuppressions(ctx, f.other, origin, store.Page{Limit: 10})
		require.NoError(t, err)
		require.Empty(t, list)
	}
	for _, ref := range []string{ann.ID.String(), "ann@example.com"} {
		_, err := f.s.GetSuppression(ctx, f.other, ref)
		require.ErrorIs(t, err, store.ErrNotFound, ref)
		_, err = f.s.DeleteSuppression(ctx, f.other, ref, f.by)
		require.ErrorIs(t, err, store.ErrNotFound, ref)
	}
	removed, err := f.s.RemoveSuppressions(ctx, f.other, nil, []string{ann.ID.String()}, f.by)
	require.NoError(t, err)
	require.Equal(t, []SuppressionRemoval{{ID: &ann.ID}}, removed)
	removed, err = f.s.RemoveSuppressions(ctx, f.other, []string{"ann@example.com"}, nil, f.by)
	require.NoError(t, err)
	require.Equal(t, []SuppressionRemoval{{Email: "ann@example.com"}}, removed)

	// The other team's own entry for the same address is its own.
	theirs, err := f.s.AddSuppressions(ctx, f.other, []string{"ann@example.com"}, f.by)
	require.NoError(t, err)
	require.True(t, theirs[0].Created)
	require.NotEqual(t, ann.ID, theirs[0].ID)
	_, err = f.s.RemoveSuppressions(ctx, f.other, []string{"ann@example.com"}, nil, f.by)
	require.NoError(t, err)

	got, err := f.s.GetSuppression(ctx, f.team, ann.ID.String())
	require.NoError(t, err, "still listed for its team")
	require.Equal(t, ann.ID, got.ID)
	require.Len(t, f.events(t), 1, "the other team's changes reach none of this team's endpoints")
	require.Len(t, f.audits(t, f.team), 1, "nor its audit log")
}
