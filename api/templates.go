package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/templates"
)

// templatesAPI serves /templates through templates.Service.
type templatesAPI struct {
	*Server
	svc *templates.Service
}

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
	CurrentVersionID       *string                `json:"current_version_id"`
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
	return templateJSON{Object: "template", ID: t.ID.String(), CurrentVersionID: versionID(t), Name: t.Name, Alias: t.Alias, From: c.From,
		Subject: c.Subject, ReplyTo: c.ReplyTo, HTML: c.HTML, Text: c.Text, Components: doc, Variables: vars,
		CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt), Status: t.Status(),
		PublishedAt: formatTimePtr(t.PublishedAt), HasUnpublishedVersions: t.HasUnpublished}
}

// versionID is Resend's current_version_id: the id of the published
// version, nil (null) for a template never published.
func versionID(t store.Template) *string {
	if t.PublishedVersionID == nil {
		return nil
	}
	s := t.PublishedVersionID.String()
	return &s
}

type templateListItemJSON struct {
	ID               string  `json:"id"`
	CurrentVersionID *string `json:"current_version_id"`
	Name             string  `json:"name"`
	Alias            *string `json:"alias"`
	Status           string  `json:"status"`
	PublishedAt      *string `json:"published_at"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
}

func renderTemplateListItem(t store.Template) templateListItemJSON {
	return templateListItemJSON{ID: t.ID.String(), CurrentVersionID: versionID(t), Name: t.Name, Alias: t.Alias, Status: t.Status(),
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

// edit is the request as a templates.Edit, whose checks the dashboard's
// editor shares.
func (r templateRequest) edit() templates.Edit {
	e := templates.Edit{Name: r.Name, Alias: r.Alias, From: r.From, Subject: r.Subject, HTML: r.HTML, Text: r.Text,
		ReplyTo: []string(r.ReplyTo), Components: r.Components}
	if r.Variables != nil {
		vars := make([]templates.Variable, len(*r.Variables))
		for i, v := range *r.Variables {
			vars[i] = templates.Variable{Key: v.Key, Type: v.Type, Fallback: v.FallbackValue}
		}
		e.Variables = &vars
	}
	return e
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

// respondTemplateRef answers a change of a template with a reference to
// it, or with err.
func (s *templatesAPI) respondTemplateRef(c *gin.Context, status int, t store.Template, err error, extra gin.H) {
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	out := gin.H{"object": "template", "id": t.ID}
	for k, v := range extra {
		out[k] = v
	}
	c.JSON(status, out)
}

func (s *templatesAPI) createTemplate(c *gin.Context) {
	var req templateRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	t, err := s.svc.Create(c.Request.Context(), principal(c).TeamID, req.edit())
	s.respondTemplateRef(c, http.StatusCreated, t, err, nil)
}

func (s *templatesAPI) listTemplates(c *gin.Context) {
	respondList(s.Server, c, paged, s.svc.List, renderTemplateListItem)
}

func (s *templatesAPI) getTemplate(c *gin.Context) {
	t, err := s.svc.Get(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	if err != nil {
		s.respondError(c, templateError(err))
		return
	}
	c.JSON(http.StatusOK, renderTemplate(t))
}

func (s *templatesAPI) updateTemplate(c *gin.Context) {
	var req templateRequest
	if err := decodeJSON(c, &req); err != nil {
		s.respondError(c, err)
		return
	}
	t, err := s.svc.Update(c.Request.Context(), principal(c).TeamID, c.Param("id"), req.edit())
	s.respondTemplateRef(c, http.StatusOK, t, err, nil)
}

func (s *templatesAPI) deleteTemplate(c *gin.Context) {
	t, err := s.svc.Delete(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	s.respondTemplateRef(c, http.StatusOK, t, err, gin.H{"deleted": true})
}

func (s *templatesAPI) publishTemplate(c *gin.Context) {
	t, err := s.svc.Publish(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	s.respondTemplateRef(c, http.StatusOK, t, err, nil)
}

func (s *templatesAPI) duplicateTemplate(c *gin.Context) {
	t, err := s.svc.Duplicate(c.Request.Context(), principal(c).TeamID, c.Param("id"))
	s.respondTemplateRef(c, http.StatusOK, t, err, nil)
}
