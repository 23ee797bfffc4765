package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// idAfter is the id in a redirect to prefix+id (and maybe a query).
func idAfter(t *testing.T, res *http.Response, prefix string) uuid.UUID {
	t.Helper()
	loc := res.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, prefix), loc)
	rest, _, _ := strings.Cut(strings.TrimPrefix(loc, prefix), "?")
	id, err := uuid.Parse(rest)
	require.NoError(t, err, loc)
	return id
}

// eventTypes are the types of the messages queued for a webhook endpoint.
func (f *fixture) eventTypes(team, hook uuid.UUID) []string {
	f.t.Helper()
	msgs, _, err := f.store.Webhooks.ListWebhookMessages(context.Background(), team, hook, store.Page{Limit: 100})
	require.NoError(f.t, err)
	var types []string
	for _, m := range msgs {
		types = append(types, m.Type)
	}
	return types
}

func TestContactsPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	hook := f.addWebhook(c, "https://hooks.shop.test/in", "contact.created", "contact.updated", "contact.deleted",
		"contact.topics.updated")
	_, err := f.store.Audience.CreateContactProperty(ctx, store.ContactProperty{ID: uuid.New(), TeamID: teamA, Key: "plan", Type: store.PropertyString})
	require.NoError(t, err)
	_, err = f.store.Audience.CreateContactProperty(ctx, store.ContactProperty{ID: uuid.New(), TeamID: teamA, Key: "seats", Type: store.PropertyNumber})
	require.NoError(t, err)
	seg, err := f.store.Audience.CreateSegment(ctx, store.Segment{ID: uuid.New(), TeamID: teamA, Name: "Customers"})
	require.NoError(t, err)
	topic, err := f.store.Audience.CreateTopic(ctx, store.Topic{ID: uuid.New(), TeamID: teamA, Name: "Newsletter",
		DefaultSubscription: store.TopicOptIn, Visibility: "public"})
	require.NoError(t, err)

	res, page := get(t, c, f.srv.URL+"/dashboard/contacts")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "No contacts yet.")
	require.Contains(t, page, `href="/dashboard/contacts" aria-current="page"`)
	token := csrf(t, page)

	res, _ = post(t, c, f.srv.URL+"/dashboard/contacts", url.Values{"email": {"ann@shop.test"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the CSRF token is required")
	res, page = post(t, c, f.srv.URL+"/dashboard/contacts", url.Values{"csrf": {token}, "email": {"Ann <ann@shop.test>"}, "first_name": {"Ann"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>email</code> field must be an email address such as someone@example.com.")
	require.Contains(t, page, `value="Ann &lt;ann@shop.test&gt;"`, "the input is kept")
	require.Contains(t, page, `value="Ann"`)

	res, _ = post(t, c, f.srv.URL+"/dashboard/contacts", url.Values{"csrf": {token}, "email": {"Ann@Shop.test"}, "first_name": {"Ann"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	id := idAfter(t, res, "/dashboard/contacts/")
	res, page = post(t, c, f.srv.URL+"/dashboard/contacts", url.Values{"csrf": {token}, "email": {"ann@shop.test"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "A contact with email ann@shop.test already exists.")
	for i := range 3 {
		res, _ = post(t, c, f.srv.URL+"/dashboard/contacts", url.Values{"csrf": {token}, "email": {"other" + string(rune('a'+i)) + "@else.test"}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
	}

	// Search, server-side.
	_, page = get(t, c, f.srv.URL+"/dashboard/contacts?q=shop")
	require.Contains(t, page, "ann@shop.test")
	require.NotContains(t, page, "othera@else.test")
	_, page = get(t, c, f.srv.URL+"/dashboard/contacts?q=nobody")
	require.Contains(t, page, "No contact matches “nobody”.")

	// The contact's page: typed properties, segments and topics.
	_, page = get(t, c, f.srv.URL+"/dashboard/contacts/"+id.String()+"?done=added")
	require.Contains(t, page, "Contact added.")
	require.Contains(t, page, `name="prop.plan"`)
	require.Contains(t, page, `name="prop.seats" inputmode="decimal"`)
	require.Contains(t, page, `name="segment" value="`+seg.ID.String()+`"`)
	require.Contains(t, page, `name="topic.`+topic.ID.String()+`"`)
	edit := url.Values{"csrf": {token}, "email": {"ann@shop.test"}, "first_name": {"Ann"}, "last_name": {"Lee"},
		"prop.plan": {"pro"}, "prop.seats": {"many"}, "segment": {seg.ID.String()}, "topic." + topic.ID.String(): {"opt_out"}}
	res, page = post(t, c, f.srv.URL+"/dashboard/contacts/"+id.String(), edit)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The contact property <code>seats</code> must be a number.")
	require.Contains(t, page, `value="many"`, "the input is kept")
	got, err := f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &id})
	require.NoError(t, err)
	require.Empty(t, got.LastName, "nothing was written")
	require.Empty(t, got.SegmentIDs)

	edit.Set("prop.seats", "Inf")
	res, _ = post(t, c, f.srv.URL+"/dashboard/contacts/"+id.String(), edit)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, "JSON has no infinity")
	edit.Set("prop.seats", "12.5")
	res, _ = post(t, c, f.srv.URL+"/dashboard/contacts/"+id.String(), edit)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	got, err = f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &id})
	require.NoError(t, err)
	require.Equal(t, "Lee", got.LastName)
	require.Equal(t, map[string]any{"plan": "pro", "seats": 12.5}, got.Properties)
	require.Equal(t, []uuid.UUID{seg.ID}, got.SegmentIDs)
	require.False(t, got.Unsubscribed)
	topics, _, err := f.store.Audience.ContactTopics(ctx, teamA, id, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.TopicOptOut, topics[0].Subscription)
	_, page = get(t, c, f.srv.URL+"/dashboard/contacts/"+id.String())
	require.Contains(t, page, `value="12.5"`)
	require.Contains(t, page, `value="`+seg.ID.String()+`" checked`)
	require.Contains(t, page, `<option value="opt_out" selected>`)

	// An emptied property is removed; an unticked segment left.
	edit.Set("prop.plan", "")
	edit.Del("segment")
	res, _ = post(t, c, f.srv.URL+"/dashboard/contacts/"+id.String(), edit)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	got, err = f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &id})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"seats": 12.5}, got.Properties)
	require.Empty(t, got.SegmentIDs)

	// Unsubscribe from everything.
	res, _ = post(t, c, f.srv.URL+"/dashboard/contacts/"+id.String()+"/unsubscribe", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	got, err = f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &id})
	require.NoError(t, err)
	require.True(t, got.Unsubscribed)
	_, page = get(t, c, f.srv.URL+res.Header.Get("Location"))
	require.Contains(t, page, "Unsubscribed from everything:")
	require.Contains(t, page, `class="badge bad">unsubscribed<`)

	// Delete, after a confirmation page.
	_, page = get(t, c, f.srv.URL+"/dashboard/contacts/"+id.String()+"/delete")
	require.Contains(t, page, "Delete ann@shop.test?")
	res, _ = post(t, c, f.srv.URL+"/dashboard/contacts/"+id.String()+"/delete", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, err = f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &id})
	require.ErrorIs(t, err, store.ErrNotFound)

	// The changes went out as the API's webhook events.
	types := f.eventTypes(teamA, hook)
	for _, want := range []string{"contact.created", "contact.updated", "contact.topics.updated", "contact.deleted"} {
		require.Contains(t, types, want)
	}
}

func TestContactsPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	for i := range 55 {
		_, err := f.store.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: teamA,
			Email: "p" + strings.Repeat("x", i) + "@shop.test"}, nil, nil)
		require.NoError(t, err)
	}
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/contacts")
	require.Equal(t, 50, strings.Count(page, `<td data-label="Email">`))
	require.NotContains(t, page, "← Newer")
	older := pagerLink(t, page, "Older →")
	_, page = get(t, c, f.srv.URL+older)
	require.Equal(t, 5, strings.Count(page, `<td data-label="Email">`))
	require.Contains(t, page, "← Newer")
	require.NotContains(t, page, "Older →")
}

