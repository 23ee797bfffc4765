package broadcast_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func ptr[T any](v T) *T { return &v }

type serviceFixture struct {
	st    *store.Store
	svc   *broadcast.Service
	team  uuid.UUID
	other uuid.UUID
	seg   uuid.UUID
}

// newServiceFixture returns a Service on a fresh store, two teams, and a
// segment of the first with two contacts.
func newServiceFixture(t *testing.T) serviceFixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.New(t)
	f := serviceFixture{st: st, team: uuid.Must(uuid.NewV7()), other: uuid.Must(uuid.NewV7()), seg: uuid.Must(uuid.NewV7())}
	for _, id := range []uuid.UUID{f.team, f.other} {
		require.NoError(t, st.Accounts.CreateTeam(ctx, store.Team{ID: id, Name: "T"}))
	}
	_, err := st.Audience.CreateSegment(ctx, store.Segment{ID: f.seg, TeamID: f.team, Name: "All"})
	require.NoError(t, err)
	for _, email := range []string{"a@example.com", "b@example.com"} {
		_, err := st.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: f.team, Email: email},
			[]uuid.UUID{f.seg}, nil)
		require.NoError(t, err)
	}
	f.svc = broadcast.NewService(broadcast.Config{Store: st, Submit: submit.New(submit.Config{Store: submit.StoreOf(st)})})
	return f
}

// draft makes a draft of the fixture's team with edit applied.
func (f serviceFixture) draft(t *testing.T, edit func(*broadcast.Edit)) store.Broadcast {
	t.Helper()
	e := broadcast.Edit{Name: ptr("News"), SegmentID: ptr(f.seg.String()), From: ptr("news@example.com"),
		Subject: ptr("Hello"), HTML: ptr("<p>Hi {{{FIRST_NAME|there}}}</p>")}
	if edit != nil {
		edit(&e)
	}
	b, err := f.svc.Create(context.Background(), submit.Sender{TeamID: f.team}, e, false, "")
	require.NoError(t, err)
	return b
}

// template stores a template of the team; published says whether to
// publish it.
func (f serviceFixture) template(t *testing.T, alias string, published bool) {
	t.Helper()
	ctx := context.Background()
	subject, text := "From the template", "text"
	_, err := f.st.Templates.CreateTemplate(ctx, store.Template{ID: uuid.Must(uuid.NewV7()), TeamID: f.team, Name: alias,
		Alias: &alias, Content: store.TemplateContent{Subject: &subject, HTML: "<p>template</p>", Text: &text,
			Variables: []store.TemplateVariable{}}})
	require.NoError(t, err)
	if published {
		_, err = f.st.Templates.PublishTemplate(ctx, f.team, alias, uuid.New())
		require.NoError(t, err)
	}
}

func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var ie *invalid.Error
	require.True(t, errors.As(err, &ie), "want *invalid.Error about %s, got %v", field, err)
	require.Equal(t, field, ie.Field, ie.Message)
}

// TestServiceTemplateID checks that the service copies the published
// version of a template named by Edit.TemplateID, and the refusals.
func TestServiceTemplateID(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	f.template(t, "published", true)
	f.template(t, "draft", false)
	from := submit.Sender{TeamID: f.team}
	base := func() broadcast.Edit {
		return broadcast.Edit{Name: ptr("N"), SegmentID: ptr(f.seg.String()), From: ptr("news@example.com")}
	}
	for _, tc := range []struct {
		name string
		edit func(*broadcast.Edit)
	}{
		{"unknown template", func(e *broadcast.Edit) { e.TemplateID = ptr("nope") }},
		{"unpublished template", func(e *broadcast.Edit) { e.TemplateID = ptr("draft") }},
		{"template and html", func(e *broadcast.Edit) { e.TemplateID, e.HTML = ptr("published"), ptr("<p>x</p>") }},
		{"before scheduled_at without send", func(e *broadcast.Edit) { e.TemplateID = ptr("nope") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := base()
			tc.edit(&e)
			scheduledAt := ""
			if strings.HasPrefix(tc.name, "before") {
				scheduledAt = "tomorrow"
			}
			_, err := f.svc.Create(ctx, from, e, false, scheduledAt)
			requireInvalid(t, err, "template_id")
		})
	}

	e := base()
	e.TemplateID = ptr("published")
	b, err := f.svc.Create(ctx, from, e, false, "")
	require.NoError(t, err)
	require.Equal(t, "From the template", b.Subject)
	require.Equal(t, ptr("<p>template</p>"), b.HTML)
	require.Equal(t, ptr("text"), b.Text)

	// On an update too; a subject given wins over the template's.
	d := f.draft(t, nil)
	got, err := f.svc.Update(ctx, f.team, d.ID, broadcast.Edit{TemplateID: ptr("published"), Subject: ptr("Mine")})
	require.NoError(t, err)
	require.Equal(t, "Mine", got.Subject)
	require.Equal(t, ptr("<p>template</p>"), got.HTML)
	_, err = f.svc.Update(ctx, f.other, d.ID, broadcast.Edit{TemplateID: ptr("published")})
	requireInvalid(t, err, "template_id") // another team's template is unknown
}

