package submit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

func TestDecodeTemplate(t *testing.T) {
	r, err := DecodeSendRequest([]byte(`{"to":"a@b.test","template":{"id":"welcome","variables":{"A":"x","B":1.5,"C":-2}}}`))
	require.NoError(t, err)
	require.Equal(t, &TemplateRequest{ID: "welcome", Variables: map[string]json.RawMessage{
		"A": json.RawMessage(`"x"`), "B": json.RawMessage(`1.5`), "C": json.RawMessage(`-2`)}}, r.Template)

	// Values of every JSON type are taken; the template's declared types
	// check them when it renders.
	r, err = DecodeSendRequest([]byte(`{"template":{"id":"x","variables":{"A":true,"B":{"c":[1]},"C":[],"D":null}}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]json.RawMessage{"A": json.RawMessage(`true`), "B": json.RawMessage(`{"c":[1]}`),
		"C": json.RawMessage(`[]`), "D": json.RawMessage(`null`)}, r.Template.Variables)

	r, err = DecodeSendRequest([]byte(`{"template":null}`))
	require.NoError(t, err)
	require.Nil(t, r.Template)

	for body, field := range map[string]string{
		`{"template":"welcome"}`:                  "template",
		`{"template":{"id":5}}`:                   "template.id",
		`{"template":{"id":"x","variables":[1]}}`: "template.variables",
	} {
		_, err := DecodeSendRequest([]byte(body))
		var se *Error
		require.True(t, errors.As(err, &se), "%s: %v", body, err)
		require.Equal(t, field, se.Field, body)
	}
}

func TestSendRequestWithTemplateMarshalRoundTrip(t *testing.T) {
	in := SendRequest{From: "a@acme.com", To: AddressList{"b@x.com"},
		Template: &TemplateRequest{ID: "t", Variables: map[string]json.RawMessage{"A": json.RawMessage(`"x"`), "N": json.RawMessage(`3`)}}}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	out, err := DecodeSendRequest(data)
	require.NoError(t, err)
	require.Equal(t, in, out)
	// A request without a template encodes as it did before templates,
	// so idempotency keys stored earlier keep matching.
	data, err = json.Marshal(SendRequest{From: "a@acme.com"})
	require.NoError(t, err)
	require.NotContains(t, string(data), "template")
}

func content() store.TemplateContent {
	return store.TemplateContent{
		From:    ptr("Acme <onboarding@posthaste.test>"),
		Subject: ptr("Hi {{{NAME}}}"),
		ReplyTo: []string{"help@acme.test"},
		HTML:    `<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">{{{NAME}}}</a> {{{N}}} {{{EMAIL}}}`,
		Text:    ptr("{{{NAME}}} {{{N|none}}}"),
		Variables: []store.TemplateVariable{
			{Key: "NAME", Type: "string", Fallback: json.RawMessage(`"you"`)},
			{Key: "N", Type: "number"},
		},
	}
}

func TestWithTemplate(t *testing.T) {
	vars := func(kv ...string) *TemplateRequest {
		m := map[string]json.RawMessage{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = json.RawMessage(kv[i+1])
		}
		return &TemplateRequest{ID: "t", Variables: m}
	}
	r := SendRequest{To: AddressList{"Bob <bob@x.test>"},
		Template: vars("NAME", `"<b>\"Bob\"</b>"`, "N", "42", "UNSUBSCRIBE_URL", `"https://u.test/?a=1&b=2"`)}
	out, err := r.WithTemplate(content())
	require.NoError(t, err)
	require.Nil(t, out.Template)
	require.Equal(t, "Acme <onboarding@posthaste.test>", out.From)
	require.Equal(t, AddressList{"help@acme.test"}, out.ReplyTo)
	require.Equal(t, `Hi <b>"Bob"</b>`, *out.Subject)
	require.Equal(t, `<a href="https://u.test/?a=1&amp;b=2">&lt;b&gt;&#34;Bob&#34;&lt;/b&gt;</a> 42 bob@x.test`, *out.HTML)
	require.Equal(t, `<b>"Bob"</b> 42`, *out.Text)

	// The payload's from, subject and reply_to win.
	r = SendRequest{From: "me@x.test", Subject: ptr("Mine {{{NAME}}}"), ReplyTo: AddressList{"r@x.test"},
		To: AddressList{"a@x.test", "b@x.test"}, Template: vars("N", "1", "EMAIL", `"e@x.test"`, "RESEND_UNSUBSCRIBE_URL", `"u"`)}
	out, err = r.WithTemplate(content())
	require.NoError(t, err)
	require.Equal(t, "me@x.test", out.From)
	require.Equal(t, "Mine {{{NAME}}}", *out.Subject, "the payload's subject is not a template")
	require.Equal(t, AddressList{"r@x.test"}, out.ReplyTo)
	require.Equal(t, `<a href="u">you</a> 1 e@x.test`, *out.HTML)

	for name, tc := range map[string]struct {
		req   *TemplateRequest
		to    AddressList
		field string
	}{
		"missing without fallback":  {vars("RESEND_UNSUBSCRIBE_URL", `"u"`), AddressList{"a@x.test"}, "template.variables.N"},
		"missing reserved":          {vars("N", "1"), AddressList{"a@x.test"}, "template.variables.RESEND_UNSUBSCRIBE_URL"},
		"email with two recipients": {vars("N", "1", "UNSUBSCRIBE_URL", `"u"`), AddressList{"a@x.test", "b@x.test"}, "template.variables.EMAIL"},
		"number given a string":     {vars("N", `"1"`, "UNSUBSCRIBE_URL", `"u"`), AddressList{"a@x.test"}, "template.variables.N"},
	} {
		_, err := SendRequest{To: tc.to, Template: tc.req}.WithTemplate(content())
		var se *Error
		require.True(t, errors.As(err, &se), "%s: %v", name, err)
		require.Equal(t, tc.field, se.Field, name)
		require.Equal(t, KindValidation, se.Kind, name)
	}
}

// TestWithTemplateTypedVariables: boolean, object and list variables are
// checked against their declared types, with a 422 naming the variable,
// and render through blocks and paths.
func TestWithTemplateTypedVariables(t *testing.T) {
	c := store.TemplateContent{
		Subject: ptr("Order {{{ORDER.id}}}"),
		HTML: `{{#if VIP}}<b>VIP</b>{{else}}-{{/if}}<ul>{{#each ITEMS}}<li>{{name}} x{{{qty}}}</li>{{/each}}</ul>` +
			`{{{ORDER.ship.city}}} {{{N}}}`,
		Variables: []store.TemplateVariable{
			{Key: "VIP", Type: "boolean", Fallback: json.RawMessage(`false`)},
			{Key: "ITEMS", Type: "list", Fallback: json.RawMessage(`[]`)},
			{Key: "ORDER", Type: "object", Fallback: json.RawMessage(`{"id":"none","ship":{"city":"?"}}`)},
			{Key: "N", Type: "number", Fallback: json.RawMessage(`0`)},
		},
	}
	send := func(vars string) (SendRequest, error) {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(vars), &m))
		return SendRequest{To: AddressList{"a@x.test"}, Template: &TemplateRequest{ID: "t", Variables: m}}.WithTemplate(c)
	}
	out, err := send(`{"VIP":true,"ITEMS":[{"name":"Mug <1>","qty":2},{"name":"Tea","qty":1}],` +
		`"ORDER":{"id":"A-1","ship":{"city":"Oslo"}},"N":null}`)
	require.NoError(t, err)
	require.Equal(t, "Order A-1", *out.Subject)
	require.Equal(t, `<b>VIP</b><ul><li>Mug &lt;1&gt; x2</li><li>Tea x1</li></ul>Oslo 0`, *out.HTML)

	out, err = send(`{}`)
	require.NoError(t, err, "every variable has a fallback")
	require.Equal(t, "Order none", *out.Subject)
	require.Equal(t, `-<ul></ul>? 0`, *out.HTML)

	for vars, msg := range map[string]string{
		`{"VIP":"yes"}`:   "declares `VIP` as a boolean, not a string",
		`{"ITEMS":{}}`:    "declares `ITEMS` as a list, not an object",
		`{"ORDER":[1]}`:   "declares `ORDER` as an object, not a list",
		`{"N":true}`:      "declares `N` as a number, not a boolean",
		`{"ORDER":"A-1"}`: "declares `ORDER` as an object, not a string",
	} {
		_, err := send(vars)
		var se *Error
		require.True(t, errors.As(err, &se), "%s: %v", vars, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(vars), &m))
		for k := range m {
			require.Equal(t, "template.variables."+k, se.Field, vars)
		}
		require.Contains(t, se.Message, msg, vars)
		require.Equal(t, KindValidation, se.Kind, vars)
	}
}