// pagerLink is the href of the pager link labelled label.
func pagerLink(t *testing.T, page, label string) string {
	t.Helper()
	i := strings.Index(page, `">`+label+`</a>`)
	require.Positive(t, i, label)
	j := strings.LastIndex(page[:i], `href="`)
	return strings.ReplaceAll(page[j+len(`href="`):i], "&amp;", "&")
}

func TestSegmentsAndTopicsPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	hook := f.addWebhook(c, "https://hooks.shop.test/in", "topic.created", "topic.updated", "topic.deleted")

	_, page := get(t, c, f.srv.URL+"/dashboard/segments")
	require.Contains(t, page, "No segments yet.")
	token := csrf(t, page)
	res, page := post(t, c, f.srv.URL+"/dashboard/segments", url.Values{"csrf": {token}, "name": {"  "}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Missing <code>name</code> field.")
	res, _ = post(t, c, f.srv.URL+"/dashboard/segments", url.Values{"csrf": {token}, "name": {" VIP "}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	seg := idAfter(t, res, "/dashboard/segments/")
	member, err := f.store.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Email: "vip@shop.test"},
		[]uuid.UUID{seg}, nil)
	require.NoError(t, err)
	_, err = f.store.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Email: "plain@shop.test"}, nil, nil)
	require.NoError(t, err)
	_, page = get(t, c, f.srv.URL+"/dashboard/segments")
	require.Contains(t, page, `>VIP</a>`)
	_, page = get(t, c, f.srv.URL+"/dashboard/segments/"+seg.String())
	require.Contains(t, page, `href="/dashboard/contacts/`+member.ID.String()+`"`)
	require.NotContains(t, page, "plain@shop.test")
	_, page = get(t, c, f.srv.URL+"/dashboard/segments/"+seg.String()+"/delete")
	require.Contains(t, page, "Delete VIP?")
	res, _ = post(t, c, f.srv.URL+"/dashboard/segments/"+seg.String()+"/delete", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, err = f.store.Audience.Segment(ctx, teamA, seg)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &member.ID})
	require.NoError(t, err, "the segment's contacts stay")

	// Topics.
	_, page = get(t, c, f.srv.URL+"/dashboard/topics")
	require.Contains(t, page, "No topics yet.")
	res, page = post(t, c, f.srv.URL+"/dashboard/topics", url.Values{"csrf": {token}, "name": {"News"},
		"default_subscription": {"maybe"}, "visibility": {"public"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>default_subscription</code> field must be <code>opt_in</code> or <code>opt_out</code>.")
	require.Contains(t, page, `value="News"`)
	res, _ = post(t, c, f.srv.URL+"/dashboard/topics", url.Values{"csrf": {token}, "name": {"News"}, "description": {"Monthly"},
		"default_subscription": {"opt_out"}, "visibility": {"public"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	tid := idAfter(t, res, "/dashboard/topics/")
	tp, err := f.store.Audience.Topic(ctx, teamA, tid)
	require.NoError(t, err)
	require.Equal(t, store.Topic{ID: tid, TeamID: teamA, Name: "News", Description: "Monthly", DefaultSubscription: "opt_out",
		Visibility: "public", CreatedAt: tp.CreatedAt, UpdatedAt: tp.UpdatedAt}, tp)
	_, page = get(t, c, f.srv.URL+"/dashboard/topics/"+tid.String())
	require.Contains(t, page, `<option value="public" selected>`)
	res, page = post(t, c, f.srv.URL+"/dashboard/topics/"+tid.String(), url.Values{"csrf": {token}, "name": {strings.Repeat("n", 51)},
		"description": {""}, "visibility": {"private"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The <code>name</code> field must be 1 to 50 characters.")
	res, _ = post(t, c, f.srv.URL+"/dashboard/topics/"+tid.String(), url.Values{"csrf": {token}, "name": {"Newsletter"},
		"description": {""}, "visibility": {"private"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	tp, err = f.store.Audience.Topic(ctx, teamA, tid)
	require.NoError(t, err)
	require.Equal(t, []string{"Newsletter", "", "private", "opt_out"}, []string{tp.Name, tp.Description, tp.Visibility, tp.DefaultSubscription})
	_, page = get(t, c, f.srv.URL+"/dashboard/topics/"+tid.String()+"/delete")
	require.Contains(t, page, "Delete Newsletter?")
	res, _ = post(t, c, f.srv.URL+"/dashboard/topics/"+tid.String()+"/delete", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, err = f.store.Audience.Topic(ctx, teamA, tid)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ElementsMatch(t, []string{"topic.created", "topic.updated", "topic.deleted"}, f.eventTypes(teamA, hook))
}

// renderJSON posts the editor's form to the render endpoint.
func renderJSON(t *testing.T, c *http.Client, u string, form url.Values) map[string]string {
	t.Helper()
	res, body := post(t, c, u, form)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &raw), body)
	out := map[string]string{}
	for k, v := range raw {
		out[k] = fmt.Sprint(v)
	}
	return out
}

func TestTemplateEditor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)

	_, page := get(t, c, f.srv.URL+"/dashboard/templates")
	require.Contains(t, page, "No templates yet.")
	token := csrf(t, page)
	res, _ := post(t, c, f.srv.URL+"/dashboard/templates", url.Values{"csrf": {token}, "name": {"Welcome"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	id := idAfter(t, res, "/dashboard/templates/")
	base := f.srv.URL + "/dashboard/templates/" + id.String()
	_, page = get(t, c, base)
	require.Contains(t, page, `class="badge neutral">draft<`)
	require.Contains(t, page, `name="sample.FIRST_NAME"`, "a sample field for the variable the starter body uses")
	require.Contains(t, page, `sandbox=""`)
	require.Contains(t, page, `<script src="/dashboard/assets/template-editor.js"></script>`)

	form := url.Values{"csrf": {token}, "name": {"Welcome"}, "alias": {"welcome"}, "from": {"Acme <hi@shop.test>"},
		"subject": {"Hi {{{NAME}}}"}, "reply_to": {"help@shop.test, sales@shop.test"}, "format": {"html"},
		"html": {"<p>Hello {{{NAME}}}, you have {{{POINTS}}} points</p>"}, "text": {""},
		"var_key": {"NAME", "POINTS", ""}, "var_type": {"string", "number", "string"}, "var_fallback": {"", "0", ""}}

	// The preview: a missing value is named, values are escaped in HTML.
	out := renderJSON(t, c, base+"/render", form)
	require.Contains(t, out["error"], "Missing value for template variable `NAME`, used in the template's subject")
	require.Equal(t, "sample.NAME", out["field"])
	form.Set("sample.NAME", `<b>Ann</b> & co`)
	out = renderJSON(t, c, base+"/render", form)
	require.Empty(t, out["error"])
	require.Equal(t, "Hi <b>Ann</b> & co", out["subject"], "subjects are text")
	require.Equal(t, "Hello <b>Ann</b> & co, you have 0 points", out["text"], "made from the HTML, as a send does")
	require.Equal(t, "true", out["text_generated"])
	res, frame := post(t, c, base+"/preview", form)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "<p>Hello &lt;b&gt;Ann&lt;/b&gt; &amp; co, you have 0 points</p>", frame)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "sandbox; default-src 'none'")
	require.Empty(t, res.Header.Get("X-Frame-Options"), "the editor frames it")
	form.Set("sample.POINTS", "lots")
	out = renderJSON(t, c, base+"/render", form)
	require.Contains(t, out["error"], "declares `POINTS` as a number, not a string")
	// A sample of a list, object or boolean variable is read as JSON and
	// renders through blocks.
	listForm := url.Values{}
	for k, v := range form {
		listForm[k] = v
	}
	listForm.Set("html", "<p>{{#if VIP}}VIP {{/if}}{{#each ITEMS}}[{{name}}]{{/each}} {{{POINTS}}}</p>")
	listForm["var_key"] = []string{"NAME", "POINTS", "VIP", "ITEMS"}
	listForm["var_type"] = []string{"string", "number", "boolean", "list"}
	listForm["var_fallback"] = []string{"", "0", "false", "[]"}
	listForm.Set("sample.POINTS", "3")
	listForm.Set("sample.VIP", "true")
	listForm.Set("sample.ITEMS", `[{"name":"a<b"},{"name":"c"}]`)
	_, frame = post(t, c, base+"/preview", listForm)
	require.Equal(t, "<p>VIP [a&lt;b][c] 3</p>", frame)
	form.Set("sample.POINTS", "7")
	_, frame = post(t, c, base+"/preview", form)
	require.Contains(t, frame, "you have 7 points")
	bad := cloneForm(form)
	bad.Set("html", "<p>{{{UNDECLARED}}}</p>")
	out = renderJSON(t, c, base+"/render", bad)
	require.Equal(t, "Variable 'UNDECLARED' is used in the template's html but not defined in the variables list.", out["error"])
	_, frame = post(t, c, base+"/preview", bad)
	require.Contains(t, frame, "Variable &#39;UNDECLARED&#39; is used")
	got, err := f.store.Templates.TemplateByRef(ctx, teamA, id.String())
	require.NoError(t, err)
	require.Equal(t, "Welcome", got.Name)
	require.NotContains(t, got.Content.HTML, "POINTS", "previews save nothing")

	// Saving an invalid draft keeps the input and writes nothing.
	res, page = post(t, c, base, bad)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Variable &#39;UNDECLARED&#39; is used in the template&#39;s html")
	require.Contains(t, page, "&lt;p&gt;{{{UNDECLARED}}}&lt;/p&gt;</textarea>")

	// Save the draft, then publish.
	res, _ = post(t, c, base, form)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	got, err = f.store.Templates.TemplateByRef(ctx, teamA, "welcome")
	require.NoError(t, err)
	require.Equal(t, "<p>Hello {{{NAME}}}, you have {{{POINTS}}} points</p>", got.Content.HTML)
	require.Nil(t, got.Content.Text)
	require.Equal(t, []string{"help@shop.test", "sales@shop.test"}, got.Content.ReplyTo)
	require.Equal(t, []store.TemplateVariable{{Key: "NAME", Type: "string"}, {Key: "POINTS", Type: "number", Fallback: json.RawMessage("0")}},
		got.Content.Variables)
	require.Equal(t, store.TemplateDraft, got.Status())
	_, page = get(t, c, base+"?done=saved")
	require.Contains(t, page, "Draft saved.")
	require.Contains(t, page, `value="POINTS"`)
	form.Set("action", "publish")
	res, _ = post(t, c, base, form)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/dashboard/templates/"+id.String()+"?done=published", res.Header.Get("Location"))
	got, err = f.store.Templates.TemplateByRef(ctx, teamA, id.String())
	require.NoError(t, err)
	require.Equal(t, store.TemplatePublished, got.Status())
	_, page = get(t, c, f.srv.URL+"/dashboard/templates")
	require.Contains(t, page, `class="badge ok">published<`)

	// A components document instead of HTML.
	comp := cloneForm(form)
	comp.Del("action")
	comp.Set("format", "components")
	comp.Set("components", `{"blocks": [{"type": "heading", "level": 1, "text": "Hi {{{NAME}}}"}]}`)
	out = renderJSON(t, c, base+"/render", comp)
	require.Empty(t, out["error"])
	require.Contains(t, out["text"], "Hi <b>Ann</b> & co")
	require.Empty(t, out["text_generated"], "a document has its own text part")
	comp.Set("components", `{"blocks": [{"type": "heading"}]}`)
	out = renderJSON(t, c, base+"/render", comp)
	require.Contains(t, out["error"], "Invalid `components` field")
	require.Equal(t, "components", out["field"])

	// Duplicate, then delete the copy.
	res, _ = post(t, c, base+"/duplicate", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	dup := idAfter(t, res, "/dashboard/templates/")
	require.NotEqual(t, id, dup)
	_, page = get(t, c, f.srv.URL+"/dashboard/templates/"+dup.String()+"/delete")
	require.Contains(t, page, "Delete ")
	res, _ = post(t, c, f.srv.URL+"/dashboard/templates/"+dup.String()+"/delete", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, err = f.store.Templates.TemplateByRef(ctx, teamA, dup.String())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.store.Templates.TemplateByRef(ctx, teamA, id.String())
	require.NoError(t, err, "the original stays")
}

func cloneForm(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// TestAudiencePagesAreTeamIsolated checks that team B can neither see nor
// change team A's contacts, segments, topics and templates by id, and that
// every write needs the CSRF token.
func TestAudiencePagesAreTeamIsolated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	ct, err := f.store.Audience.CreateContact(ctx, store.Contact{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Email: "a@shop.test", FirstName: "Ann"}, nil, nil)
	require.NoError(t, err)
	seg, err := f.store.Audience.CreateSegment(ctx, store.Segment{ID: uuid.New(), TeamID: teamA, Name: "A's"})
	require.NoError(t, err)
	tp, err := f.store.Audience.CreateTopic(ctx, store.Topic{ID: uuid.New(), TeamID: teamA, Name: "A news", DefaultSubscription: "opt_in", Visibility: "private"})
	require.NoError(t, err)
	tpl, err := f.store.Templates.CreateTemplate(ctx, store.Template{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, Name: "A template",
		Content: store.TemplateContent{HTML: "<p>A</p>", Variables: []store.TemplateVariable{}}})
	require.NoError(t, err)

	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	for _, list := range []string{"contacts", "segments", "topics", "templates"} {
		res, page := get(t, cb, f.srv.URL+"/dashboard/"+list)
		require.Equal(t, http.StatusOK, res.StatusCode)
		for _, name := range []string{"a@shop.test", "A&#39;s", "A news", "A template"} {
			require.NotContains(t, page, name, list)
		}
	}
	_, page := get(t, cb, f.srv.URL+"/dashboard/contacts")
	token := csrf(t, page)
	gets := []string{"/dashboard/contacts/" + ct.ID.String(), "/dashboard/contacts/" + ct.ID.String() + "/delete",
		"/dashboard/segments/" + seg.ID.String(), "/dashboard/segments/" + seg.ID.String() + "/delete",
		"/dashboard/topics/" + tp.ID.String(), "/dashboard/topics/" + tp.ID.String() + "/delete",
		"/dashboard/templates/" + tpl.ID.String(), "/dashboard/templates/" + tpl.ID.String() + "/delete",
		"/dashboard/templates/" + tpl.ID.String() + "/preview", "/dashboard/contacts/not-an-id"}
	for _, p := range gets {
		res, _ := get(t, cb, f.srv.URL+p)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
	}
	form := url.Values{"csrf": {token}, "email": {"b@shop.test"}, "first_name": {"Bob"}, "name": {"Taken"}, "visibility": {"public"},
		"html": {"<p>B</p>"}, "format": {"html"}}
	posts := []string{"/dashboard/contacts/" + ct.ID.String(), "/dashboard/contacts/" + ct.ID.String() + "/unsubscribe",
		"/dashboard/contacts/" + ct.ID.String() + "/delete", "/dashboard/segments/" + seg.ID.String() + "/delete",
		"/dashboard/topics/" + tp.ID.String(), "/dashboard/topics/" + tp.ID.String() + "/delete",
		"/dashboard/templates/" + tpl.ID.String(), "/dashboard/templates/" + tpl.ID.String() + "/duplicate",
		"/dashboard/templates/" + tpl.ID.String() + "/render", "/dashboard/templates/" + tpl.ID.String() + "/preview",
		"/dashboard/templates/" + tpl.ID.String() + "/delete"}
	for _, p := range posts {
		res, _ := post(t, cb, f.srv.URL+p, form)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
	}
	got, err := f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &ct.ID})
	require.NoError(t, err)
	require.Equal(t, "Ann", got.FirstName)
	require.False(t, got.Unsubscribed)
	_, err = f.store.Audience.Segment(ctx, teamA, seg.ID)
	require.NoError(t, err)
	gotTopic, err := f.store.Audience.Topic(ctx, teamA, tp.ID)
	require.NoError(t, err)
	require.Equal(t, "A news", gotTopic.Name)
	gotTpl, err := f.store.Templates.TemplateByRef(ctx, teamA, tpl.ID.String())
	require.NoError(t, err)
	require.Equal(t, "A template", gotTpl.Name)
	list, _, err := f.store.Templates.ListTemplates(ctx, uuid.MustParse(f.b.TeamID), store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list, "no duplicate landed in team B")

	// Team A itself needs the CSRF token for every write.
	ca := f.browser()
	f.login(ca, f.a.Email, f.a.Password)
	posts = append(posts, "/dashboard/contacts", "/dashboard/segments", "/dashboard/topics", "/dashboard/templates")
	form.Del("csrf")
	for _, p := range posts {
		res, _ := post(t, ca, f.srv.URL+p, form)
		require.Equal(t, http.StatusForbidden, res.StatusCode, p)
	}
	got, err = f.store.Audience.Contact(ctx, teamA, store.ContactRef{ID: &ct.ID})
	require.NoError(t, err)
	require.Equal(t, "Ann", got.FirstName)
}

// upload posts the import form as a browser does: csrf, on_conflict and
// segment before the file.
func upload(t *testing.T, c *http.Client, u string, fields [][2]string, csv string) (*http.Response, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range fields {
		require.NoError(t, mw.WriteField(f[0], f[1]))
	}
	if csv != "" {
		fw, err := mw.CreateFormFile("file", "contacts.csv")
		require.NoError(t, err)
		_, err = fw.Write([]byte(csv))
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	res, err := c.Post(u, mw.FormDataContentType(), &body)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(b)
}

func TestContactImportPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	seg, err := f.store.Audience.CreateSegment(ctx, store.Segment{ID: uuid.New(), TeamID: teamA, Name: "Imported"})
	require.NoError(t, err)
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/contacts")
	require.Contains(t, page, `href="/dashboard/contact-imports"`)
	_, page = get(t, c, f.srv.URL+"/dashboard/contact-imports")
	require.Contains(t, page, "No imports yet.")
	require.Contains(t, page, `enctype="multipart/form-data"`)
	token := csrf(t, page)
	u := f.srv.URL + "/dashboard/contact-imports"
	csv := "email,first_name\nann@shop.test,Ann\nnot-an-address,Bob\ncy@shop.test,Cy\n"

	res, _ := upload(t, c, u, [][2]string{{"on_conflict", "skip"}}, csv)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the CSRF token is required")
	res, page = upload(t, c, u, [][2]string{{"csrf", token}, {"on_conflict", "skip"}}, "")
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "Choose a CSV file to import.")
	res, page = upload(t, c, u, [][2]string{{"csrf", token}, {"on_conflict", "upsert"}}, "name\nAnn\n")
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "The CSV header has no <code>email</code> column", "the importer's reason")
	require.Contains(t, page, `<option value="upsert" selected>`, "the choices are kept")
	list, _, err := f.store.Audience.ListContactImports(ctx, teamA, "", store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list, "a refused upload leaves nothing")

	res, _ = upload(t, c, u, [][2]string{{"csrf", token}, {"on_conflict", "skip"}, {"segment", seg.ID.String()}}, csv)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	id := idAfter(t, res, "/dashboard/contact-imports/")
	_, page = get(t, c, f.srv.URL+"/dashboard/contact-imports/"+id.String())
	require.Contains(t, page, `id="import-status">queued<`)
	require.Contains(t, page, `data-poll="/dashboard/contact-imports/`+id.String()+`/progress"`)
	require.Contains(t, page, `<dd id="count-total">3</dd>`)
	res, body := get(t, c, f.srv.URL+"/dashboard/contact-imports/"+id.String()+"/progress")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, map[string]any{"status": "queued", "final": false, "percent": 0.0, "total": 3.0, "processed": 0.0,
		"created": 0.0, "updated": 0.0, "skipped": 0.0, "failed": 0.0}, p)

	// The import's workflow applies the chunks; the page follows.
	imp, err := f.store.Audience.StartContactImport(ctx, id)
	require.NoError(t, err)
	for seq := range imp.Chunks {
		_, err := f.store.Audience.ApplyImportChunk(ctx, id, seq)
		require.NoError(t, err)
	}
	_, err = f.store.Audience.FinishContactImport(ctx, id, "")
	require.NoError(t, err)
	_, body = get(t, c, f.srv.URL+"/dashboard/contact-imports/"+id.String()+"/progress")
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, true, p["final"])
	require.Equal(t, 100.0, p["percent"])
	_, page = get(t, c, f.srv.URL+"/dashboard/contact-imports/"+id.String())
	require.Contains(t, page, `id="import-status">completed<`)
	require.NotContains(t, page, "data-poll=")
	require.Contains(t, page, `<dd id="count-created">2</dd>`)
	require.Contains(t, page, `<dd id="count-failed">1</dd>`)
	require.Contains(t, page, `<td data-label="Row">3</td>`, "the failed row, numbered as in the file")
	require.Contains(t, page, "not-an-address")
	_, page = get(t, c, f.srv.URL+"/dashboard/segments/"+seg.ID.String())
	require.Contains(t, page, "ann@shop.test")
	require.Contains(t, page, "cy@shop.test")

	// Team B cannot see it.
	cb := f.browser()
	f.login(cb, f.b.Email, f.b.Password)
	for _, p := range []string{"", "/progress"} {
		res, _ := get(t, cb, f.srv.URL+"/dashboard/contact-imports/"+id.String()+p)
		require.Equal(t, http.StatusNotFound, res.StatusCode)
	}
	_, page = get(t, cb, f.srv.URL+"/dashboard/contact-imports")
	require.Contains(t, page, "No imports yet.")
}

// TestEmailsPagination: the Emails page's pager links keep the filters
// and reach the next page (html/template once escaped their `=`, which
// made every Older link show the first page again).
func TestEmailsPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	teamA := uuid.MustParse(f.a.TeamID)
	for i := range 55 {
		rcpt := fmt.Sprintf("r%d@posthaste.test", i)
		e := store.Email{ID: uuid.Must(uuid.NewV7()), TeamID: teamA, From: "onboarding@posthaste.test",
			FromDomain: "posthaste.test", To: []string{rcpt}, Subject: fmt.Sprintf("Letter %d", i),
			LastEvent: store.EventQueued, CreatedAt: time.Now(),
			Recipients: []store.Recipient{{Address: rcpt, Kind: "to", Domain: "posthaste.test", Status: "queued"}}}
		_, err := storetest.InsertEmail(ctx, f.store, e)
		require.NoError(t, err)
	}
	c := f.browser()
	f.login(c, f.a.Email, f.a.Password)
	_, page := get(t, c, f.srv.URL+"/dashboard/emails?domain=posthaste.test")
	require.Contains(t, page, "Letter 54")
	require.NotContains(t, page, "Letter 4<")
	older := pagerLink(t, page, "Older →")
	require.Contains(t, older, "domain=posthaste.test", "the filter is kept")
	_, page = get(t, c, f.srv.URL+older)
	require.Contains(t, page, "Letter 4<")
	require.NotContains(t, page, "Letter 54")
	newer := pagerLink(t, page, "← Newer")
	_, page = get(t, c, f.srv.URL+newer)
	require.Contains(t, page, "Letter 54")
}
