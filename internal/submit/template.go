package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/merge"
	"github.com/posthaste/posthaste/internal/store"
)

// TemplateSource finds a team's templates for sends, and the contact a
// template's reserved name variables come from.
type TemplateSource interface {
	// TemplateByRef returns the team's template with this id or alias,
	// store.ErrNotFound when there is none.
	TemplateByRef(ctx context.Context, teamID uuid.UUID, ref string) (store.Template, error)
	// Contact returns the team's contact, store.ErrNotFound when there is
	// none.
	Contact(ctx context.Context, teamID uuid.UUID, ref store.ContactRef) (store.Contact, error)
}

// applyTemplate returns r with its template rendered in: the published
// version's subject, html and text with the request's variables merged
// in, and its from and reply_to where the request has none (Resend: the
// payload's from, subject and reply_to take precedence over the
// template's). Rendering happens here, at acceptance, so that the stored
// email holds the rendered content and the workflow never renders. A
// request without a template is returned as it is. cache, when not nil,
// keeps templates already read by this request (a batch).
func (s *Service) applyTemplate(ctx context.Context, teamID uuid.UUID, r SendRequest,
	cache map[string]store.Template) (SendRequest, error) {
	tr := r.Template
	if tr == nil {
		return r, nil
	}
	// Empty strings count as absent: Resend's Go SDK always sends `from`
	// and `subject`.
	if (r.HTML != nil && *r.HTML != "") || (r.Text != nil && *r.Text != "") {
		return r, Errorf(KindValidation, "template",
			"Invalid `template` field. An email sent with a template cannot also have `html` or `text`.")
	}
	if tr.ID == "" {
		return r, Errorf(KindMissingField, "template.id", "Missing `template.id` field.")
	}
	tpl, ok := cache[tr.ID]
	if !ok {
		if s.templates == nil {
			return r, Errorf(KindValidation, "template", "Templates are not available on this server.")
		}
		var err error
		tpl, err = s.templates.TemplateByRef(ctx, teamID, tr.ID)
		if errors.Is(err, store.ErrNotFound) {
			return r, Errorf(KindValidation, "template.id", "Invalid `template.id` field. Template %q not found.",
				truncate(tr.ID, 100))
		}
		if err != nil {
			return r, fmt.Errorf("reading template: %w", err)
		}
		if cache != nil {
			cache[tr.ID] = tpl
		}
	}
	if tpl.Published == nil {
		return r, Errorf(KindValidation, "template.id",
			"Invalid `template.id` field. Template %q is a draft: publish it before sending with it.", truncate(tr.ID, 100))
	}
	r, err := s.withContactNames(ctx, teamID, r, *tpl.Published)
	if err != nil {
		return r, err
	}
	r.TemplateID = &tpl.ID
	return r.WithTemplate(*tpl.Published)
}

// withContactNames gives the reserved variables FIRST_NAME and LAST_NAME
// the names of the team's contact with the one `to` address, when the
// template uses them and the request does not give them. A contact
// without a name, or no contact, leaves them to the fallbacks: a missing
// name without fallback is then the usual 422 naming the variable.
func (s *Service) withContactNames(ctx context.Context, teamID uuid.UUID, r SendRequest,
	v store.TemplateContent) (SendRequest, error) {
	given := r.Template.Variables
	var want []string
	for _, name := range []string{merge.FirstName, merge.LastName} {
		if _, ok := given[name]; !ok && templateUses(v, name) {
			want = append(want, name)
		}
	}
	if len(want) == 0 || len(r.To) != 1 {
		return r, nil
	}
	to, err := address.Parse(r.To[0])
	if err != nil {
		return r, nil // the address is refused with its own error
	}
	ct, err := s.templates.Contact(ctx, teamID, store.ContactRef{Email: to.Addr()})
	if errors.Is(err, store.ErrNotFound) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("reading contact: %w", err)
	}
	vars := make(map[string]json.RawMessage, len(given)+len(want))
	for k, val := range given {
		vars[k] = val
	}
	for _, name := range want {
		val := ct.FirstName
		if name == merge.LastName {
			val = ct.LastName
		}
		if val == "" {
			continue
		}
		raw, err := json.Marshal(val)
		if err != nil {
			return r, fmt.Errorf("encoding contact name: %w", err)
		}
		vars[name] = raw
	}
	tr := *r.Template
	tr.Variables = vars
	r.Template = &tr
	return r, nil
}

// templateUses reports whether the subject, html or text of v refers to
// the variable name.
func templateUses(v store.TemplateContent, name string) bool {
	srcs := []string{v.HTML}
	if v.Subject != nil {
		srcs = append(srcs, *v.Subject)
	}
	if v.Text != nil {
		srcs = append(srcs, *v.Text)
	}
	for _, src := range srcs {
		t, err := merge.Parse(src)
		if err != nil {
			continue // reported when rendering
		}
		if slices.Contains(t.Names(), name) {
			return true
		}
	}
	return false
}