// TestWithTemplateBoundsTheRenderedSize: a template that repeats a
// reference to a large value is refused before it is built in memory.
func TestWithTemplateBoundsTheRenderedSize(t *testing.T) {
	c := store.TemplateContent{HTML: strings.Repeat("{{{A}}}", 1000),
		Variables: []store.TemplateVariable{{Key: "A", Type: "string"}}}
	big, err := json.Marshal(strings.Repeat("x", 64<<10))
	require.NoError(t, err)
	_, err = SendRequest{To: AddressList{"a@x.test"},
		Template: &TemplateRequest{ID: "t", Variables: map[string]json.RawMessage{"A": big}}}.WithTemplate(c)
	var se *Error
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, KindTooLarge, se.Kind)
}

// templates is a TemplateSource holding templates by id and alias.
type templates map[string]store.Template

func (ts templates) TemplateByRef(_ context.Context, _ uuid.UUID, ref string) (store.Template, error) {
	t, ok := ts[ref]
	if !ok {
		return store.Template{}, store.ErrNotFound
	}
	return t, nil
}

func (ts templates) Contact(context.Context, uuid.UUID, store.ContactRef) (store.Contact, error) {
	return store.Contact{}, store.ErrNotFound
}

// withContacts is a TemplateSource whose team has contacts by address.
type withContacts struct {
	templates
	contacts map[string]store.Contact
}

