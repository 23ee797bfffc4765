package dashboard

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/invalid"
	"github.com/posthaste/posthaste/internal/merge"
	"github.com/posthaste/posthaste/internal/mime"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/templates"
)

// templatesHandler serves the pages of email templates through
// templates.Service, the API's.
type templatesHandler struct {
	*Handler
	svc *templates.Service
}

// routes adds the pages of email templates. Every write goes
// through signedIn (session and CSRF token) and templates.Service.
func (h *templatesHandler) routes(m *http.ServeMux) {
	m.Handle("GET /dashboard/templates", h.signedIn(h.templates))
	m.Handle("POST /dashboard/templates", h.signedIn(h.addTemplate))
	m.Handle("GET /dashboard/templates/{id}", h.signedIn(h.emailTemplate))
	m.Handle("POST /dashboard/templates/{id}", h.signedIn(h.saveTemplate))
	m.Handle("POST /dashboard/templates/{id}/duplicate", h.signedIn(h.duplicateTemplate))
	m.Handle("POST /dashboard/templates/{id}/render", h.signedIn(h.previewTemplateJSON))
	m.Handle("GET /dashboard/templates/{id}/preview", h.signedIn(h.previewTemplateFrame))
	m.Handle("POST /dashboard/templates/{id}/preview", h.signedIn(h.previewTemplateFrame))
	m.Handle("GET /dashboard/templates/{id}/delete", h.signedIn(h.deleteTemplatePage))
	m.Handle("POST /dashboard/templates/{id}/delete", h.signedIn(h.deleteTemplate))
}

// starterHTML is the body of a template made on the Templates page.
const starterHTML = "<p>Hello {{{FIRST_NAME|there}}},</p>\n<p></p>"

// Body formats of the editor.
const (
	formatHTML       = "html"
	formatComponents = "components"
)

type templatesData struct {
	Templates []store.Template
	Name      string
	Error     formError
}

func (h *templatesHandler) templates(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderTemplates(w, r, se, http.StatusOK, templatesData{})
}

