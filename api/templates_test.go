package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// welcomeTemplate is a template body using a declared variable with a
// fallback, one without, and a reserved one.
var welcomeTemplate = map[string]any{
	"name":    "Welcome",
	"alias":   "welcome",
	"from":    "Acme <onboarding@posthaste.test>",
	"subject": "Hi {{{NAME}}}",
	"html":    "<p>Hi {{{NAME}}}, your code is {{{CODE}}} ({{{EMAIL}}}). {{{PLAN|Free}}}</p>",
	"text":    "Hi {{{NAME}}}, code {{{CODE}}}",
	"variables": []map[string]any{
		{"key": "NAME", "type": "string", "fallback_value": "friend"},
		{"key": "CODE", "type": "number"},
	},
}

// TestTemplatesCRUD: create, get by id and alias, list with cursors,
// update (which leaves the published version), publish, duplicate and
// delete, and the checks on a template's body.
func TestTemplatesCRUD(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/templates", e.keyA, welcomeTemplate)
	require.Equal(t, 201, r.status, string(r.raw))
	require.Equal(t, "template", r.body["object"])
	id := r.body["id"].(string)

	for _, ref := range []string{id, "welcome"} {
		g := e.do("GET", "/templates/"+ref, e.keyA, nil)
		require.Equal(t, 200, g.status, string(g.raw))
		require.Equal(t, id, g.body["id"])
		require.Equal(t, "draft", g.body["status"])
		require.Nil(t, g.body["published_at"])
		require.Equal(t, "Hi {{{NAME}}}", g.body["subject"])
		vars := g.body["variables"].([]any)
		require.Len(t, vars, 2)
		require.Equal(t, "friend", vars[0].(map[string]any)["fallback_value"])
		require.Nil(t, vars[1].(map[string]any)["fallback_value"])
	}

	requireError(t, e.do("POST", "/templates", e.keyA, welcomeTemplate), 422, "validation_error") // alias taken
	for name, body := range map[string]map[string]any{
		"no name":           {"html": "<p>x</p>"},
		"no html":           {"name": "x"},
		"undeclared":        {"name": "x", "html": "{{{NOPE}}}"},
		"unterminated":      {"name": "x", "html": "{{{NAME"},
		"reserved declared": {"name": "x", "html": "x", "variables": []map[string]any{{"key": "EMAIL", "type": "string"}}},
		"bad type":          {"name": "x", "html": "x", "variables": []map[string]any{{"key": "A", "type": "date"}}},
		"fallback type":     {"name": "x", "html": "x", "variables": []map[string]any{{"key": "A", "type": "number", "fallback_value": "1"}}},
		"uuid alias":        {"name": "x", "html": "x", "alias": uuid.NewString()},
		"bad from":          {"name": "x", "html": "x", "from": "nobody"},
	} {
		r := e.do("POST", "/templates", e.keyA, body)
		require.Equal(t, 422, r.status, "%s: %s", name, r.raw)
	}

	pub := e.do("POST", "/templates/welcome/publish", e.keyA, nil)
	require.Equal(t, 200, pub.status, string(pub.raw))
	g := e.do("GET", "/templates/"+id, e.keyA, nil)
	require.Equal(t, "published", g.body["status"])
	require.NotNil(t, g.body["published_at"])
	require.Equal(t, false, g.body["has_unpublished_versions"])

	up := e.do("PATCH", "/templates/"+id, e.keyA, map[string]any{"subject": "Hello {{{NAME}}}", "html": ""})
	require.Equal(t, 200, up.status, string(up.raw))
	g = e.do("GET", "/templates/"+id, e.keyA, nil)
	require.Equal(t, "Hello {{{NAME}}}", g.body["subject"])
	require.Equal(t, welcomeTemplate["html"], g.body["html"], "an empty html leaves it")
	require.Equal(t, true, g.body["has_unpublished_versions"])
	requireError(t, e.do("PATCH", "/templates/"+id, e.keyA, map[string]any{"html": "{{{UNDECLARED}}}"}), 422, "validation_error")

	dup := e.do("POST", "/templates/welcome/duplicate", e.keyA, nil)
	require.Equal(t, 200, dup.status, string(dup.raw))
	d := e.do("GET", "/templates/"+dup.body["id"].(string), e.keyA, nil)
	require.Equal(t, "Welcome (copy)", d.body["name"])
	require.Nil(t, d.body["alias"])
	require.Equal(t, "draft", d.body["status"])

	l := e.do("GET", "/templates?limit=1", e.keyA, nil)
	require.Equal(t, 200, l.status, string(l.raw))
	require.Equal(t, true, l.body["has_more"])
	first := l.body["data"].([]any)[0].(map[string]any)
	require.Equal(t, dup.body["id"], first["id"])
	l = e.do("GET", "/templates?limit=1&after="+first["id"].(string), e.keyA, nil)
	require.Equal(t, id, l.body["data"].([]any)[0].(map[string]any)["id"])
	require.Equal(t, false, l.body["has_more"])

	del := e.do("DELETE", "/templates/welcome", e.keyA, nil)
	require.Equal(t, 200, del.status, string(del.raw))
	require.Equal(t, true, del.body["deleted"])
	requireError(t, e.do("GET", "/templates/"+id, e.keyA, nil), 404, "not_found")
}

