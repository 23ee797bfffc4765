package templates_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func ptr(s string) *string { return &s }

// newService returns a Service on a fresh store and two teams.
func newService(t *testing.T) (*templates.Service, uuid.UUID, uuid.UUID) {
	t.Helper()
	st := storetest.New(t)
	var teams [2]uuid.UUID
	for i := range teams {
		teams[i] = uuid.Must(uuid.NewV7())
		require.NoError(t, st.Accounts.CreateTeam(context.Background(), store.Team{ID: teams[i], Name: "T"}))
	}
	return templates.New(st), teams[0], teams[1]
}

// requireInvalid requires err to be an *invalid.Error about field.
func requireInvalid(t *testing.T, err error, field string, missing bool) {
	t.Helper()
	var ie *invalid.Error
	require.True(t, errors.As(err, &ie), "want *invalid.Error about %s, got %v", field, err)
	require.Equal(t, field, ie.Field, ie.Message)
	require.Equal(t, missing, ie.Missing, ie.Message)
}

func TestServiceCreateChecks(t *testing.T) {
	svc, team, _ := newService(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		edit    templates.Edit
		field   string
		missing bool
	}{
		{"no name", templates.Edit{HTML: ptr("<p>x</p>")}, "name", true},
		{"blank name", templates.Edit{Name: ptr("  "), HTML: ptr("<p>x</p>")}, "name", false},
		{"no body", templates.Edit{Name: ptr("W")}, "html", true},
		{"uuid alias", templates.Edit{Name: ptr("W"), HTML: ptr("x"), Alias: ptr(uuid.NewString())}, "alias", false},
		{"bad from", templates.Edit{Name: ptr("W"), HTML: ptr("x"), From: ptr("nope")}, "from", false},
		{"undeclared variable", templates.Edit{Name: ptr("W"), HTML: ptr("{{{PLAN}}}")}, "html", false},
		{"both bodies", templates.Edit{Name: ptr("W"), HTML: ptr("x"), Components: []byte(`{"version":1}`)}, "components", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Create(ctx, team, tc.edit)
			requireInvalid(t, err, tc.field, tc.missing)
		})
	}
	list, _, err := svc.List(ctx, team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list, "a refused template is not stored")
}

func TestServiceLifecycle(t *testing.T) {
	svc, team, other := newService(t)
	ctx := context.Background()
	created, err := svc.Create(ctx, team, templates.Edit{Name: ptr("Welcome"), Alias: ptr("welcome"),
		HTML: ptr("<p>{{{NAME|you}}}</p>"), Text: ptr("Hi")})
	require.NoError(t, err)
	require.Equal(t, store.TemplateDraft, created.Status())

	got, err := svc.Get(ctx, team, "welcome")
	require.NoError(t, err)
	require.Equal(t, created.ID, got.ID)
	_, err = svc.Get(ctx, other, "welcome")
	require.ErrorIs(t, err, store.ErrNotFound, "another team's template")

	_, err = svc.Create(ctx, team, templates.Edit{Name: ptr("Again"), Alias: ptr("welcome"), HTML: ptr("x")})
	require.ErrorIs(t, err, store.ErrConflict, "an alias the team uses")

	// An API update leaves an empty name and an absent text part as they are.
	upd, err := svc.Update(ctx, team, "welcome", templates.Edit{Name: ptr(""), HTML: ptr("<p>New</p>")})
	require.NoError(t, err)
	require.Equal(t, "Welcome", upd.Name)
	require.Equal(t, ptr("Hi"), upd.Content.Text)
	_, err = svc.Update(ctx, team, "welcome", templates.Edit{Variables: &[]templates.Variable{{Key: "BAD KEY", Type: "string"}}})
	requireInvalid(t, err, "variables", false)

	pub, err := svc.Publish(ctx, team, created.ID.String())
	require.NoError(t, err)
	require.Equal(t, store.TemplatePublished, pub.Status())
	dup, err := svc.Duplicate(ctx, team, "welcome")
	require.NoError(t, err)
	require.Equal(t, "Welcome (copy)", dup.Name)
	require.Nil(t, dup.Alias)
	require.NotEqual(t, created.ID, dup.ID)

	_, err = svc.Delete(ctx, other, "welcome")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = svc.Delete(ctx, team, "welcome")
	require.NoError(t, err)
	_, err = svc.Publish(ctx, team, "welcome")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestServiceUpdateForm checks the dashboard editor's whole-form edit: an
// empty name is refused, and html without text drops the text part.
func TestServiceUpdateForm(t *testing.T) {
	svc, team, _ := newService(t)
	ctx := context.Background()
	tpl, err := svc.Create(ctx, team, templates.Edit{Name: ptr("News"), HTML: ptr("<p>x</p>"), Text: ptr("x")})
	require.NoError(t, err)
	ref := tpl.ID.String()

	_, err = svc.Update(ctx, team, ref, templates.Edit{Name: ptr(" "), HTML: ptr("<p>y</p>"), Form: true})
	requireInvalid(t, err, "name", true)

	got, err := svc.Update(ctx, team, ref, templates.Edit{Name: ptr("News 2"), HTML: ptr("<p>y</p>"), Form: true})
	require.NoError(t, err)
	require.Equal(t, "News 2", got.Name)
	require.Nil(t, got.Content.Text, "the editor's empty text part removes it")

	got, err = svc.Update(ctx, team, ref, templates.Edit{Name: ptr("News 2"), HTML: ptr("<p>y</p>"), Text: ptr("y"), Form: true})
	require.NoError(t, err)
	require.Equal(t, ptr("y"), got.Content.Text)
}
