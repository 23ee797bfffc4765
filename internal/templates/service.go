package templates

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// Service is what the HTTP API and the dashboard do with a team's
// templates. A template is named by ref: its id, or its alias. Bad input
// is an *invalid.Error; a ref the team has no template for is
// store.ErrNotFound; an alias another template of the team has is
// store.ErrConflict.
type Service struct {
	st    *store.Templates
	newID func() (uuid.UUID, error)
}

// New returns a Service over the templates of st.
func New(st *store.Store) *Service {
	return &Service{st: st.Templates, newID: uuid.NewV7}
}

// Create checks e as a new template (name and html, or components, are
// required) and stores it as a draft of the team.
func (s *Service) Create(ctx context.Context, teamID uuid.UUID, e Edit) (store.Template, error) {
	id, err := s.newID()
	if err != nil {
		return store.Template{}, fmt.Errorf("making a template id: %w", err)
	}
	t := store.Template{ID: id, TeamID: teamID}
	if err := e.Apply(&t, true); err != nil {
		return store.Template{}, err
	}
	return s.st.CreateTemplate(ctx, t)
}

// Get returns the team's template ref.
func (s *Service) Get(ctx context.Context, teamID uuid.UUID, ref string) (store.Template, error) {
	return s.st.TemplateByRef(ctx, teamID, ref)
}

// List returns a page of the team's templates, newest first, and whether
// there are more.
func (s *Service) List(ctx context.Context, teamID uuid.UUID, p store.Page) ([]store.Template, bool, error) {
	return s.st.ListTemplates(ctx, teamID, p)
}

// Update applies e to the version being edited of the team's template
// ref, checked against the template as it is, under its row lock. A
// published template keeps its published version until Publish.
func (s *Service) Update(ctx context.Context, teamID uuid.UUID, ref string, e Edit) (store.Template, error) {
	return s.st.UpdateTemplate(ctx, teamID, ref, func(t *store.Template) error { return e.Apply(t, false) })
}

// Publish makes the version being edited of the team's template ref the
// one sends use, under a new version id.
func (s *Service) Publish(ctx context.Context, teamID uuid.UUID, ref string) (store.Template, error) {
	version, err := s.newID()
	if err != nil {
		return store.Template{}, fmt.Errorf("making a template version id: %w", err)
	}
	return s.st.PublishTemplate(ctx, teamID, ref, version)
}

// Duplicate copies the version being edited of the team's template ref
// into a new draft named after it with " (copy)", without an alias.
func (s *Service) Duplicate(ctx context.Context, teamID uuid.UUID, ref string) (store.Template, error) {
	id, err := s.newID()
	if err != nil {
		return store.Template{}, fmt.Errorf("making a template id: %w", err)
	}
	return s.st.DuplicateTemplate(ctx, teamID, ref, id)
}

// Delete removes the team's template ref and returns it. Emails already
// accepted from it keep their rendered content.
func (s *Service) Delete(ctx context.Context, teamID uuid.UUID, ref string) (store.Template, error) {
	return s.st.DeleteTemplate(ctx, teamID, ref)
}