// TestTemplateTeamIsolation: team B can neither read, change, publish,
// duplicate, delete nor send with team A's template, by id or by alias.
func TestTemplateTeamIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/templates", e.keyA, welcomeTemplate)
	require.Equal(t, 201, r.status, string(r.raw))
	id := r.body["id"].(string)
	require.Equal(t, 200, e.do("POST", "/templates/"+id+"/publish", e.keyA, nil).status)

	for _, ref := range []string{id, "welcome"} {
		requireError(t, e.do("GET", "/templates/"+ref, e.keyB, nil), 404, "not_found")
		requireError(t, e.do("PATCH", "/templates/"+ref, e.keyB, map[string]any{"name": "mine"}), 404, "not_found")
		requireError(t, e.do("POST", "/templates/"+ref+"/publish", e.keyB, nil), 404, "not_found")
		requireError(t, e.do("POST", "/templates/"+ref+"/duplicate", e.keyB, nil), 404, "not_found")
		requireError(t, e.do("DELETE", "/templates/"+ref, e.keyB, nil), 404, "not_found")
		s := e.do("POST", "/emails", e.keyB, map[string]any{"to": "delivered@posthaste.test",
			"template": map[string]any{"id": ref, "variables": map[string]any{"CODE": 1}}})
		requireError(t, s, 422, "validation_error")
		require.Contains(t, s.body["message"], "not found")
	}
	l := e.do("GET", "/templates", e.keyB, nil)
	require.Empty(t, l.body["data"])
	require.Equal(t, "Welcome", e.do("GET", "/templates/"+id, e.keyA, nil).body["name"])
}

