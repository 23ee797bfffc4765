package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Types of contact properties.
const (
	PropertyString = "string"
	PropertyNumber = "number"
)

// ContactProperty defines a custom property of a team's contacts.
type ContactProperty struct {
	ID     uuid.UUID
	TeamID uuid.UUID
	Key    string
	Type   string // PropertyString or PropertyNumber; fixed at creation
	// Fallback is the value of contacts without one: a string, a float64
	// or nil.
	Fallback  any
	CreatedAt time.Time
}

const contactPropertyColumns = `id, team_id, key, type, fallback, created_at`

func scanContactProperty(row pgx.Row) (ContactProperty, error) {
	var p ContactProperty
	err := row.Scan(&p.ID, &p.TeamID, &p.Key, &p.Type, &p.Fallback, &p.CreatedAt)
	return p, mapErr(err)
}

// CreateContactProperty adds a definition. ErrConflict when the team
// already has the key.
func (s *Audience) CreateContactProperty(ctx context.Context, p ContactProperty) (ContactProperty, error) {
	fb, err := jsonArg(p.Fallback)
	if err != nil {
		return ContactProperty{}, err
	}
	got, err := scanContactProperty(s.pool.QueryRow(ctx, `INSERT INTO contact_property (id, team_id, key, type, fallback)
		VALUES (@id, @team, @key, @type, @fallback::jsonb) RETURNING `+contactPropertyColumns,
		pgx.NamedArgs{"id": p.ID, "team": p.TeamID, "key": p.Key, "type": p.Type, "fallback": fb}))
	if err != nil {
		return ContactProperty{}, fmt.Errorf("creating contact property: %w", err)
	}
	return got, nil
}

// ContactProperty finds one of the team's definitions.
func (s *Audience) ContactProperty(ctx context.Context, teamID, id uuid.UUID) (ContactProperty, error) {
	return scanContactProperty(s.pool.QueryRow(ctx, `SELECT `+contactPropertyColumns+` FROM contact_property
		WHERE team_id = @team AND id = @id`, pgx.NamedArgs{"team": teamID, "id": id}))
}

// ContactPropertiesByKey returns all the team's definitions by key.
func (s *Audience) ContactPropertiesByKey(ctx context.Context, teamID uuid.UUID) (map[string]ContactProperty, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+contactPropertyColumns+` FROM contact_property WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, fmt.Errorf("loading contact properties: %w", mapErr(err))
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ContactProperty, error) { return scanContactProperty(r) })
	if err != nil {
		return nil, fmt.Errorf("loading contact properties: %w", err)
	}
	out := make(map[string]ContactProperty, len(defs))
	for _, d := range defs {
		out[d.Key] = d
	}
	return out, nil
}

// ListContactProperties lists the team's definitions, newest first.
func (s *Audience) ListContactProperties(ctx context.Context, teamID uuid.UUID, p Page) ([]ContactProperty, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+contactPropertyColumns+` FROM contact_property WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanContactProperty)
}

// SetContactPropertyFallback changes a definition's fallback value (nil
// removes it) and returns the definition.
func (s *Audience) SetContactPropertyFallback(ctx context.Context, teamID, id uuid.UUID, fallback any) (ContactProperty, error) {
	fb, err := jsonArg(fallback)
	if err != nil {
		return ContactProperty{}, err
	}
	return scanContactProperty(s.pool.QueryRow(ctx, `UPDATE contact_property SET fallback = @fallback::jsonb
		WHERE team_id = @team AND id = @id RETURNING `+contactPropertyColumns,
		pgx.NamedArgs{"team": teamID, "id": id, "fallback": fb}))
}

// jsonArg is v as JSON text for a jsonb parameter, or nil for SQL NULL:
// pgx would pass a Go string through as JSON text unencoded.
func jsonArg(v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T as json: %w", v, err)
	}
	s := string(b)
	return &s, nil
}

// DeleteContactProperty removes a definition and its values from every
// contact of the team, in one transaction. ErrNotFound when there is none.
func (s *Audience) DeleteContactProperty(ctx context.Context, teamID, id uuid.UUID) (ContactProperty, error) {
	var p ContactProperty
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		p, err = scanContactProperty(tx.QueryRow(ctx, `DELETE FROM contact_property WHERE team_id = @team AND id = @id
			RETURNING `+contactPropertyColumns, pgx.NamedArgs{"team": teamID, "id": id}))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE contact SET properties = properties - @key::text
			WHERE team_id = @team AND properties ? @key`, pgx.NamedArgs{"team": teamID, "key": p.Key})
		return mapErr(err)
	})
	if err != nil {
		return ContactProperty{}, fmt.Errorf("deleting contact property: %w", err)
	}
	return p, nil
}
