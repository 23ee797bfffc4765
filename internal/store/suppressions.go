package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// Reasons an address is suppressed.
const (
	SuppressionBounce    = "bounce"
	SuppressionComplaint = "complaint"
	SuppressionManual    = "manual"
)

// Suppression is an address of a team's suppression list: mail to it is
// not attempted.
type Suppression struct {
	ID        uuid.UUID
	TeamID    uuid.UUID
	Email     string // lower-cased
	Reason    string
	EmailID   *uuid.UUID // the email whose outcome added it; nil for manual entries
	CreatedAt time.Time
}

const suppressionColumns = `id, team_id, email, reason, email_id, created_at`

func scanSuppression(row pgx.Row) (Suppression, error) {
	var s Suppression
	err := row.Scan(&s.ID, &s.TeamID, &s.Email, &s.Reason, &s.EmailID, &s.CreatedAt)
	return s, mapErr(err)
}

// NormalizeAddress is how the suppression list, and every other per-team
// list of addresses (contacts), compares addresses: lower-cased whole.
func NormalizeAddress(addr string) string { return strings.ToLower(addr) }

// AddSuppression adds an address to the team's list and returns the entry.
// An address already listed keeps its first entry, which is returned with
// created false.
func (s *Emails) AddSuppression(ctx context.Context, sp Suppression) (Suppression, bool, error) {
	return addSuppression(ctx, s.pool, sp)
}

// AddSuppressionBy adds an address as AddSuppression does and records by
// (an audit entry with its actor and client filled in) as
// suppression.create of the entry, new or already listed, in the same
// transaction.
func (s *Emails) AddSuppressionBy(ctx context.Context, sp Suppression, by audit.Entry) (Suppression, bool, error) {
	var got Suppression
	var created bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if got, created, err = addSuppression(ctx, tx, sp); err != nil {
			return err
		}
		by.TeamID, by.Action, by.TargetType, by.TargetID = &got.TeamID, audit.SuppressionCreate, "suppression", got.ID.String()
		_, err = appendAudit(ctx, tx, by)
		return err
	})
	if err != nil {
		return Suppression{}, false, err
	}
	return got, created, nil
}

func addSuppression(ctx context.Context, q querier, sp Suppression) (Suppression, bool, error) {
	sp.Email = NormalizeAddress(sp.Email)
	got, err := scanSuppression(q.QueryRow(ctx, `INSERT INTO suppression (id, team_id, email, reason, email_id)
		VALUES (@id, @team, @email, @reason, @email_id)
		ON CONFLICT (team_id, email) DO NOTHING
		RETURNING `+suppressionColumns,
		pgx.NamedArgs{"id": sp.ID, "team": sp.TeamID, "email": sp.Email, "reason": sp.Reason, "email_id": sp.EmailID}))
	if err == nil {
		return got, true, nil
	}
	if err != ErrNotFound {
		return Suppression{}, false, fmt.Errorf("adding suppression: %w", err)
	}
	got, err = suppressionByEmail(ctx, q, sp.TeamID, sp.Email)
	return got, false, err
}

func suppressionByEmail(ctx context.Context, q querier, teamID uuid.UUID, email string) (Suppression, error) {
	return scanSuppression(q.QueryRow(ctx, `SELECT `+suppressionColumns+` FROM suppression
		WHERE team_id = @team AND email = @email`, pgx.NamedArgs{"team": teamID, "email": NormalizeAddress(email)}))
}

// ListSuppressions lists the team's entries, newest first.
func (s *Emails) ListSuppressions(ctx context.Context, teamID uuid.UUID, p Page) ([]Suppression, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+suppressionColumns+` FROM suppression WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanSuppression)
}

// DeleteSuppression removes the team's entry with this id (when id is set)
// or for this address, and returns it. ErrNotFound when there is none. It
// records by (an audit entry with its actor and client filled in) as
// suppression.delete of the entry in the same transaction.
func (s *Emails) DeleteSuppression(ctx context.Context, teamID uuid.UUID, id *uuid.UUID, email string, by audit.Entry) (Suppression, error) {
	var sp Suppression
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		sp, err = scanSuppression(tx.QueryRow(ctx, `DELETE FROM suppression
			WHERE team_id = @team AND ((@id::uuid IS NOT NULL AND id = @id) OR (@id::uuid IS NULL AND email = @email))
			RETURNING `+suppressionColumns,
			pgx.NamedArgs{"team": teamID, "id": id, "email": NormalizeAddress(email)}))
		if err != nil {
			return err
		}
		by.TeamID, by.Action, by.TargetType, by.TargetID = &sp.TeamID, audit.SuppressionDelete, "suppression", sp.ID.String()
		_, err = appendAudit(ctx, tx, by)
		return err
	})
	if err != nil {
		return Suppression{}, err
	}
	return sp, nil
}

// Suppressed returns which of the addresses are on the team's list, keyed
// by lower-cased address.
func (s *Emails) Suppressed(ctx context.Context, teamID uuid.UUID, emails []string) (map[string]bool, error) {
	lower := make([]string, len(emails))
	for i, e := range emails {
		lower[i] = NormalizeAddress(e)
	}
	rows, err := s.pool.Query(ctx, `SELECT email FROM suppression WHERE team_id = @team AND email = ANY(@emails)`,
		pgx.NamedArgs{"team": teamID, "emails": lower})
	if err != nil {
		return nil, mapErr(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reading suppressions: %w", mapErr(err))
	}
	out := make(map[string]bool, len(found))
	for _, e := range found {
		out[e] = true
	}
	return out, nil
}
