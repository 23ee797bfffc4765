package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// TestTemplateLifecycle: a created template is a draft; publishing copies
// its content into the published version, which later edits leave alone
// until the next publish; aliases are unique per team and resolve like
// ids; duplicates are drafts without an alias; another team sees nothing.
func TestTemplateLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	team, other := newTeam(t, st), newTeam(t, st)
	subject := "Hi {{{NAME}}}"
	alias := "welcome"
	created, err := st.Templates.CreateTemplate(ctx, store.Template{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "Welcome",
		Alias: &alias, Content: store.TemplateContent{Subject: &subject, HTML: "<p>{{{NAME}}}</p>",
			Variables: []store.TemplateVariable{{Key: "NAME", Type: "string", Fallback: json.RawMessage(`"you"`)}}}})
	require.NoError(t, err)
	require.Equal(t, store.TemplateDraft, created.Status())
	require.Nil(t, created.Published)

	got, err := st.Templates.TemplateByRef(ctx, team, "welcome")
	require.NoError(t, err)
	require.Equal(t, created.ID, got.ID)
	require.Equal(t, subject, *got.Content.Subject)
	require.JSONEq(t, `"you"`, string(got.Content.Variables[0].Fallback))

	_, err = st.Templates.CreateTemplate(ctx, store.Template{ID: uuid.Must(uuid.NewV7()), TeamID: team, Name: "x", Alias: &alias})
	require.ErrorIs(t, err, store.ErrConflict, "an alias is unique per team")
	_, err = st.Templates.CreateTemplate(ctx, store.Template{ID: uuid.Must(uuid.NewV7()), TeamID: other, Name: "x", Alias: &alias})
	require.NoError(t, err, "another team may use the same alias")

	for _, ref := range []string{created.ID.String(), "welcome"} {
		_, err = st.Templates.TemplateByRef(ctx, other, ref)
		if ref == "welcome" {
			got, err := st.Templates.TemplateByRef(ctx, other, ref)
			require.NoError(t, err)
			require.NotEqual(t, created.ID, got.ID, "an alias resolves within its team")
			continue
		}
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	_, err = st.Templates.PublishTemplate(ctx, other, created.ID.String(), uuid.New())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Templates.DeleteTemplate(ctx, other, created.ID.String())
	require.ErrorIs(t, err, store.ErrNotFound)

	pub, err := st.Templates.PublishTemplate(ctx, team, "welcome", uuid.New())
	require.NoError(t, err)
	require.Equal(t, store.TemplatePublished, pub.Status())
	require.NotNil(t, pub.PublishedAt)
	require.Equal(t, "<p>{{{NAME}}}</p>", pub.Published.HTML)
	require.False(t, pub.HasUnpublished)

	edited, err := st.Templates.UpdateTemplate(ctx, team, created.ID.String(), func(t *store.Template) error {
		t.Content.HTML = "<p>v2 {{{NAME}}}</p>"
		return nil
	})
	require.NoError(t, err)
	require.True(t, edited.HasUnpublished)
	require.Equal(t, "<p>v2 {{{NAME}}}</p>", edited.Content.HTML)
	require.Equal(t, "<p>{{{NAME}}}</p>", edited.Published.HTML, "an edit leaves the published version")

	dup, err := st.Templates.DuplicateTemplate(ctx, team, "welcome", uuid.Must(uuid.NewV7()))
	require.NoError(t, err)
	require.Equal(t, "Welcome (copy)", dup.Name)
	require.Nil(t, dup.Alias)
	require.Equal(t, store.TemplateDraft, dup.Status())
	require.Equal(t, "<p>v2 {{{NAME}}}</p>", dup.Content.HTML)

	list, more, err := st.Templates.ListTemplates(ctx, team, store.Page{Limit: 1})
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, dup.ID, list[0].ID)

	_, err = st.Templates.UpdateTemplate(ctx, team, dup.ID.String(), func(t *store.Template) error {
		t.Alias = &alias
		return nil
	})
	require.ErrorIs(t, err, store.ErrConflict)

	deleted, err := st.Templates.DeleteTemplate(ctx, team, "welcome")
	require.NoError(t, err)
	require.Equal(t, created.ID, deleted.ID)
	_, err = st.Templates.TemplateByRef(ctx, team, created.ID.String())
	require.ErrorIs(t, err, store.ErrNotFound)
}
