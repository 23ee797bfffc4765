package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Segment is a named group of a team's contacts.
type Segment struct {
	ID        uuid.UUID
	TeamID    uuid.UUID
	Name      string
	CreatedAt time.Time
}

const segmentColumns = `id, team_id, name, created_at`

func scanSegment(row pgx.Row) (Segment, error) {
	var sg Segment
	err := row.Scan(&sg.ID, &sg.TeamID, &sg.Name, &sg.CreatedAt)
	return sg, mapErr(err)
}

// CreateSegment adds a segment and returns it.
func (s *Audience) CreateSegment(ctx context.Context, sg Segment) (Segment, error) {
	got, err := scanSegment(s.pool.QueryRow(ctx, `INSERT INTO segment (id, team_id, name) VALUES (@id, @team, @name)
		RETURNING `+segmentColumns, pgx.NamedArgs{"id": sg.ID, "team": sg.TeamID, "name": sg.Name}))
	if err != nil {
		return Segment{}, fmt.Errorf("creating segment: %w", err)
	}
	return got, nil
}

// Segment finds one of the team's segments.
func (s *Audience) Segment(ctx context.Context, teamID, id uuid.UUID) (Segment, error) {
	return scanSegment(s.pool.QueryRow(ctx, `SELECT `+segmentColumns+` FROM segment WHERE team_id = @team AND id = @id`,
		pgx.NamedArgs{"team": teamID, "id": id}))
}

// ListSegments lists the team's segments, newest first.
func (s *Audience) ListSegments(ctx context.Context, teamID uuid.UUID, p Page) ([]Segment, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+segmentColumns+` FROM segment WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanSegment)
}

// RenameSegment changes one of the team's segments' name and returns it.
func (s *Audience) RenameSegment(ctx context.Context, teamID, id uuid.UUID, name string) (Segment, error) {
	return scanSegment(s.pool.QueryRow(ctx, `UPDATE segment SET name = @name WHERE team_id = @team AND id = @id
		RETURNING `+segmentColumns, pgx.NamedArgs{"team": teamID, "id": id, "name": name}))
}

// DeleteSegment removes one of the team's segments (its memberships go
// with it; its contacts stay). ErrNotFound when there is none.
func (s *Audience) DeleteSegment(ctx context.Context, teamID, id uuid.UUID) (Segment, error) {
	return scanSegment(s.pool.QueryRow(ctx, `DELETE FROM segment WHERE team_id = @team AND id = @id
		RETURNING `+segmentColumns, pgx.NamedArgs{"team": teamID, "id": id}))
}