func (h *templatesHandler) renderTemplates(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d templatesData) {
	list, _, err := h.svc.List(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Templates = list
	h.render(w, status, "email_templates", view{Title: "Templates", Nav: "templates", Session: se, CSRF: se.CSRFToken, Data: d})
}

// templateError is the form error of a template write: a field error or
// an alias another template has.
func templateError(err error) (formError, bool) {
	if errors.Is(err, store.ErrConflict) {
		return formError{Field: "alias", Message: "The alias is already used by another template of this team."}, true
	}
	return asFormError(err)
}

// addTemplate makes a draft with a starter body and opens its editor.
func (h *templatesHandler) addTemplate(w http.ResponseWriter, r *http.Request, se *store.Session) {
	name, body := r.PostFormValue("name"), starterHTML
	t, err := h.svc.Create(r.Context(), se.TeamID, templates.Edit{Name: &name, HTML: &body})
	if f, ok := templateError(err); ok {
		h.renderTemplates(w, r, se, http.StatusUnprocessableEntity, templatesData{Name: name, Error: f})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/templates/"+t.ID.String(), http.StatusSeeOther)
}

// templateVariableRow is a row of the editor's variables.
type templateVariableRow struct {
	Key, Type, Fallback string
}

// templateForm is what the editor holds.
type templateForm struct {
	Name, Alias, From, Subject, ReplyTo string
	Format                              string // formatHTML or formatComponents
	HTML, Text, Components              string
	Variables                           []templateVariableRow
}

type templateData struct {
	Template store.Template
	Form     templateForm
	// Samples are the variables the form uses, each with a sample value
	// field for the preview.
	Samples []string
	Notice  string
	Error   formError
}

var templateNotices = map[string]string{
	"saved":      "Draft saved.",
	"published":  "Published: sends with this template now use this version.",
	"duplicated": "This is a copy, a draft of its own.",
}

// emptyVariableRows are the blank rows under a template's variables, to
// declare new ones without scripts.
const emptyVariableRows = 2

// formOfTemplate is the editor's form showing t's version being edited.
func formOfTemplate(t store.Template) templateForm {
	c := t.Content
	f := templateForm{Name: t.Name, HTML: c.HTML, ReplyTo: strings.Join(c.ReplyTo, ", "), Format: formatHTML}
	if t.Alias != nil {
		f.Alias = *t.Alias
	}
	if c.From != nil {
		f.From = *c.From
	}
	if c.Subject != nil {
		f.Subject = *c.Subject
	}
	if c.Text != nil {
		f.Text = *c.Text
	}
	if c.Components != nil {
		f.Format, f.Components = formatComponents, string(c.Components)
		f.HTML, f.Text = "", ""
	}
	for _, v := range c.Variables {
		row := templateVariableRow{Key: v.Key, Type: v.Type}
		if v.Fallback != nil {
			var s string
			if json.Unmarshal(v.Fallback, &s) == nil {
				row.Fallback = s
			} else {
				row.Fallback = string(v.Fallback) // a number
			}
		}
		f.Variables = append(f.Variables, row)
	}
	return f
}

// VariableKeys is the JSON array of the keys of the declared variables,
// the block editor's data-variables (assets/blocks-editor.js).
func (f templateForm) VariableKeys() string {
	keys := []string{}
	for _, row := range f.Variables {
		if row.Key != "" {
			keys = append(keys, row.Key)
		}
	}
	b, _ := json.Marshal(keys)
	return string(b)
}

// templateFormOf reads the editor's form.
func templateFormOf(r *http.Request) templateForm {
	f := templateForm{Name: r.PostFormValue("name"), Alias: strings.TrimSpace(r.PostFormValue("alias")),
		From: strings.TrimSpace(r.PostFormValue("from")), Subject: r.PostFormValue("subject"),
		ReplyTo: r.PostFormValue("reply_to"), Format: r.PostFormValue("format"), HTML: r.PostFormValue("html"),
		Text: r.PostFormValue("text"), Components: r.PostFormValue("components")}
	if f.Format != formatComponents {
		f.Format = formatHTML
	}
	keys, types, fallbacks := r.PostForm["var_key"], r.PostForm["var_type"], r.PostForm["var_fallback"]
	for i, k := range keys {
		row := templateVariableRow{Key: strings.TrimSpace(k), Type: "string"}
		if i < len(types) {
			row.Type = types[i]
		}
		if i < len(fallbacks) {
			row.Fallback = fallbacks[i]
		}
		if row.Key != "" {
			f.Variables = append(f.Variables, row)
		}
	}
	return f
}

// edit is the form as a templates.Edit, the API's rules for the whole
// form (Form: an empty name refused, an empty text part dropped). An
// empty fallback is none; the fallback of a number, boolean, object or
// list is given as the JSON it reads as.
func (f templateForm) edit() templates.Edit {
	e := templates.Edit{Name: &f.Name, Alias: &f.Alias, From: &f.From, Subject: &f.Subject, ReplyTo: []string{},
		Form: true}
	for _, a := range strings.Split(f.ReplyTo, ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.ReplyTo = append(e.ReplyTo, a)
		}
	}
	if f.Format == formatComponents {
		e.Components = json.RawMessage(f.Components)
		if strings.TrimSpace(f.Components) == "" {
			e.Components = json.RawMessage("{}") // refused by the parser, with its reason
		}
	} else {
		e.HTML = &f.HTML
		if f.Text != "" {
			e.Text = &f.Text
		}
	}
	vars := make([]templates.Variable, 0, len(f.Variables))
	for _, row := range f.Variables {
		v := templates.Variable{Key: row.Key, Type: row.Type}
		if fb := strings.TrimSpace(row.Fallback); fb != "" {
			v.Fallback = typedJSON(row.Type, row.Fallback)
		}
		vars = append(vars, v)
	}
	e.Variables = &vars
	return e
}

// typedJSON is a form value as the JSON of a variable of type typ: a
// number, boolean, object or list as the JSON it reads as, anything else
// (and a value that does not read as its type) as a JSON string, which
// the type check then refuses with its message.
func typedJSON(typ, value string) json.RawMessage {
	v := strings.TrimSpace(value)
	switch typ {
	case "number":
		if _, err := strconv.ParseFloat(v, 64); err == nil && json.Valid([]byte(v)) {
			return json.RawMessage(v)
		}
	case "boolean", "object", "list":
		if json.Valid([]byte(v)) {
			return json.RawMessage(v)
		}
	}
	raw, _ := json.Marshal(value)
	return raw
}

func (h *templatesHandler) loadTemplate(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Template, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Template, error) {
		return h.svc.Get(r.Context(), se.TeamID, id.String())
	})
}

