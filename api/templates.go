package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/components"
	"github.com/posthaste/posthaste/internal/merge"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// Limits of a template (Resend allows 50 variables per template).
const (
	maxTemplateVariables = 50
	maxTemplateName      = 256
	maxTemplateAlias     = 128
	maxTemplateBody      = 4 << 20 // html or text
)

type templateVariableJSON struct {
	ID            string          `json:"id"`
	Key           string          `json:"key"`
	Type          string          `json:"type"`
	FallbackValue json.RawMessage `json:"fallback_value"`
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
}

type templateJSON struct {
	Object                 string                 `json:"object"`
	ID                     string                 `json:"id"`
	Name                   string                 `json:"name"`
	Alias                  *string                `json:"alias"`
	From                   *string                `json:"from"`
	Subject                *string                `json:"subject"`
	ReplyTo                []string               `json:"reply_to"`
	HTML                   string                 `json:"html"`
	Text                   *string                `json:"text"`
	Components             json.RawMessage        `json:"components"`
	Variables              []templateVariableJSON `json:"variables"`
	CreatedAt              string                 `json:"created_at"`
	UpdatedAt              string                 `json:"updated_at"`
	Status                 string                 `json:"status"`
	PublishedAt            *string                `json:"published_at"`
	HasUnpublishedVersions bool                   `json:"has_unpublished_versions"`
}

// renderTemplate renders the version being edited. Variables are not rows
// of their own: a variable's id is a name-based UUID (RFC 9562 §5.5) of
// its key within its template, stable across edits.
func renderTemplate(t store.Template) templateJSON {
	c := t.Content
	vars := make([]templateVariableJSON, len(c.Variables))
	for i, v := range c.Variables {
		fb := v.Fallback
		if fb == nil {
			fb = json.RawMessage("null")
		}
		vars[i] = templateVariableJSON{ID: uuid.NewSHA1(t.ID, []byte(v.Key)).String(), Key: v.Key, Type: v.Type, FallbackValue: fb,
			CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt)}
	}
	doc := c.Components
	if doc == nil {
		doc = json.RawMessage("null")
	}
	return templateJSON{Object: "template", ID: t.ID.String(), Name: t.Name, Alias: t.Alias, From: c.From,
		Subject: c.Subject, ReplyTo: c.ReplyTo, HTML: c.HTML, Text: c.Text, Components: doc, Variables: vars,
		CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt), Status: t.Status(),
		PublishedAt: formatTimePtr(t.PublishedAt), HasUnpublishedVersions: t.HasUnpublished}
}

type templateListItemJSON struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Alias       *string `json:"alias"`
	Status      string  `json:"status"`
	PublishedAt *string `json:"published_at"`
	CreatedAt   string  `json:"created_at"`
	UpdatedAt   string  `json:"updated_at"`
}

func renderTemplateListItem(t store.Template) templateListItemJSON {
	return templateListItemJSON{ID: t.ID.String(), Name: t.Name, Alias: t.Alias, Status: t.Status(),
		PublishedAt: formatTimePtr(t.PublishedAt), CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt)}
}

// templateRequest is the body of POST /templates and PATCH
// /templates/:id. Absent (or null) fields are left as they are by an
// update; so are an empty name and html, which Resend's Go SDK always
// sends. Components, a Posthaste extension, is a component document
// (internal/components) given instead of html and text: it is kept, and
// rendered into them when the template is saved.
type templateRequest struct {
	Components json.RawMessage       `json:"components"`
	Name       *string               `json:"name"`
	Alias      *string               `json:"alias"`
	From       *string               `json:"from"`
	Subject    *string               `json:"subject"`
	ReplyTo    submit.AddressList    `json:"reply_to"`
	HTML       *string               `json:"html"`
	Text       *string               `json:"text"`
	Variables  *[]templateVariableIn `json:"variables"`
}

type templateVariableIn struct {
	Key           string          `json:"key"`
	Type          string          `json:"type"`
	FallbackValue json.RawMessage `json:"fallback_value"`
}