func (w withContacts) Contact(_ context.Context, _ uuid.UUID, ref store.ContactRef) (store.Contact, error) {
	c, ok := w.contacts[store.NormalizeAddress(ref.Email)] // as the store compares
	if !ok {
		return store.Contact{}, store.ErrNotFound
	}
	return c, nil
}

// everyoneStore is a memberStore whose team has every address as member,
// so the sandbox sender may write to any of them.
type everyoneStore struct{ memberStore }

func (m *everyoneStore) TeamMembers(_ context.Context, _ uuid.UUID, emails []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, e := range emails {
		out[strings.ToLower(e)] = true
	}
	return out, nil
}

// TestTemplateNamesComeFromTheContact: FIRST_NAME and LAST_NAME are the
// names of the contact with the one `to` address; a variable given in
// the request wins; no contact, an unnamed contact or several recipients
// leave them to the fallbacks, and without a fallback the send is refused
// naming the variable.
func TestTemplateNamesComeFromTheContact(t *testing.T) {
	c := content()
	c.Subject = ptr("Hi {{{FIRST_NAME|there}}}")
	c.HTML = "<p>{{{FIRST_NAME|there}}} {{{LAST_NAME}}}</p>"
	c.Text = nil
	c.Variables = nil
	published := store.Template{ID: uuid.New(), Content: c, Published: &c}
	st := &everyoneStore{}
	s := New(Config{Store: st, Templates: withContacts{
		templates: templates{"pub": published},
		contacts: map[string]store.Contact{
			"ada@example.com":  {FirstName: "Ada", LastName: "<Lovelace>"},
			"anon@example.com": {LastName: "Nobody"},
		},
	}})
	send := func(to AddressList, vars map[string]json.RawMessage) (store.Email, error) {
		n := len(st.accepted)
		_, err := s.SendWithOptions(context.Background(), Sender{TeamID: uuid.New()},
			SendRequest{To: to, Template: &TemplateRequest{ID: "pub", Variables: vars}}, SendOptions{})
		if err != nil {
			return store.Email{}, err
		}
		require.Len(t, st.accepted, n+1)
		return st.accepted[n], nil
	}

	row, err := send(AddressList{"Ada <Ada@Example.com>"}, nil)
	require.NoError(t, err)
	require.Equal(t, "Hi Ada", row.Subject)
	require.Equal(t, "<p>Ada &lt;Lovelace&gt;</p>", *row.HTML)

	row, err = send(AddressList{"ada@example.com"}, map[string]json.RawMessage{"FIRST_NAME": json.RawMessage(`"Countess"`)})
	require.NoError(t, err)
	require.Equal(t, "<p>Countess &lt;Lovelace&gt;</p>", *row.HTML, "the request's value wins")

	row, err = send(AddressList{"anon@example.com"}, nil)
	require.NoError(t, err)
	require.Equal(t, "<p>there Nobody</p>", *row.HTML, "an unnamed contact leaves the fallback")

	for name, to := range map[string]AddressList{
		"no contact":         {"stranger@example.com"},
		"several recipients": {"ada@example.com", "anon@example.com"},
	} {
		_, err := send(to, nil)
		var se *Error
		require.True(t, errors.As(err, &se), "%s: %v", name, err)
		require.Equal(t, "template.variables.LAST_NAME", se.Field, name)
	}
}

