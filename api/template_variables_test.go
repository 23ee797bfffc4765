package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// receiptTemplate declares a variable of each of Resend's types and uses
// them through references, dot paths, {{#if}} and {{#each}}.
var receiptTemplate = map[string]any{
	"name":    "Receipt",
	"from":    "Acme <onboarding@posthaste.test>",
	"subject": "Receipt {{{ORDER.id}}}",
	"html": "<p>{{#if VIP}}VIP{{else}}Hello{{/if}} {{{NAME}}}</p>" +
		"<ul>{{#each ITEMS}}<li>{{name}} x{{{qty}}}</li>{{else}}<li>none</li>{{/each}}</ul>" +
		"<p>{{{TOTAL}}} {{ORDER.ship.city}}</p>",
	"variables": []map[string]any{
		{"key": "NAME", "type": "string", "fallback_value": "you"},
		{"key": "TOTAL", "type": "number", "fallback_value": 0},
		{"key": "VIP", "type": "boolean", "fallback_value": false},
		{"key": "ORDER", "type": "object", "fallback_value": map[string]any{"id": "n/a", "ship": map[string]any{"city": "?"}}},
		{"key": "ITEMS", "type": "list", "fallback_value": []any{}},
	},
}

// TestTemplateVariablesOfEveryType: a template declares boolean, object and
// list variables (typed fallbacks checked when it is saved), GET returns
// them, and sends render them, or are refused with a 422 naming the
// variable whose value has the wrong type.
func TestTemplateVariablesOfEveryType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.do("POST", "/templates", e.keyA, receiptTemplate)
	require.Equal(t, 201, r.status, string(r.raw))
	id := r.body["id"].(string)

	g := e.do("GET", "/templates/"+id, e.keyA, nil)
	require.Equal(t, 200, g.status, string(g.raw))
	vars := g.body["variables"].([]any)
	require.Len(t, vars, 5)
	byKey := map[string]map[string]any{}
	for _, v := range vars {
		byKey[v.(map[string]any)["key"].(string)] = v.(map[string]any)
	}
	require.Equal(t, "boolean", byKey["VIP"]["type"])
	require.Equal(t, false, byKey["VIP"]["fallback_value"])
	require.Equal(t, "list", byKey["ITEMS"]["type"])
	require.Equal(t, []any{}, byKey["ITEMS"]["fallback_value"])
	require.Equal(t, map[string]any{"id": "n/a", "ship": map[string]any{"city": "?"}}, byKey["ORDER"]["fallback_value"])

	for name, v := range map[string]map[string]any{
		"boolean fallback a string": {"key": "A", "type": "boolean", "fallback_value": "true"},
		"object fallback a list":    {"key": "A", "type": "object", "fallback_value": []any{}},
		"list fallback an object":   {"key": "A", "type": "list", "fallback_value": map[string]any{}},
		"list without fallback":     {"key": "A", "type": "list"},
		"this declared":             {"key": "this", "type": "string"},
	} {
		bad := e.do("POST", "/templates", e.keyA, map[string]any{"name": "x", "html": "x", "variables": []any{v}})
		requireError(t, bad, 422, "validation_error")
		require.Contains(t, bad.body["message"], v["key"], name)
	}
	requireError(t, e.do("POST", "/templates", e.keyA, map[string]any{"name": "x", "html": "{{#each L}}x"}), 422,
		"validation_error")

	require.Equal(t, 200, e.do("POST", "/templates/"+id+"/publish", e.keyA, nil).status)
	send := func(vars map[string]any) resp {
		return e.do("POST", "/emails", e.keyA, map[string]any{"to": "delivered@posthaste.test",
			"template": map[string]any{"id": id, "variables": vars}})
	}
	ok := send(map[string]any{"NAME": "<Ann>", "TOTAL": 12.5, "VIP": true,
		"ORDER": map[string]any{"id": "A-1", "ship": map[string]any{"city": "Oslo"}},
		"ITEMS": []any{map[string]any{"name": "Mug", "qty": 2}, map[string]any{"name": "Fish & Chips", "qty": 1}}})
	require.Equal(t, 200, ok.status, string(ok.raw))
	em, err := e.store.Emails.GetEmail(ctx, e.teamA, uuid.MustParse(ok.body["id"].(string)))
	require.NoError(t, err)
	require.Equal(t, "Receipt A-1", em.Subject)
	require.Equal(t, "<p>VIP &lt;Ann&gt;</p><ul><li>Mug x2</li><li>Fish &amp; Chips x1</li></ul><p>12.5 Oslo</p>", *em.HTML)

	fb := send(nil)
	require.Equal(t, 200, fb.status, string(fb.raw))
	em, err = e.store.Emails.GetEmail(ctx, e.teamA, uuid.MustParse(fb.body["id"].(string)))
	require.NoError(t, err)
	require.Equal(t, "Receipt n/a", em.Subject)
	require.Equal(t, "<p>Hello you</p><ul><li>none</li></ul><p>0 ?</p>", *em.HTML)

	before := e.notify.n.Load()
	for name, tc := range map[string]struct {
		vars map[string]any
		key  string
	}{
		"boolean given a string": {map[string]any{"VIP": "yes"}, "VIP"},
		"list given an object":   {map[string]any{"ITEMS": map[string]any{}}, "ITEMS"},
		"object given a list":    {map[string]any{"ORDER": []any{1}}, "ORDER"},
		"number given a boolean": {map[string]any{"TOTAL": true}, "TOTAL"},
		"string given an object": {map[string]any{"NAME": map[string]any{"a": 1}}, "NAME"},
	} {
		bad := send(tc.vars)
		requireError(t, bad, 422, "validation_error")
		require.Contains(t, bad.body["message"], "`template.variables."+tc.key+"`", name)
	}
	require.Equal(t, before, e.notify.n.Load(), "rejected sends accept nothing")
}