// apply writes the request's fields into t; create says whether t is new
// (name and html are then required).
func (r templateRequest) apply(t *store.Template, create bool) error {
	if r.Name != nil && (*r.Name != "" || create) {
		name := strings.TrimSpace(*r.Name)
		if name == "" || len(name) > maxTemplateName {
			return validation("The `name` field must be 1 to %d characters.", maxTemplateName)
		}
		t.Name = name
	} else if create {
		return errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `name` field.")
	}
	if r.Alias != nil {
		if *r.Alias == "" {
			t.Alias = nil
		} else {
			if err := checkTemplateAlias(*r.Alias); err != nil {
				return err
			}
			t.Alias = r.Alias
		}
	}
	c := &t.Content
	if r.From != nil {
		c.From = nonEmpty(*r.From)
		if c.From != nil {
			if _, err := submit.ParseAddress(*c.From); err != nil {
				return validation("Invalid `from` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.")
			}
		}
	}
	if r.Subject != nil {
		c.Subject = nonEmpty(*r.Subject)
	}
	if r.ReplyTo != nil {
		for _, a := range r.ReplyTo {
			if _, err := submit.ParseAddress(a); err != nil {
				return validation("Invalid `reply_to` field: %q is not an email address.", a)
			}
		}
		c.ReplyTo = []string(r.ReplyTo)
		if len(c.ReplyTo) == 0 {
			c.ReplyTo = nil
		}
	}
	hasHTML := r.HTML != nil && *r.HTML != ""
	if doc := bytes.TrimSpace(r.Components); len(doc) > 0 && string(doc) != "null" {
		if hasHTML || r.Text != nil {
			return validation("Give either `components` or `html` and `text`, not both.")
		}
		d, err := components.Parse(doc)
		if err != nil {
			return validation("Invalid `components` field: %s.", err)
		}
		html, text, err := components.Render(d)
		if err != nil {
			return validation("Invalid `components` field: %s.", err)
		}
		c.HTML, c.Text, c.Components = html, &text, append(json.RawMessage(nil), doc...)
	} else {
		if hasHTML {
			c.HTML, c.Components = *r.HTML, nil
		} else if create {
			return errorf(http.StatusUnprocessableEntity, nameMissingField, "Missing `html` field.")
		}
		if r.Text != nil {
			c.Text, c.Components = r.Text, nil
		}
	}
	if r.Variables != nil {
		vars, err := checkTemplateVariables(*r.Variables)
		if err != nil {
			return err
		}
		c.Variables = vars
	}
	if c.Variables == nil {
		c.Variables = []store.TemplateVariable{}
	}
	return checkTemplateContent(*c)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// checkTemplateAlias allows 1 to maxTemplateAlias letters, digits, '-',
// '_' and '.'; an alias may not be a UUID, so that a path names a
// template unambiguously.
func checkTemplateAlias(a string) error {
	bad := a == "" || len(a) > maxTemplateAlias
	for i := 0; i < len(a) && !bad; i++ {
		c := a[i]
		bad = !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}
	if _, err := uuid.Parse(a); err == nil {
		bad = true
	}
	if bad {
		return validation("Invalid `alias` field. Use 1 to %d letters, digits, `-`, `_` or `.`, and not a UUID.", maxTemplateAlias)
	}
	return nil
}

// checkTemplateVariables checks declared variables: a valid name that is
// not reserved, declared once, of type string or number, with a fallback
// of that type or none.
func checkTemplateVariables(in []templateVariableIn) ([]store.TemplateVariable, error) {
	if len(in) > maxTemplateVariables {
		return nil, validation("Invalid `variables` field. A template may declare at most %d variables.", maxTemplateVariables)
	}
	out := make([]store.TemplateVariable, 0, len(in))
	seen := map[string]bool{}
	for _, v := range in {
		switch {
		case !merge.ValidName(v.Key):
			return nil, validation("Invalid variable key %q. Use letters, digits and underscores.", v.Key)
		case merge.IsReserved(v.Key):
			return nil, validation("The variable name %s is reserved and cannot be declared.", v.Key)
		case seen[v.Key]:
			return nil, validation("The variable %s is declared twice.", v.Key)
		case v.Type != "string" && v.Type != "number":
			return nil, validation("Invalid type for variable %s. Use `string` or `number`.", v.Key)
		}
		seen[v.Key] = true
		fb := bytes.TrimSpace(v.FallbackValue)
		if len(fb) == 0 || string(fb) == "null" {
			fb = nil
		} else {
			var s string
			var n json.Number
			isString := json.Unmarshal(fb, &s) == nil
			isNumber := !isString && json.Unmarshal(fb, &n) == nil
			if (v.Type == "string" && !isString) || (v.Type == "number" && !isNumber) {
				return nil, validation("Invalid fallback_value for variable %s. Expected a %s.", v.Key, v.Type)
			}
		}
		var stored json.RawMessage
		if fb != nil {
			stored = append(stored, fb...)
		}
		out = append(out, store.TemplateVariable{Key: v.Key, Type: v.Type, Fallback: stored})
	}
	return out, nil
}

// checkTemplateContent parses subject, html and text, and requires every
// variable they use to be declared or reserved (as Resend does).
func checkTemplateContent(c store.TemplateContent) error {
	if len(c.HTML) > maxTemplateBody || (c.Text != nil && len(*c.Text) > maxTemplateBody) {
		return validation("The template's `html` and `text` may be at most %d MB each.", maxTemplateBody>>20)
	}
	declared := map[string]bool{}
	for _, v := range c.Variables {
		declared[v.Key] = true
	}
	for _, f := range []struct {
		name string
		src  *string
	}{{"subject", c.Subject}, {"html", &c.HTML}, {"text", c.Text}} {
		if f.src == nil {
			continue
		}
		tpl, err := merge.Parse(*f.src)
		if err != nil {
			return validation("Invalid `%s` field: %s.", f.name, err)
		}
		for _, n := range tpl.Names() {
			if !declared[n] && !merge.IsReserved(n) && !tpl.HasInlineFallback(n) {
				return validation("Variable '%s' is used in the template's %s but not defined in the variables list.", n, f.name)
			}
		}
	}
	return nil
}

// templateError turns an alias conflict into a 422 and a missing template
// into a 404 naming templates.
func templateError(err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return validation("The alias is already used by another template of this team.")
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, nameNotFound, "Template not found.")
	}
	return err
}

