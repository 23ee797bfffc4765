package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/merge"
	"github.com/posthaste/posthaste/internal/store"
)

// TemplateSource finds a team's templates for sends.
type TemplateSource interface {
	// TemplateByRef returns the team's template with this id or alias,
	// store.ErrNotFound when there is none.
	TemplateByRef(ctx context.Context, teamID uuid.UUID, ref string) (store.Template, error)
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
	return r.WithTemplate(*tpl.Published)
}

// WithTemplate returns r rendered with the template version v: v's
// subject, html and text with r.Template's variables merged in, and v's
// from and reply_to where r has none. It is pure; the rejections are
// *Error naming the field (a variable without value or fallback names
// that variable), and the result has no Template. r.Template must not be
// nil.
func (r SendRequest) WithTemplate(v store.TemplateContent) (SendRequest, error) {
	data, err := templateData(v, r.Template.Variables, r.To)
	if err != nil {
		return r, err
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
// request's variables, checked against the declared types; the declared
// fallbacks; and EMAIL, the recipient when there is exactly one `to`
// address and the request does not give it.
func templateData(v store.TemplateContent, given map[string]json.RawMessage, to AddressList) (merge.Data, error) {
	d := merge.Data{Values: make(map[string]string, len(given)+1), Fallbacks: make(map[string]string, len(v.Variables)),
		MaxLen: MaxMessageSize}
	types := make(map[string]string, len(v.Variables))
	for _, decl := range v.Variables {
		types[decl.Key] = decl.Type
		if decl.Fallback != nil {
			if s, ok := jsonScalar(decl.Fallback); ok {
				d.Fallbacks[decl.Key] = s
			}
		}
	}
	for k, raw := range given {
		s, ok := jsonScalar(raw)
		isNumber := ok && firstByte(raw) != '"'
		if !ok || (types[k] == "number" && !isNumber) {
			want := "a string or a number"
			if types[k] == "number" {
				want = "a number"
			}
			return merge.Data{}, Errorf(KindValidation, "template.variables."+k,
				"Invalid `template.variables.%s` field. Expected %s.", k, want)
		}
		d.Values[k] = s
	}
	if _, ok := d.Values[merge.Email]; !ok && len(to) == 1 {
		if a, err := ParseAddress(to[0]); err == nil {
			d.Values[merge.Email] = a.Addr()
		}
	}
	return d, nil
}

// jsonScalar returns a JSON string's content or a number's text.
func jsonScalar(raw json.RawMessage) (string, bool) {
	var n json.Number
	if firstByte(raw) != '"' {
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", false
		}
		return n.String(), true
	}
	s, err := unquote(raw)
	return s, err == nil
}

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