// TestTemplateCurrentVersionID: current_version_id is null until the
// template is published, then the published version's id, new on every
// publish, on GET and in the list.
func TestTemplateCurrentVersionID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/templates", e.keyA, welcomeTemplate)
	require.Equal(t, 201, r.status, string(r.raw))
	id := r.body["id"].(string)
	g := e.do("GET", "/templates/"+id, e.keyA, nil)
	require.Contains(t, g.body, "current_version_id")
	require.Nil(t, g.body["current_version_id"])
	listed := func() any {
		l := e.do("GET", "/templates", e.keyA, nil)
		require.Equal(t, 200, l.status, string(l.raw))
		item := l.body["data"].([]any)[0].(map[string]any)
		require.Contains(t, item, "current_version_id")
		return item["current_version_id"]
	}
	require.Nil(t, listed())

	require.Equal(t, 200, e.do("POST", "/templates/"+id+"/publish", e.keyA, nil).status)
	first := e.do("GET", "/templates/"+id, e.keyA, nil).body["current_version_id"]
	require.NotNil(t, first)
	_, err := uuid.Parse(first.(string))
	require.NoError(t, err)
	require.Equal(t, first, listed())

	require.Equal(t, 200, e.do("PATCH", "/templates/"+id, e.keyA, map[string]any{"subject": "v2"}).status)
	require.Equal(t, first, e.do("GET", "/templates/"+id, e.keyA, nil).body["current_version_id"],
		"an edit does not change the published version")
	require.Equal(t, 200, e.do("POST", "/templates/"+id+"/publish", e.keyA, nil).status)
	second := e.do("GET", "/templates/"+id, e.keyA, nil).body["current_version_id"]
	require.NotNil(t, second)
	require.NotEqual(t, first, second)

	dup := e.do("POST", "/templates/"+id+"/duplicate", e.keyA, nil)
	require.Nil(t, e.do("GET", "/templates/"+dup.body["id"].(string), e.keyA, nil).body["current_version_id"])
}