func (s *Server) createTemplate(c *gin.Context) {
	var req templateRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	t := store.Template{ID: id, TeamID: principal(c).TeamID}
	if err := req.apply(&t, true); err != nil {
		s.respondError(c, err)
		return
	}
	t, err = s.store.CreateTemplate(c.Request.Context(), t)
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	c.JSON(http.StatusCreated, gin.H{"object": "template", "id": t.ID})
}

func (s *Server) listTemplates(c *gin.Context) {
	respondList(s, c, s.store.ListTemplates, renderTemplateListItem)
}

func (s *Server) getTemplate(c *gin.Context) {
	t, err := s.store.TemplateByRef(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	c.JSON(http.StatusOK, renderTemplate(t))
}

func (s *Server) updateTemplate(c *gin.Context) {
	var req templateRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	t, err := s.store.UpdateTemplate(c.Request.Context(), principal(c).TeamID, c.Param("id"),
		func(t *store.Template) error { return req.apply(t, false) })
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "template", "id": t.ID})
}

func (s *Server) deleteTemplate(c *gin.Context) {
	t, err := s.store.DeleteTemplate(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "template", "id": t.ID, "deleted": true})
}

func (s *Server) publishTemplate(c *gin.Context) {
	t, err := s.store.PublishTemplate(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "template", "id": t.ID})
}

func (s *Server) duplicateTemplate(c *gin.Context) {
	id, err := uuid.NewV7()
	if err != nil {
		s.respondError(c, err)
		return
	}
	t, err := s.store.DuplicateTemplate(c.Request.Context(), principal(c).TeamID, c.Param("id"), id)
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"object": "template", "id": t.ID})
}
