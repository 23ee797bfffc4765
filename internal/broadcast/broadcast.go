// Package broadcast checks and applies the edits a team makes to its
// broadcasts (the one way the HTTP API and the dashboard's editor accept
// them), checks that a broadcast can be sent, and renders one contact's
// email of a broadcast; the checks and rendering are pure (callers pass
// the broadcast, the contact and the team's contact properties). Service
// is what the HTTP API and the dashboard do with broadcasts, and
// Activities are the Broadcast workflow's, which hand a broadcast's
// contacts to the send path.
//
// A broadcast's subject and bodies are merge templates (package merge).
// Each contact's email fills, besides Resend's reserved names FIRST_NAME,
// LAST_NAME and EMAIL, the spellings contact.first_name, contact.last_name
// and contact.email, and each of the team's contact properties both as
// its key and as contact.<key> (its fallback, if the property has one,
// when the contact has no value). The unsubscribe variables
// (RESEND_UNSUBSCRIBE_URL, UNSUBSCRIBE_URL) are left as
// unsubscribe.Placeholder for the send path, which builds each
// recipient's link.
package broadcast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/components"
	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/merge"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/unsubscribe"
)

// Limits of a broadcast.
const (
	MaxName        = 256
	MaxSubject     = 998 // RFC 5322 §2.1.1: a header line
	MaxPreviewText = 500
	MaxBody        = 4 << 20 // html or text
	MaxReplyTo     = 50
)

// Edit is a change to a broadcast. Nil fields are left as they are by an
// update. Components, when neither empty nor null, is a component
// document given instead of HTML and Text (the editor's way); HTML or
// Text given clear a stored document.
type Edit struct {
	Name, From, Subject, PreviewText, HTML, Text *string
	// SegmentID and TopicID: nil leaves them; a pointer to "" clears
	// them; otherwise a UUID.
	SegmentID, TopicID *string
	// ReplyTo nil leaves the addresses; empty removes them.
	ReplyTo    []string
	Components json.RawMessage
	// TemplateID, when not nil, names one of the team's published
	// templates (by id or alias) whose published version Service.Create
	// and Service.Update copy in: its subject when Subject is nil or
	// empty, and its body. Apply ignores it.
	TemplateID *string
	// Form says the edit is the dashboard editor's whole form: an empty
	// name is refused (the API accepts one).
	Form bool
}

// Apply writes e into b; create says whether b is new. Errors are
// *invalid.Error naming the field. On error b may be partly written:
// apply to a copy, or inside store.UpdateBroadcast, which discards it.
func (e Edit) Apply(b *store.Broadcast, create bool) error {
	if e.Name != nil {
		name := strings.TrimSpace(*e.Name)
		if len(name) > MaxName {
			return invalid.Errorf("name", "The `name` field may be at most %d characters.", MaxName)
		}
		b.Name = name
	}
	for _, ref := range []struct {
		field string
		in    *string
		out   **uuid.UUID
	}{{"segment_id", e.SegmentID, &b.SegmentID}, {"topic_id", e.TopicID, &b.TopicID}} {
		if ref.in == nil {
			continue
		}
		if *ref.in == "" {
			*ref.out = nil
			continue
		}
		id, err := uuid.Parse(*ref.in)
		if err != nil {
			return invalid.Errorf(ref.field, "Invalid `%s` field: %q is not an id.", ref.field, *ref.in)
		}
		*ref.out = &id
	}
	if create && b.SegmentID == nil {
		return invalid.Missing("segment_id")
	}
	if e.From != nil {
		from := strings.TrimSpace(*e.From)
		if from != "" {
			if _, err := address.Parse(from); err != nil {
				return invalid.Errorf("from", "Invalid `from` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.")
			}
		}
		b.From = from
	}
	if create && b.From == "" {
		return invalid.Missing("from")
	}
	if e.Subject != nil {
		if len(*e.Subject) > MaxSubject || strings.ContainsAny(*e.Subject, "\r\n") {
			return invalid.Errorf("subject", "The `subject` field must be one line of at most %d characters.", MaxSubject)
		}
		b.Subject = *e.Subject
	}
	if create && b.Subject == "" {
		return invalid.Missing("subject")
	}
	if e.ReplyTo != nil {
		if len(e.ReplyTo) > MaxReplyTo {
			return invalid.Errorf("reply_to", "The `reply_to` field may hold at most %d addresses.", MaxReplyTo)
		}
		for _, a := range e.ReplyTo {
			if _, err := address.Parse(a); err != nil {
				return invalid.Errorf("reply_to", "Invalid `reply_to` field: %q is not an email address.", a)
			}
		}
		b.ReplyTo = append([]string{}, e.ReplyTo...)
	}
	if e.PreviewText != nil {
		if len(*e.PreviewText) > MaxPreviewText {
			return invalid.Errorf("preview_text", "The `preview_text` field may be at most %d characters.", MaxPreviewText)
		}
		b.PreviewText = *e.PreviewText
	}
	if err := e.applyBody(b); err != nil {
		return err
	}
	return checkTemplates(*b)
}