// TestSendWithTemplate: a send renders the published version's subject,
// html (values escaped) and text at acceptance and stores the result;
// drafts, missing variables, wrong types and html alongside a template
// are 422s that accept nothing; the payload's from and subject win over
// the template's; batches render each email.
func TestSendWithTemplate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.do("POST", "/templates", e.keyA, welcomeTemplate)
	require.Equal(t, 201, r.status, string(r.raw))
	id := r.body["id"].(string)
	send := func(tpl map[string]any, extra map[string]any) resp {
		body := map[string]any{"to": "delivered@posthaste.test", "template": tpl}
		for k, v := range extra {
			body[k] = v
		}
		return e.do("POST", "/emails", e.keyA, body)
	}
	vars := map[string]any{"NAME": "<Ann & Bob>", "CODE": 42}

	draft := send(map[string]any{"id": id, "variables": vars}, nil)
	requireError(t, draft, 422, "validation_error")
	require.Contains(t, draft.body["message"], "draft")

	require.Equal(t, 200, e.do("POST", "/templates/"+id+"/publish", e.keyA, nil).status)
	// An edit after publishing does not change what is sent.
	require.Equal(t, 200, e.do("PATCH", "/templates/"+id, e.keyA, map[string]any{"subject": "Changed"}).status)

	ok := send(map[string]any{"id": "welcome", "variables": vars}, nil)
	require.Equal(t, 200, ok.status, string(ok.raw))
	em, err := e.store.Emails.GetEmail(ctx, e.teamA, uuid.MustParse(ok.body["id"].(string)))
	require.NoError(t, err)
	require.Equal(t, "Acme <onboarding@posthaste.test>", em.From)
	require.Equal(t, "Hi <Ann & Bob>", em.Subject, "subjects are not HTML-escaped")
	require.Equal(t, "<p>Hi &lt;Ann &amp; Bob&gt;, your code is 42 (delivered@posthaste.test). Free</p>", *em.HTML)
	require.Equal(t, "Hi <Ann & Bob>, code 42", *em.Text)

	fallback := send(map[string]any{"id": id, "variables": map[string]any{"CODE": 7}},
		map[string]any{"subject": "Own subject", "from": "Other <onboarding@posthaste.test>"})
	require.Equal(t, 200, fallback.status, string(fallback.raw))
	em, err = e.store.Emails.GetEmail(ctx, e.teamA, uuid.MustParse(fallback.body["id"].(string)))
	require.NoError(t, err)
	require.Equal(t, "Own subject", em.Subject)
	require.Equal(t, "Other <onboarding@posthaste.test>", em.From)
	require.Contains(t, *em.HTML, "Hi friend,")

	before := e.notify.n.Load()
	missing := send(map[string]any{"id": id, "variables": map[string]any{"NAME": "x"}}, nil)
	requireError(t, missing, 422, "validation_error")
	require.Contains(t, missing.body["message"], "`CODE`")
	wrongType := send(map[string]any{"id": id, "variables": map[string]any{"CODE": "seven"}}, nil)
	requireError(t, wrongType, 422, "validation_error")
	require.Contains(t, wrongType.body["message"], "template.variables.CODE")
	requireError(t, send(map[string]any{"id": id, "variables": vars}, map[string]any{"html": "<p>x</p>"}), 422, "validation_error")
	requireError(t, send(map[string]any{"variables": vars}, nil), 422, "missing_required_field")
	requireError(t, send(map[string]any{"id": id, "variables": map[string]any{"CODE": true}}, nil), 422, "validation_error")
	require.Equal(t, before, e.notify.n.Load(), "rejected sends accept nothing")

	b := e.do("POST", "/emails/batch", e.keyA, []map[string]any{
		{"to": "delivered@posthaste.test", "template": map[string]any{"id": "welcome", "variables": map[string]any{"CODE": 1}}},
		{"to": "delivered@posthaste.test", "template": map[string]any{"id": id, "variables": map[string]any{"CODE": 2, "NAME": "Zoe"}}},
	})
	require.Equal(t, 200, b.status, string(b.raw))
	data := b.body["data"].([]any)
	require.Len(t, data, 2)
	em, err = e.store.Emails.GetEmail(ctx, e.teamA, uuid.MustParse(data[1].(map[string]any)["id"].(string)))
	require.NoError(t, err)
	require.Equal(t, "Hi Zoe", em.Subject)
	require.Contains(t, *em.HTML, "your code is 2")

	strict := e.do("POST", "/emails/batch", e.keyA, []map[string]any{
		{"to": "delivered@posthaste.test", "template": map[string]any{"id": id, "variables": map[string]any{"CODE": 1}}},
		{"to": "delivered@posthaste.test", "template": map[string]any{"id": id}},
	})
	requireError(t, strict, 422, "validation_error")
	require.Contains(t, strict.body["message"], "index 1")
	require.Contains(t, strict.body["message"], "`CODE`")
}

// TestTemplateFromComponents: a template given as a component document
// keeps the document and is rendered by internal/components into html and
// text with the placeholders left in, which sends then fill (escaped in
// the html). A bad document is a 422 naming the value's path.
func TestTemplateFromComponents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doc := map[string]any{"version": 1, "blocks": []map[string]any{
		{"type": "heading", "level": 1, "text": "Hi {{{NAME}}}"},
		{"type": "button", "label": "Open", "href": "{{{LINK}}}"},
	}}
	r := e.do("POST", "/templates", e.keyA, map[string]any{"name": "Doc", "from": "onboarding@posthaste.test",
		"subject": "Doc", "components": doc, "variables": []map[string]any{
			{"key": "NAME", "type": "string"}, {"key": "LINK", "type": "string"}}})
	require.Equal(t, 201, r.status, string(r.raw))
	id := r.body["id"].(string)
	g := e.do("GET", "/templates/"+id, e.keyA, nil)
	require.Equal(t, float64(1), g.body["components"].(map[string]any)["version"])
	require.Contains(t, g.body["html"], "Hi {{{NAME}}}")
	require.Contains(t, g.body["html"], `href="{{{LINK}}}"`)
	require.Contains(t, g.body["text"], "Hi {{{NAME}}}")

	require.Equal(t, 200, e.do("POST", "/templates/"+id+"/publish", e.keyA, nil).status)
	s := e.do("POST", "/emails", e.keyA, map[string]any{"to": "delivered@posthaste.test",
		"template": map[string]any{"id": id, "variables": map[string]any{"NAME": "A<B", "LINK": "https://x.test/?a=1&b=2"}}})
	require.Equal(t, 200, s.status, string(s.raw))
	em, err := e.store.Emails.GetEmail(context.Background(), e.teamA, uuid.MustParse(s.body["id"].(string)))
	require.NoError(t, err)
	require.Contains(t, *em.HTML, "Hi A&lt;B")
	require.Contains(t, *em.HTML, `href="https://x.test/?a=1&amp;b=2"`)
	require.Contains(t, *em.Text, "Hi A<B")

	bad := e.do("POST", "/templates", e.keyA, map[string]any{"name": "Bad", "components": map[string]any{
		"version": 1, "blocks": []map[string]any{{"type": "button", "label": "x", "href": "javascript:alert(1)"}}}})
	requireError(t, bad, 422, "validation_error")
	require.Contains(t, bad.body["message"], "blocks[0].href")
	both := e.do("POST", "/templates", e.keyA, map[string]any{"name": "Both", "html": "<p>x</p>", "components": doc})
	requireError(t, both, 422, "validation_error")
}