// TestTemplateIsRenderedAtAcceptance: the accepted row holds the
// rendered subject, html and text, so the workflow that builds the
// message never renders; drafts, unknown templates, missing variables and
// html given with a template accept nothing.
func TestTemplateIsRenderedAtAcceptance(t *testing.T) {
	c := content()
	c.HTML = "<p>{{{NAME}}} {{{N}}}</p>"
	published := store.Template{ID: uuid.New(), Content: c, Published: &c}
	st := &memberStore{}
	s := New(Config{Store: st, Templates: templates{"pub": published, "draft": {ID: uuid.New(), Content: c}},
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	send := func(r SendRequest) error {
		_, err := s.SendWithOptions(context.Background(), Sender{TeamID: uuid.New()}, r, SendOptions{})
		return err
	}
	tpl := func(id string, kv ...string) *TemplateRequest {
		m := map[string]json.RawMessage{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = json.RawMessage(kv[i+1])
		}
		return &TemplateRequest{ID: id, Variables: m}
	}
	to := AddressList{"member@example.com"}

	require.NoError(t, send(SendRequest{To: to, Template: tpl("pub", "NAME", `"A&B"`, "N", "7")}))
	require.Len(t, st.accepted, 1)
	row := st.accepted[0]
	require.Equal(t, "Hi A&B", row.Subject)
	require.Equal(t, "<p>A&amp;B 7</p>", *row.HTML)
	require.Equal(t, "A&B 7", *row.Text)
	require.Equal(t, "Acme <onboarding@posthaste.test>", row.From)

	for name, r := range map[string]SendRequest{
		"draft":        {To: to, Template: tpl("draft", "N", "1")},
		"unknown":      {To: to, Template: tpl("nope", "N", "1")},
		"missing":      {To: to, Template: tpl("pub")},
		"html as well": {To: to, HTML: ptr("<p>x</p>"), Template: tpl("pub", "N", "1")},
		"no id":        {To: to, Template: tpl("", "N", "1")},
	} {
		err := send(r)
		var se *Error
		require.True(t, errors.As(err, &se), "%s: %v", name, err)
	}
	require.Len(t, st.accepted, 1, "nothing more was accepted")

	noTemplates := New(Config{Store: st})
	_, err := noTemplates.Send(context.Background(), Sender{TeamID: uuid.New()}, SendRequest{To: to, Template: tpl("pub", "N", "1")})
	var se *Error
	require.True(t, errors.As(err, &se), "%v", err)
}

// FuzzWithTemplate renders arbitrary template bodies and values: the
// result is a rejection naming a field, or a request that Validate
// accepts or rejects with an *Error; a value with markup never reaches
// the html unescaped.
func FuzzWithTemplate(f *testing.F) {
	f.Add("Hi {{{NAME}}}", "<p>{{{NAME}}} {{{N|0}}}</p>", "<b>x</b>", true)
	f.Add("{{{X}}}", "{{{", "v", false)
	f.Add("s\r\nBcc: x", "{{{NAME}}}", "\x00", true)
	f.Fuzz(func(t *testing.T, subject, html, value string, give bool) {
		c := store.TemplateContent{From: ptr("a@shop.test"), Subject: &subject, HTML: html,
			Variables: []store.TemplateVariable{{Key: "NAME", Type: "string"}}}
		raw, err := json.Marshal(value)
		require.NoError(t, err)
		tr := &TemplateRequest{ID: "t", Variables: map[string]json.RawMessage{}}
		if give {
			tr.Variables["NAME"] = raw
		}
		out, err := SendRequest{To: AddressList{"b@dest.test"}, Template: tr}.WithTemplate(c)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || !strings.HasPrefix(se.Field, "template") {
				t.Fatalf("WithTemplate: %v", err)
			}
			return
		}
		if out.Template != nil || out.HTML == nil {
			t.Fatalf("rendered request still has a template or no html: %+v", out)
		}
		if strings.Contains(value, "<") && strings.Count(*out.HTML, "<") > strings.Count(html, "<") {
			t.Fatalf("unescaped value in html: %q", *out.HTML)
		}
		if _, err := out.Validate(context.Background(), ValidateOptions{}); err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("Validate: %v", err)
			}
		}
	})
}