func TestServiceUpdateForm(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	d := f.draft(t, nil)
	_, err := f.svc.Update(ctx, f.team, d.ID, broadcast.Edit{Name: ptr(" "), Form: true})
	var ie *invalid.Error
	require.ErrorAs(t, err, &ie)
	require.True(t, ie.Missing)
	require.Equal(t, "name", ie.Field)
	// The API accepts an empty name.
	got, err := f.svc.Update(ctx, f.team, d.ID, broadcast.Edit{Name: ptr("")})
	require.NoError(t, err)
	require.Equal(t, "", got.Name)
}

func TestServiceReads(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	d := f.draft(t, nil)

	got, err := f.svc.Get(ctx, f.team, d.ID)
	require.NoError(t, err)
	require.Equal(t, d.ID, got.ID)
	_, err = f.svc.Get(ctx, f.other, d.ID)
	require.ErrorIs(t, err, store.ErrNotFound)

	list, more, err := f.svc.List(ctx, f.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, list, 1)

	counts, err := f.svc.SegmentContacts(ctx, f.team)
	require.NoError(t, err)
	require.Equal(t, int64(2), counts[f.seg])

	_, _, err = f.svc.Recipients(ctx, f.team, d.ID, broadcast.RecipientFilter{Kind: "nope"}, store.Page{Limit: 10})
	requireInvalid(t, err, "type")
	_, _, err = f.svc.Recipients(ctx, f.other, d.ID, broadcast.RecipientFilter{Kind: ""}, store.Page{Limit: 10})
	require.ErrorIs(t, err, store.ErrNotFound)
	rows, _, err := f.svc.Recipients(ctx, f.team, d.ID, broadcast.RecipientFilter{Kind: "sent"}, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, rows, "a draft has no recipients")
}

func TestServiceDuplicateAndDelete(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	long := strings.Repeat("é", broadcast.MaxName/2)
	d := f.draft(t, func(e *broadcast.Edit) { e.Name = &long })

	dup, err := f.svc.Duplicate(ctx, f.team, d.ID, nil)
	require.NoError(t, err)
	require.NotEqual(t, d.ID, dup.ID)
	require.Equal(t, store.BroadcastDraft, dup.Status)
	require.LessOrEqual(t, len(dup.Name), broadcast.MaxName)
	require.True(t, strings.HasPrefix(dup.Name, "Copy of é"), dup.Name)

	keep, err := f.svc.Duplicate(ctx, f.team, d.ID, func(name string) string { return name })
	require.NoError(t, err)
	require.Equal(t, long, keep.Name)
	_, err = f.svc.Duplicate(ctx, f.other, d.ID, nil)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.Equal(t, "Copy of untitled broadcast", broadcast.CopyName(" "))

	_, err = f.svc.Delete(ctx, f.other, d.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.svc.Delete(ctx, f.team, d.ID)
	require.NoError(t, err)
	_, err = f.svc.Get(ctx, f.team, d.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestServicePlanSend(t *testing.T) {
	f := newServiceFixture(t)
	ctx := context.Background()
	d := f.draft(t, nil)

	plan, err := f.svc.PlanSend(ctx, d, "")
	require.NoError(t, err)
	require.Nil(t, plan.At)
	require.Equal(t, int64(2), plan.Contacts)

	plan, err = f.svc.PlanSend(ctx, d, "in 2 hours")
	require.NoError(t, err)
	require.NotNil(t, plan.At)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), *plan.At, time.Minute)

	_, err = f.svc.PlanSend(ctx, d, "someday maybe")
	var se *submit.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "scheduled_at", se.Field)

	undeclared := f.draft(t, func(e *broadcast.Edit) { e.HTML = ptr("<p>{{{PLAN}}}</p>") })
	_, err = f.svc.PlanSend(ctx, undeclared, "")
	requireInvalid(t, err, "html")

	got, err := f.svc.Get(ctx, f.team, d.ID)
	require.NoError(t, err)
	require.Equal(t, store.BroadcastDraft, got.Status, "planning sends nothing")
}