// TestResendGoSDKTemplates drives templates with Resend's official Go
// SDK: create with variables, get, publish, send with the template by
// alias, list, duplicate and remove.
func TestResendGoSDKTemplates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.goSDK(t, e.keyA)

	created, err := c.Templates.CreateWithContext(ctx, &resend.CreateTemplateRequest{
		Name:    "order-confirmation",
		Alias:   "order",
		From:    "Acme <onboarding@posthaste.test>",
		Subject: "Order {{{PRODUCT}}}",
		Html:    "<p>{{{PRODUCT}}} costs {{{PRICE}}}</p>",
		Variables: []*resend.TemplateVariable{
			{Key: "PRODUCT", Type: resend.VariableTypeString, FallbackValue: "item"},
			{Key: "PRICE", Type: resend.VariableTypeNumber, FallbackValue: 25},
		},
	})
	require.NoError(t, err)
	require.Equal(t, "template", created.Object)

	got, err := c.Templates.GetWithContext(ctx, "order")
	require.NoError(t, err)
	require.Equal(t, created.Id, got.Id)
	require.Equal(t, "draft", got.Status)
	require.Len(t, got.Variables, 2)
	require.EqualValues(t, 25, got.Variables[1].FallbackValue)

	_, err = c.Emails.SendWithContext(ctx, &resend.SendEmailRequest{To: []string{"delivered@posthaste.test"},
		Template: &resend.EmailTemplate{Id: "order"}})
	require.Error(t, err, "a draft is not sendable")

	_, err = c.Templates.PublishWithContext(ctx, created.Id)
	require.NoError(t, err)
	sent, err := c.Emails.SendWithContext(ctx, &resend.SendEmailRequest{To: []string{"delivered@posthaste.test"},
		Template: &resend.EmailTemplate{Id: "order", Variables: map[string]any{"PRODUCT": "Vintage Macintosh", "PRICE": 499}}})
	require.NoError(t, err)
	em, err := c.Emails.GetWithContext(ctx, sent.Id)
	require.NoError(t, err)
	require.Equal(t, "Order Vintage Macintosh", em.Subject)
	require.Equal(t, "<p>Vintage Macintosh costs 499</p>", em.Html)

	_, err = c.Templates.UpdateWithContext(ctx, created.Id, &resend.UpdateTemplateRequest{Name: "renamed"})
	require.NoError(t, err)
	dup, err := c.Templates.DuplicateWithContext(ctx, "order")
	require.NoError(t, err)
	list, err := c.Templates.ListWithContext(ctx, nil)
	require.NoError(t, err)
	require.Len(t, list.Data, 2)
	require.Equal(t, dup.Id, list.Data[0].Id)
	require.Equal(t, "renamed", list.Data[1].Name)
	removed, err := c.Templates.RemoveWithContext(ctx, dup.Id)
	require.NoError(t, err)
	require.True(t, removed.Deleted)
}