// WithTemplate returns r rendered with the template version v: v's
// subject, html and text with r.Template's variables merged in, and v's
// from and reply_to where r has none. When r has a topic_id, the reserved
// RESEND_UNSUBSCRIBE_URL and UNSUBSCRIBE_URL render as
// unsubscribePlaceholder, which each recipient's link replaces when its
// copy is built; without one they need a value or a fallback like any
// variable. It is pure; the rejections are
// *Error naming the field (a variable without value or fallback names
// that variable), and the result has no Template. r.Template must not be
// nil.
func (r SendRequest) WithTemplate(v store.TemplateContent) (SendRequest, error) {
	data, err := templateData(v, r.Template.Variables, r.To)
	if err != nil {
		return r, err
	}
	if r.TopicID != nil && *r.TopicID != "" {
		// Each recipient's unsubscribe link is only known when its copy is
		// built: the placeholder stays in the stored body until then.
		for _, name := range []string{merge.UnsubscribeURL, merge.UnsubscribeURLAlias} {
			if _, ok := data.Values[name]; !ok {
				data.Values[name] = unsubscribePlaceholder
			}
		}
	}
	out := r
	out.Template = nil
	if out.From == "" && v.From != nil {
		out.From = *v.From
	}
	if len(out.ReplyTo) == 0 && len(v.ReplyTo) > 0 {
		out.ReplyTo = append(AddressList(nil), v.ReplyTo...)
	}
	if (out.Subject == nil || *out.Subject == "") && v.Subject != nil {
		subject, err := render("subject", *v.Subject, data, merge.Text)
		if err != nil {
			return r, err
		}
		out.Subject = &subject
	}
	out.Text = nil
	html, err := render("html", v.HTML, data, merge.HTML)
	if err != nil {
		return r, err
	}
	out.HTML = &html
	if v.Text != nil {
		text, err := render("text", *v.Text, data, merge.Text)
		if err != nil {
			return r, err
		}
		out.Text = &text
	}
	return out, nil
}

// templateData gathers the values a template is rendered with: the
// request's variables, checked against the declared types (null counts
// as not given); the declared fallbacks; and EMAIL, the recipient when
// there is exactly one `to` address and the request does not give it.
func templateData(v store.TemplateContent, given map[string]json.RawMessage, to AddressList) (merge.Data, error) {
	d := merge.Data{Values: make(map[string]any, len(given)+1), Fallbacks: make(map[string]any, len(v.Variables)),
		MaxLen: MaxMessageSize}
	types := make(map[string]string, len(v.Variables))
	for _, decl := range v.Variables {
		types[decl.Key] = decl.Type
		if decl.Fallback != nil {
			if fb, err := merge.Decode(decl.Fallback); err == nil && fb != nil {
				d.Fallbacks[decl.Key] = fb
			}
		}
	}
	for k, raw := range given {
		val, err := merge.Decode(raw)
		if err != nil {
			return merge.Data{}, Errorf(KindValidation, "template.variables."+k,
				"Invalid `template.variables.%s` field. Expected a JSON value.", k)
		}
		if val == nil {
			continue
		}
		if want, got := types[k], merge.TypeOf(val); want != "" && got != want {
			return merge.Data{}, Errorf(KindValidation, "template.variables."+k,
				"Invalid `template.variables.%s` field. The template declares `%s` as %s, not %s.", k, k,
				article(want), article(got))
		}
		d.Values[k] = val
	}
	if _, ok := d.Values[merge.Email]; !ok && len(to) == 1 {
		if a, err := address.Parse(to[0]); err == nil {
			d.Values[merge.Email] = a.Addr()
		}
	}
	return d, nil
}

// article is a type name with its indefinite article: "a string", "an
// object".
func article(typ string) string {
	if typ == "object" {
		return "an object"
	}
	return "a " + typ
}

// unsubscribePlaceholder stands for each recipient's unsubscribe link in
// the stored body of an email sent with a topic (unsubscribe.Placeholder,
// which this package cannot import).
const unsubscribePlaceholder = "{{{" + merge.UnsubscribeURL + "}}}"

// render renders one field of a template; a variable without a value or
// fallback is a rejection naming it, and nothing is sent.
func render(field, src string, d merge.Data, mode merge.Mode) (string, error) {
	out, err := merge.RenderString(src, d, mode)
	if name, ok := merge.IsMissing(err); ok {
		return "", Errorf(KindValidation, "template.variables."+name,
			"Missing value for template variable `%s`, used in the template's %s: give it in `template.variables`"+
				" or declare a fallback.", name, field)
	}
	if errors.Is(err, merge.ErrTooLarge) {
		return "", Errorf(KindTooLarge, "template", "The email is too large: the template's %s rendered is over %d MB.",
			field, MaxMessageSize>>20)
	}
	if err != nil {
		return "", Errorf(KindValidation, "template", "The template's %s cannot be rendered: %s.", field, err)
	}
	return out, nil
}