// applyBody applies the body: a component document, rendered now, or html
// and text as given.
func (e Edit) applyBody(b *store.Broadcast) error {
	doc := bytes.TrimSpace(e.Components)
	if len(doc) > 0 && string(doc) != "null" {
		if (e.HTML != nil && *e.HTML != "") || (e.Text != nil && *e.Text != "") {
			return invalid.Errorf("components", "Give either `components` or `html` and `text`, not both.")
		}
		d, err := components.Parse(doc)
		if err != nil {
			return invalid.Errorf("components", "Invalid `components` field: %s.", err)
		}
		htmlPart, textPart, err := components.Render(d)
		if err != nil {
			return invalid.Errorf("components", "Invalid `components` field: %s.", err)
		}
		b.HTML, b.Text, b.Components = &htmlPart, &textPart, append(json.RawMessage(nil), doc...)
		return nil
	}
	if e.HTML != nil {
		b.HTML, b.Components = nonEmpty(*e.HTML), nil
	}
	if e.Text != nil {
		b.Text, b.Components = nonEmpty(*e.Text), nil
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"html", b.HTML}, {"text", b.Text}} {
		if f.v != nil && len(*f.v) > MaxBody {
			return invalid.Errorf(f.name, "The `%s` field may be at most %d MB.", f.name, MaxBody>>20)
		}
	}
	return nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// checkTemplates parses the subject and bodies as merge templates.
func checkTemplates(b store.Broadcast) error {
	for _, f := range fields(b) {
		if _, err := merge.Parse(*f.src); err != nil {
			return invalid.Errorf(f.name, "Invalid `%s` field: %s.", f.name, err)
		}
	}
	return nil
}

type field struct {
	name string
	src  *string
}

func fields(b store.Broadcast) []field {
	out := []field{{"subject", &b.Subject}}
	if b.HTML != nil {
		out = append(out, field{"html", b.HTML})
	}
	if b.Text != nil {
		out = append(out, field{"text", b.Text})
	}
	return out
}

// Property is one of the team's contact properties, as rendering needs it:
// Fallback is its fallback as text, nil when it has none.
type Property struct {
	Key      string
	Fallback *string
}

// CheckSendable reports why b cannot be sent, as an *invalid.Error: no
// segment, sender, subject or body, or a variable that no contact can
// fill (not a reserved name, a contact field or one of props, and without
// an inline fallback).
func CheckSendable(b store.Broadcast, props []Property) error {
	switch {
	case b.SegmentID == nil:
		return invalid.Errorf("segment_id", "The broadcast has no segment to send to. Set `segment_id`.")
	case b.From == "":
		return invalid.Missing("from")
	case b.Subject == "":
		return invalid.Missing("subject")
	case b.HTML == nil && b.Text == nil:
		return invalid.Errorf("html", "The broadcast has no content. Set `html` or `text`.")
	}
	known := map[string]bool{}
	for _, p := range props {
		known[p.Key], known["contact."+p.Key] = true, true
	}
	for _, f := range fields(b) {
		tpl, err := merge.Parse(*f.src)
		if err != nil {
			return invalid.Errorf(f.name, "Invalid `%s` field: %s.", f.name, err)
		}
		for _, n := range tpl.Names() {
			if merge.IsReserved(n) || contactField(n) != "" || known[n] || tpl.HasInlineFallback(n) {
				continue
			}
			return invalid.Errorf(f.name, "The variable %s in `%s` is neither a contact field nor a contact "+
				"property, and has no fallback. Write {{{%s|fallback}}} or add the property.", n, f.name, n)
		}
	}
	return nil
}