// emailTemplate shows a template's editor.
func (h *templatesHandler) emailTemplate(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTemplate(w, r, se)
	if !ok {
		return
	}
	h.renderTemplate(w, se, http.StatusOK, "email_template", templateData{Template: t, Form: formOfTemplate(t),
		Notice: templateNotices[r.URL.Query().Get("done")]})
}

func (h *templatesHandler) renderTemplate(w http.ResponseWriter, se *store.Session, status int, page string, d templateData) {
	d.Samples = usedVariables(d.Form.Subject, d.Form.HTML, d.Form.Text, d.Form.Components)
	for range emptyVariableRows {
		d.Form.Variables = append(d.Form.Variables, templateVariableRow{Type: "string"})
	}
	title := d.Template.Name
	if page == "email_template_delete" {
		title = "Delete " + title
	}
	h.render(w, status, page, view{Title: title, Nav: "templates", Session: se, CSRF: se.CSRFToken, Data: d})
}

// saveTemplate saves the editor's draft; with action=publish it then
// publishes it.
func (h *templatesHandler) saveTemplate(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTemplate(w, r, se)
	if !ok {
		return
	}
	f := templateFormOf(r)
	_, err := h.svc.Update(r.Context(), se.TeamID, t.ID.String(), f.edit())
	if fe, ok := templateError(err); ok {
		h.renderTemplate(w, se, http.StatusUnprocessableEntity, "email_template", templateData{Template: t, Form: f, Error: fe})
		return
	}
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	done := "saved"
	if r.PostFormValue("action") == "publish" {
		if _, err := h.svc.Publish(r.Context(), se.TeamID, t.ID.String()); err != nil {
			h.failOr404(w, r, err)
			return
		}
		done = "published"
	}
	http.Redirect(w, r, "/dashboard/templates/"+t.ID.String()+"?done="+done, http.StatusSeeOther)
}

func (h *templatesHandler) duplicateTemplate(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTemplate(w, r, se)
	if !ok {
		return
	}
	dup, err := h.svc.Duplicate(r.Context(), se.TeamID, t.ID.String())
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/templates/"+dup.ID.String()+"?done=duplicated", http.StatusSeeOther)
}

func (h *templatesHandler) deleteTemplatePage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTemplate(w, r, se)
	if !ok {
		return
	}
	h.renderTemplate(w, se, http.StatusOK, "email_template_delete", templateData{Template: t})
}

func (h *templatesHandler) deleteTemplate(w http.ResponseWriter, r *http.Request, se *store.Session) {
	if _, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Template, error) {
		return h.svc.Delete(r.Context(), se.TeamID, id.String())
	}); !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/templates", http.StatusSeeOther)
}

// renderedTemplate is a draft rendered with sample values: what the
// preview shows. Error, when not empty, says why it cannot be rendered
// (an invalid draft, a variable without value or fallback) and Field is
// the field it names.
type renderedTemplate struct {
	Subject string `json:"subject"`
	HTML    string `json:"-"`
	Text    string `json:"text"`
	// TextGenerated says Text was made from the HTML: the draft has no
	// text part.
	TextGenerated bool   `json:"text_generated,omitempty"`
	Error         string `json:"error,omitempty"`
	Field         string `json:"field,omitempty"`
}

// previewUnsubscribeURL is the unsubscribe link of a preview without a
// sample value for it.
const previewUnsubscribeURL = "https://unsubscribe.example/preview"

// maxSampleValues bounds the sample values of a preview.
const maxSampleValues = 100