// TestSegmentFilterRefused: Resend's dynamic segments (`filter`) have no
// documented language, so a filter is a 422 saying so, on create and on
// update, and nothing is created.
func TestSegmentFilterRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	filter := map[string]any{"and": []any{map[string]any{"property": "plan", "eq": "pro"}}}
	bad := e.do("POST", "/segments", e.keyA, map[string]any{"name": "Pro", "filter": filter})
	requireError(t, bad, 422, "validation_error")
	require.Contains(t, bad.body["message"], "not supported")
	l := e.do("GET", "/segments", e.keyA, nil)
	require.Empty(t, l.body["data"])

	ok := e.do("POST", "/segments", e.keyA, map[string]any{"name": "Pro", "filter": nil})
	require.Equal(t, 201, ok.status, string(ok.raw))
	seg := ok.body["id"].(string)
	upd := e.do("PATCH", "/segments/"+seg, e.keyA, map[string]any{"name": "Pro 2", "filter": map[string]any{}})
	requireError(t, upd, 422, "validation_error")
	require.Contains(t, upd.body["message"], "filter")
	require.Equal(t, "Pro", e.do("GET", "/segments/"+seg, e.keyA, nil).body["name"])
}

// TestResendNodeSDKTemplateVariables runs
// testdata/resend-node/template-variables.cjs: Resend's Node SDK creates a
// template with variables of every type, reads it (current_version_id null,
// then set by publish) and sends with values of each type.
func TestResendNodeSDKTemplateVariables(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "template-variables.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	var res struct {
		Created struct{ ID string }
		Draft   struct {
			CurrentVersionID *string `json:"current_version_id"`
			Variables        []struct {
				Key, Type     string
				FallbackValue any `json:"fallback_value"`
			}
		}
		Got struct {
			CurrentVersionID *string `json:"current_version_id"`
			Status           string
		}
		Sent       struct{ ID string }
		Fallbacks  struct{ ID string }
		WrongError *struct{ Name, Message string } `json:"wrongError"`
		List       struct {
			Data []struct {
				ID               string
				CurrentVersionID *string `json:"current_version_id"`
			}
		}
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Nil(t, res.Draft.CurrentVersionID)
	types := map[string]string{}
	for _, v := range res.Draft.Variables {
		types[v.Key] = v.Type
	}
	require.Equal(t, map[string]string{"NAME": "string", "TOTAL": "number", "VIP": "boolean", "ORDER": "object",
		"ITEMS": "list"}, types)
	require.Equal(t, "published", res.Got.Status)
	require.NotNil(t, res.Got.CurrentVersionID)
	require.Len(t, res.List.Data, 1)
	require.Equal(t, res.Got.CurrentVersionID, res.List.Data[0].CurrentVersionID)

	ctx := context.Background()
	em, err := e.store.Emails.GetEmail(ctx, e.teamA, uuid.MustParse(res.Sent.ID))
	require.NoError(t, err)
	require.Equal(t, "Receipt A-1 for Ann <Lee>", em.Subject)
	require.Equal(t, "<p>Dear VIP Ann &lt;Lee&gt;</p><ul><li>Mug x2</li><li>Tea &amp; Co x1</li></ul>"+
		"<p>Total 12.5 to Oslo</p>", *em.HTML)
	require.Equal(t, "- Mug\n- Tea & Co\n", *em.Text)
	em, err = e.store.Emails.GetEmail(ctx, e.teamA, uuid.MustParse(res.Fallbacks.ID))
	require.NoError(t, err)
	require.Equal(t, "<p>Hello customer</p><ul><li>nothing</li></ul><p>Total 0 to nowhere</p>", *em.HTML)
	require.NotNil(t, res.WrongError)
	require.Equal(t, "validation_error", res.WrongError.Name)
	require.Contains(t, res.WrongError.Message, "template.variables.VIP")
}