// contactField is the contact field that a variable name spells, "" for
// none.
func contactField(name string) string {
	switch name {
	case merge.FirstName, "contact.first_name":
		return "first_name"
	case merge.LastName, "contact.last_name":
		return "last_name"
	case merge.Email, "contact.email":
		return "email"
	}
	return ""
}

// MaxRendered bounds each rendered part of one contact's email.
const MaxRendered = 2 * MaxBody

// Values returns what a contact's email is rendered with: its fields and
// properties under every spelling, and the unsubscribe placeholder.
// Empty values are left out, so that fallbacks apply.
func Values(c store.BroadcastContact, props []Property) merge.Data {
	vals := map[string]any{
		merge.UnsubscribeURL: unsubscribe.Placeholder,
	}
	set := func(v string, names ...string) {
		if v == "" {
			return
		}
		for _, n := range names {
			vals[n] = v
		}
	}
	set(c.FirstName, merge.FirstName, "contact.first_name")
	set(c.LastName, merge.LastName, "contact.last_name")
	set(c.Email, merge.Email, "contact.email")
	fallbacks := map[string]any{}
	for _, p := range props {
		if v, ok := c.Properties[p.Key]; ok && v != nil {
			set(propertyText(v), p.Key, "contact."+p.Key)
		}
		if p.Fallback != nil {
			fallbacks[p.Key], fallbacks["contact."+p.Key] = *p.Fallback, *p.Fallback
		}
	}
	return merge.Data{Values: vals, Fallbacks: fallbacks, MaxLen: MaxRendered}
}

// propertyText is a property value as text: strings as they are, numbers
// without exponent or trailing zeros.
func propertyText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	}
	return fmt.Sprint(v)
}

// Render renders b for one contact: its subject, html (with the preview
// text as a hidden preheader, unless the component document carries its
// own) and text. An error names what could not be rendered, such as a
// variable without a value or fallback; it becomes the reason the
// contact's email failed. The subject is returned with the error when it
// rendered, so that the failed email shows it.
func Render(b store.Broadcast, c store.BroadcastContact, props []Property) (store.RenderedBroadcast, error) {
	d := Values(c, props)
	var out store.RenderedBroadcast
	var err error
	if out.Subject, err = render("subject", b.Subject, d, merge.Text); err != nil {
		return store.RenderedBroadcast{}, err
	}
	if b.HTML != nil {
		src := *b.HTML
		if b.PreviewText != "" && b.Components == nil {
			src = withPreheader(src, b.PreviewText)
		}
		h, err := render("html", src, d, merge.HTML)
		if err != nil {
			return store.RenderedBroadcast{Subject: out.Subject}, err
		}
		out.HTML = &h
	}
	if b.Text != nil {
		t, err := render("text", *b.Text, d, merge.Text)
		if err != nil {
			return store.RenderedBroadcast{Subject: out.Subject}, err
		}
		out.Text = &t
	}
	return out, nil
}

func render(field, src string, d merge.Data, mode merge.Mode) (string, error) {
	out, err := merge.RenderString(src, d, mode)
	if name, ok := merge.IsMissing(err); ok {
		return "", fmt.Errorf("the %s uses the variable %s, which this contact has no value for and which has no fallback", field, name)
	}
	if err != nil {
		return "", fmt.Errorf("rendering the %s: %w", field, err)
	}
	return out, nil
}

var bodyOpen = regexp.MustCompile(`(?i)<body[^>]*>`)

// withPreheader puts the preview text at the start of the body as a
// hidden preheader, the way inboxes expect it: after <body…> when the
// html has one, else first. The text is escaped, and merge placeholders
// in it are kept, so it is rendered like the rest.
func withPreheader(src, preview string) string {
	div := `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all" aria-hidden="true">` +
		escapeKeepingPlaceholders(preview) + `</div>`
	if loc := bodyOpen.FindStringIndex(src); loc != nil {
		return src[:loc[1]] + div + src[loc[1]:]
	}
	return div + src
}

// escapeKeepingPlaceholders escapes s for HTML text, leaving {{{…}}}
// placeholders intact (their values are escaped when rendered).
func escapeKeepingPlaceholders(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{{")
		if i < 0 {
			b.WriteString(html.EscapeString(s))
			return b.String()
		}
		j := strings.Index(s[i:], "}}}")
		if j < 0 {
			b.WriteString(html.EscapeString(s))
			return b.String()
		}
		b.WriteString(html.EscapeString(s[:i]))
		b.WriteString(s[i : i+j+3])
		s = s[i+j+3:]
	}
}
