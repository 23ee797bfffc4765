package templates

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/store"
)

func ptr(s string) *string { return &s }

func TestApply(t *testing.T) {
	vars := func(v ...Variable) *[]Variable { return &v }
	cases := []struct {
		name    string
		edit    Edit
		create  bool
		field   string // of the rejection; "" when it applies
		missing bool
	}{
		{name: "new", edit: Edit{Name: ptr("Welcome"), HTML: ptr("<p>{{{NAME|you}}}</p>")}, create: true},
		{name: "new without name", edit: Edit{HTML: ptr("<p>x</p>")}, create: true, field: "name", missing: true},
		{name: "new without body", edit: Edit{Name: ptr("W")}, create: true, field: "html", missing: true},
		{name: "empty name kept on update", edit: Edit{Name: ptr("")}},
		{name: "uuid alias", edit: Edit{Alias: ptr("0195f7e2-3c4d-7a1b-8c9d-0e1f2a3b4c5d")}, field: "alias"},
		{name: "bad from", edit: Edit{From: ptr("not an address")}, field: "from"},
		{name: "bad reply-to", edit: Edit{ReplyTo: []string{"nope"}}, field: "reply_to"},
		{name: "both bodies", edit: Edit{HTML: ptr("<p>x</p>"), Components: json.RawMessage(`{"blocks":[]}`)}, field: "components"},
		{name: "bad document", edit: Edit{Components: json.RawMessage(`{"blocks":[{"type":"heading"}]}`)}, field: "components"},
		{name: "undeclared", edit: Edit{HTML: ptr("{{{X}}}")}, field: "html"},
		{name: "declared", edit: Edit{HTML: ptr("{{{X}}}"), Variables: vars(Variable{Key: "X", Type: "number", Fallback: json.RawMessage("1")})}},
		{name: "reserved", edit: Edit{Variables: vars(Variable{Key: "EMAIL", Type: "string"})}, field: "variables"},
		{name: "twice", edit: Edit{Variables: vars(Variable{Key: "A", Type: "string"}, Variable{Key: "A", Type: "string"})}, field: "variables"},
		{name: "fallback of another type", edit: Edit{Variables: vars(Variable{Key: "A", Type: "number", Fallback: json.RawMessage(`"x"`)})}, field: "variables"},
		{name: "bad subject", edit: Edit{Subject: ptr("{{{A")}, field: "subject"},
		{name: "every type", edit: Edit{HTML: ptr("{{#if B}}{{#each L}}{{name}}{{/each}}{{/if}}{{O.city}}{{{S}}}{{N}}"), Variables: vars(
			Variable{Key: "B", Type: "boolean", Fallback: json.RawMessage("false")},
			Variable{Key: "L", Type: "list", Fallback: json.RawMessage(`[{"name":"a"}]`)},
			Variable{Key: "O", Type: "object", Fallback: json.RawMessage(`{"city":"Oslo"}`)},
			Variable{Key: "S", Type: "string"}, Variable{Key: "N", Type: "number"})}},
		{name: "unknown type", edit: Edit{Variables: vars(Variable{Key: "A", Type: "date"})}, field: "variables"},
		{name: "boolean fallback of another type", edit: Edit{Variables: vars(Variable{Key: "A", Type: "boolean", Fallback: json.RawMessage(`"true"`)})}, field: "variables"},
		{name: "list fallback of another type", edit: Edit{Variables: vars(Variable{Key: "A", Type: "list", Fallback: json.RawMessage(`{}`)})}, field: "variables"},
		{name: "object fallback of another type", edit: Edit{Variables: vars(Variable{Key: "A", Type: "object", Fallback: json.RawMessage(`[]`)})}, field: "variables"},
		{name: "list without fallback", edit: Edit{Variables: vars(Variable{Key: "A", Type: "list"})}, field: "variables"},
		{name: "object without fallback", edit: Edit{Variables: vars(Variable{Key: "A", Type: "object", Fallback: json.RawMessage("null")})}, field: "variables"},
		{name: "this is reserved", edit: Edit{Variables: vars(Variable{Key: "this", Type: "string"})}, field: "variables"},
		{name: "contact is reserved", edit: Edit{Variables: vars(Variable{Key: "contact", Type: "object", Fallback: json.RawMessage("{}")})}, field: "variables"},
		{name: "undeclared loop", edit: Edit{HTML: ptr("{{#each L}}{{x}}{{/each}}")}, field: "html"},
		{name: "undeclared condition", edit: Edit{HTML: ptr("{{#if F}}x{{/if}}")}, field: "html"},
		{name: "unclosed block", edit: Edit{HTML: ptr("{{#if F}}x"), Variables: vars(Variable{Key: "F", Type: "boolean"})}, field: "html"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := store.Template{Name: "Old", Content: store.TemplateContent{HTML: "<p>old</p>"}}
			err := tc.edit.Apply(&tpl, tc.create)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var ie *invalid.Error
			require.True(t, errors.As(err, &ie), "%v", err)
			require.Equal(t, tc.field, ie.Field, ie.Message)
			require.Equal(t, tc.missing, ie.Missing)
		})
	}

	// Components are rendered into html and text, placeholders kept.
	tpl := store.Template{}
	require.NoError(t, Edit{Name: ptr("C"), Components: json.RawMessage(`{"blocks":[{"type":"heading","level":1,"text":"Hi {{{NAME|you}}}"}]}`)}.Apply(&tpl, true))
	require.Contains(t, tpl.Content.HTML, "Hi {{{NAME|you}}}")
	require.NotNil(t, tpl.Content.Text)
	require.NotNil(t, tpl.Content.Components)
	// HTML given later drops the document.
	require.NoError(t, Edit{HTML: ptr("<p>plain</p>")}.Apply(&tpl, false))
	require.Nil(t, tpl.Content.Components)
	require.Equal(t, "<p>plain</p>", tpl.Content.HTML)
}