// renderDraft renders the posted draft of t with the posted sample values
// (fields sample.NAME) the way a send renders a published template
// (submit.SendRequest.WithTemplate); a sample of a number, boolean,
// object or list variable is given as the JSON it reads as.
func renderDraft(r *http.Request, t store.Template) renderedTemplate {
	f := templateFormOf(r)
	draft := t
	if err := f.edit().Apply(&draft, false); err != nil {
		var ie *invalid.Error
		if errors.As(err, &ie) {
			return renderedTemplate{Error: ie.Message, Field: ie.Field}
		}
		return renderedTemplate{Error: "The draft cannot be rendered."}
	}
	types := map[string]string{}
	for _, v := range draft.Content.Variables {
		types[v.Key] = v.Type
	}
	vars := map[string]json.RawMessage{}
	for k, vs := range r.PostForm {
		name, ok := strings.CutPrefix(k, "sample.")
		if !ok || len(vs) == 0 || vs[0] == "" || !merge.ValidName(name) || len(vars) >= maxSampleValues {
			continue
		}
		vars[name] = typedJSON(types[name], vs[0])
	}
	// A send fills the unsubscribe link (a component footer always has
	// one); the preview shows a stand-in unless a sample is given.
	if _, ok := vars[merge.UnsubscribeURL]; !ok {
		if _, ok := vars[merge.UnsubscribeURLAlias]; !ok {
			vars[merge.UnsubscribeURL], _ = json.Marshal(previewUnsubscribeURL)
		}
	}
	out, err := submit.SendRequest{Template: &submit.TemplateRequest{Variables: vars}}.WithTemplate(draft.Content)
	var se *submit.Error
	if errors.As(err, &se) {
		field := se.Field
		if name, ok := strings.CutPrefix(field, "template.variables."); ok {
			field = "sample." + name
		}
		return renderedTemplate{Error: se.Message, Field: field}
	}
	if err != nil {
		return renderedTemplate{Error: "The draft cannot be rendered."}
	}
	rt := renderedTemplate{}
	if out.Subject != nil {
		rt.Subject = *out.Subject
	}
	if out.HTML != nil {
		rt.HTML = *out.HTML
	}
	if out.Text != nil {
		rt.Text = *out.Text
	} else {
		// What a send without a text part gets (mime.Message.GenerateText).
		rt.Text, rt.TextGenerated = mime.TextFromHTML(rt.HTML), true
	}
	return rt
}

// previewTemplateJSON answers the editor's live preview as JSON: the subject
// and text rendered from the posted draft, or the reason it cannot be.
// It always answers 200: a draft that does not render yet is not an
// error of the request.
func (h *templatesHandler) previewTemplateJSON(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTemplate(w, r, se)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(renderDraft(r, t))
}

// previewFrame is the page of the preview frame when the draft does not
// render.
var previewFrame = template.Must(template.New("frame").Parse(`<!doctype html><meta charset="utf-8">` +
	`<body style="font:14px system-ui,sans-serif;color:#b91c1c;padding:1rem">{{.}}</body>`))

// previewTemplateFrame answers the editor's preview frame: the posted
// draft's HTML rendered with the sample values, or the reason it does not
// render, under the email preview's sandboxing headers (nothing loads
// from the network). A GET shows the saved draft with its fallbacks.
func (h *templatesHandler) previewTemplateFrame(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTemplate(w, r, se)
	if !ok {
		return
	}
	if r.Method == http.MethodGet {
		r.PostForm = formValuesOf(formOfTemplate(t))
	}
	rt := renderDraft(r, t)
	previewHeaders(w.Header(), false)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if rt.Error != "" {
		_ = previewFrame.Execute(w, rt.Error)
		return
	}
	_, _ = w.Write([]byte(rt.HTML))
}

// formValuesOf is f as the editor would post it.
func formValuesOf(f templateForm) map[string][]string {
	v := map[string][]string{"name": {f.Name}, "alias": {f.Alias}, "from": {f.From}, "subject": {f.Subject},
		"reply_to": {f.ReplyTo}, "format": {f.Format}, "html": {f.HTML}, "text": {f.Text}, "components": {f.Components}}
	for _, row := range f.Variables {
		v["var_key"] = append(v["var_key"], row.Key)
		v["var_type"] = append(v["var_type"], row.Type)
		v["var_fallback"] = append(v["var_fallback"], row.Fallback)
	}
	return v
}

// usedVariables lists the variables srcs use (a path's first name: the
// object ORDER of ORDER.total), each once, in order; a source that does
// not parse contributes none.
func usedVariables(srcs ...string) []string {
	var out []string
	for _, src := range srcs {
		t, err := merge.Parse(src)
		if err != nil {
			continue
		}
		for _, n := range t.Names() {
			if n = merge.Head(n); !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}
