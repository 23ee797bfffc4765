package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Template statuses (Resend's `status` of a template).
const (
	TemplateDraft     = "draft"
	TemplatePublished = "published"
)

// TemplateVariable is a variable a template declares. Type is one of
// Resend's "string", "number", "boolean", "object", "list"; Fallback is
// its JSON fallback value of that type, nil when it has none.
type TemplateVariable struct {
	Key      string          `json:"key"`
	Type     string          `json:"type"`
	Fallback json.RawMessage `json:"fallback_value,omitempty"`
}

// TemplateContent is one version of a template: everything a send
// renders. Nil pointers are fields the template leaves to the request.
type TemplateContent struct {
	From      *string            `json:"from,omitempty"`
	Subject   *string            `json:"subject,omitempty"`
	ReplyTo   []string           `json:"reply_to,omitempty"`
	HTML      string             `json:"html"`
	Text      *string            `json:"text,omitempty"`
	Variables []TemplateVariable `json:"variables"`
	// Components is the component document (internal/components) the
	// template was written as, nil for a template written as HTML; HTML
	// and Text are then its rendering, placeholders left in.
	Components json.RawMessage `json:"components,omitempty"`
}

// Template is a team's email template. Content is the version being
// edited; Published the version sends use, nil for a draft.
type Template struct {
	ID          uuid.UUID
	TeamID      uuid.UUID
	Name        string
	Alias       *string
	Content     TemplateContent
	Published   *TemplateContent
	PublishedAt *time.Time
	// PublishedVersionID names the published version (Resend's
	// current_version_id): new on every publish, nil for a draft.
	PublishedVersionID *uuid.UUID
	HasUnpublished     bool // Content was edited after the last publish
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Status is TemplatePublished once the template was published, else
// TemplateDraft.
func (t Template) Status() string {
	if t.Published != nil {
		return TemplatePublished
	}
	return TemplateDraft
}

const templateColumns = `id, team_id, name, alias, content, published, published_at, published_version_id,
	has_unpublished, created_at, updated_at`

func scanTemplate(row pgx.Row) (Template, error) {
	var t Template
	var content, published []byte
	err := row.Scan(&t.ID, &t.TeamID, &t.Name, &t.Alias, &content, &published, &t.PublishedAt, &t.PublishedVersionID, &t.HasUnpublished,
		&t.CreatedAt, &t.UpdatedAt)
	if err != nil {
		return Template{}, mapErr(err)
	}
	if err := json.Unmarshal(content, &t.Content); err != nil {
		return Template{}, fmt.Errorf("reading template %s content: %w", t.ID, err)
	}
	if published != nil {
		t.Published = new(TemplateContent)
		if err := json.Unmarshal(published, t.Published); err != nil {
			return Template{}, fmt.Errorf("reading template %s published content: %w", t.ID, err)
		}
	}
	return t, nil
}

// templateRef is the condition selecting a team's template by id or
// alias: ref is an id when it parses as a UUID, else an alias (the API
// refuses aliases that parse as UUIDs).
func templateRef(teamID uuid.UUID, ref string) (string, pgx.NamedArgs) {
	if id, err := uuid.Parse(ref); err == nil {
		return `team_id = @team AND id = @id`, pgx.NamedArgs{"team": teamID, "id": id}
	}
	return `team_id = @team AND alias = @alias`, pgx.NamedArgs{"team": teamID, "alias": ref}
}

// CreateTemplate stores a new draft template (t.Published is ignored) and
// returns it. An alias the team already uses is ErrConflict.
func (s *Templates) CreateTemplate(ctx context.Context, t Template) (Template, error) {
	content, err := json.Marshal(t.Content)
	if err != nil {
		return Template{}, fmt.Errorf("encoding template content: %w", err)
	}
	got, err := scanTemplate(s.pool.QueryRow(ctx, `INSERT INTO template (id, team_id, name, alias, content)
		VALUES (@id, @team, @name, @alias, @content) RETURNING `+templateColumns,
		pgx.NamedArgs{"id": t.ID, "team": t.TeamID, "name": t.Name, "alias": t.Alias, "content": content}))
	if err != nil {
		return Template{}, fmt.Errorf("creating template: %w", err)
	}
	return got, nil
}

// TemplateByRef returns the team's template with this id or alias;
// ErrNotFound when the team has none.
func (s *Templates) TemplateByRef(ctx context.Context, teamID uuid.UUID, ref string) (Template, error) {
	cond, args := templateRef(teamID, ref)
	return scanTemplate(s.pool.QueryRow(ctx, `SELECT `+templateColumns+` FROM template WHERE `+cond, args))
}

// ListTemplates lists the team's templates, newest first.
func (s *Templates) ListTemplates(ctx context.Context, teamID uuid.UUID, p Page) ([]Template, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+templateColumns+` FROM template WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanTemplate)
}

// UpdateTemplate changes the team's template with this id or alias: edit
// is called with the current row, locked, and may change Name, Alias and
// Content; an error from it is returned as it is and nothing changes. A
// published template keeps its published version and is marked as having
// unpublished changes. An alias already used is ErrConflict.
func (s *Templates) UpdateTemplate(ctx context.Context, teamID uuid.UUID, ref string,
	edit func(*Template) error) (Template, error) {
	var t Template
	// edit's error is the caller's: it is returned as edit returned it,
	// not mapped.
	var editErr error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cond, args := templateRef(teamID, ref)
		var err error
		t, err = scanTemplate(tx.QueryRow(ctx, `SELECT `+templateColumns+` FROM template WHERE `+cond+` FOR UPDATE`, args))
		if err != nil {
			return err
		}
		if editErr = edit(&t); editErr != nil {
			return editErr
		}
		content, err := json.Marshal(t.Content)
		if err != nil {
			return fmt.Errorf("encoding template content: %w", err)
		}
		t, err = scanTemplate(tx.QueryRow(ctx, `UPDATE template SET name = @name, alias = @alias, content = @content,
				has_unpublished = published IS NOT NULL, updated_at = now()
			WHERE team_id = @team AND id = @id RETURNING `+templateColumns,
			pgx.NamedArgs{"team": teamID, "id": t.ID, "name": t.Name, "alias": t.Alias, "content": content}))
		if err != nil {
			return fmt.Errorf("updating template: %w", err)
		}
		return nil
	})
	if editErr != nil {
		return Template{}, editErr
	}
	if err != nil {
		return Template{}, err
	}
	return t, nil
}

// PublishTemplate makes the current content of the team's template the
// version sends use, named versionID.
func (s *Templates) PublishTemplate(ctx context.Context, teamID uuid.UUID, ref string, versionID uuid.UUID) (Template, error) {
	cond, args := templateRef(teamID, ref)
	args["version"] = versionID
	return scanTemplate(s.pool.QueryRow(ctx, `UPDATE template SET published = content, published_at = now(),
			published_version_id = @version, has_unpublished = false, updated_at = now()
		WHERE `+cond+` RETURNING `+templateColumns, args))
}

// DuplicateTemplate copies the current content of the team's template
// into a new draft with id newID, named after the original with " (copy)"
// and without an alias.
func (s *Templates) DuplicateTemplate(ctx context.Context, teamID uuid.UUID, ref string, newID uuid.UUID) (Template, error) {
	cond, args := templateRef(teamID, ref)
	args["new_id"] = newID
	t, err := scanTemplate(s.pool.QueryRow(ctx, `INSERT INTO template (id, team_id, name, content)
		SELECT @new_id, team_id, name || ' (copy)', content FROM template WHERE `+cond+`
		RETURNING `+templateColumns, args))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Template{}, fmt.Errorf("duplicating template: %w", err)
	}
	return t, err
}

// DeleteTemplate removes the team's template and returns it. Emails
// already accepted from it keep their rendered content.
func (s *Templates) DeleteTemplate(ctx context.Context, teamID uuid.UUID, ref string) (Template, error) {
	cond, args := templateRef(teamID, ref)
	return scanTemplate(s.pool.QueryRow(ctx, `DELETE FROM template WHERE `+cond+` RETURNING `+templateColumns, args))
}