// TestResendNodeSDKTemplates runs testdata/resend-node/templates.cjs,
// which drives templates and a templated send with Resend's official Node
// SDK (6.x, installed by scripts/setup.sh with npm ci, as for
// TestResendNodeSDKContacts).
func TestResendNodeSDKTemplates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := runResendNode(t, "templates.cjs", "RESEND_BASE_URL="+e.srv.URL, "RESEND_API_KEY="+e.keyA)
	var res struct {
		Created    struct{ ID, Object string }
		DraftError *struct{ Name, Message string } `json:"draftError"`
		Got        struct {
			Status    string
			Variables []struct {
				Key           string
				FallbackValue any `json:"fallback_value"`
			}
		}
		Sent struct{ ID string }
		List struct {
			Data []struct{ ID, Name string }
		}
		Removed struct{ Deleted bool }
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Equal(t, "template", res.Created.Object)
	require.NotNil(t, res.DraftError, "a draft is not sendable")
	require.Equal(t, "validation_error", res.DraftError.Name)
	require.Equal(t, "draft", res.Got.Status)
	require.Len(t, res.Got.Variables, 2)
	require.Equal(t, "item", res.Got.Variables[0].FallbackValue)
	em, err := e.store.Emails.GetEmail(context.Background(), e.teamA, uuid.MustParse(res.Sent.ID))
	require.NoError(t, err)
	require.Equal(t, "Order Vintage <Macintosh>", em.Subject)
	require.Equal(t, "<p>Vintage &lt;Macintosh&gt; costs 499</p>", *em.HTML)
	require.Len(t, res.List.Data, 2)
	require.Equal(t, "renamed", res.List.Data[1].Name)
	require.True(t, res.Removed.Deleted)
}

// TestEmailWebhookPayloadNamesTemplateAndHeaders: email.* webhook events
// carry, as Resend's, the template an email was sent with (template_id,
// by id or alias, single and batch) and its custom headers
// ([{name, value}]); an email with neither has no such keys.
func TestEmailWebhookPayloadNamesTemplateAndHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.do("POST", "/templates", e.keyA, welcomeTemplate)
	require.Equal(t, 201, r.status, string(r.raw))
	tpl := r.body["id"].(string)
	require.Equal(t, 200, e.do("POST", "/templates/"+tpl+"/publish", e.keyA, nil).status)
	hook := e.do("POST", "/webhooks", e.keyA, map[string]any{"endpoint": "http://127.0.0.1:9/hook",
		"events": []string{"email.delivered"}})
	require.Equal(t, 201, hook.status, string(hook.raw))
	hookID := hook.body["id"].(string)

	withTpl := e.do("POST", "/emails", e.keyA, map[string]any{"to": "delivered@posthaste.test",
		"headers":  map[string]any{"X-Campaign": "spring", "X-Entity-Ref-ID": "42"},
		"template": map[string]any{"id": "welcome", "variables": map[string]any{"CODE": 1}}})
	require.Equal(t, 200, withTpl.status, string(withTpl.raw))
	batch := e.do("POST", "/emails/batch", e.keyA, []map[string]any{
		{"to": "delivered@posthaste.test", "template": map[string]any{"id": tpl, "variables": map[string]any{"CODE": 2}}}})
	require.Equal(t, 200, batch.status, string(batch.raw))
	plain := e.do("POST", "/emails", e.keyA, map[string]any{"from": "Acme <onboarding@posthaste.test>",
		"to": "delivered@posthaste.test", "subject": "s", "text": "t"})
	require.Equal(t, 200, plain.status, string(plain.raw))
	ids := []string{withTpl.body["id"].(string), batch.body["data"].([]any)[0].(map[string]any)["id"].(string),
		plain.body["id"].(string)}
	for _, id := range ids {
		require.NoError(t, e.store.Emails.RecordEvents(ctx, uuid.MustParse(id),
			[]store.Event{{Type: store.EventDelivered, Recipient: "delivered@posthaste.test"}}))
	}
	data := map[string]map[string]any{}
	for _, m := range e.do("GET", "/webhooks/"+hookID+"/events", e.keyA, nil).body["data"].([]any) {
		one := e.do("GET", "/webhooks/"+hookID+"/events/"+m.(map[string]any)["id"].(string), e.keyA, nil)
		require.Equal(t, 200, one.status, string(one.raw))
		d := one.body["payload"].(map[string]any)["data"].(map[string]any)
		data[d["email_id"].(string)] = d
	}
	require.Len(t, data, 3)
	require.Equal(t, tpl, data[ids[0]]["template_id"])
	require.Equal(t, []any{map[string]any{"name": "X-Campaign", "value": "spring"},
		map[string]any{"name": "X-Entity-Ref-ID", "value": "42"}}, data[ids[0]]["headers"])
	require.Equal(t, tpl, data[ids[1]]["template_id"])
	require.NotContains(t, data[ids[1]], "headers")
	require.NotContains(t, data[ids[2]], "template_id")
	require.NotContains(t, data[ids[2]], "headers")
}
