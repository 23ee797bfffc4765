package store

import (
	"context"
	"fmt"
	"slices"
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

// Webhook event types of the suppression list (Resend's).
const (
	EventSuppressionAdded   = "suppression.added"
	EventSuppressionRemoved = "suppression.removed"
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

// SuppressionPayload is the data of an entry's suppression.* webhook
// events, Resend's SuppressionEventData: the reason is its origin, the
// email that added it its source_id.
func SuppressionPayload(sp Suppression) map[string]any {
	var source any
	if sp.EmailID != nil {
		source = sp.EmailID.String()
	}
	return map[string]any{"id": sp.ID.String(), "email": sp.Email, "origin": sp.Reason, "source_id": source,
		"created_at": sp.CreatedAt.UTC().Format(webhookTime)}
}

// emitSuppression writes the event typ of an entry in the change's
// transaction; the events of one entry are delivered in order.
func emitSuppression(ctx context.Context, tx pgx.Tx, typ string, sp Suppression) error {
	_, err := emitEvent(ctx, tx, sp.TeamID, typ, sp.ID.String(), SuppressionPayload(sp))
	return err
}

func scanSuppression(row pgx.Row) (Suppression, error) {
	var s Suppression
	err := row.Scan(&s.ID, &s.TeamID, &s.Email, &s.Reason, &s.EmailID, &s.CreatedAt)
	return s, mapErr(err)
}

// NormalizeAddress is how the suppression list, and every other per-team
// list of addresses (contacts), compares addresses: lower-cased whole.
func NormalizeAddress(addr string) string { return strings.ToLower(addr) }

// AddSuppression adds an address to the team's list and returns the entry,
// with its suppression.added event in the same transaction. An address
// already listed keeps its first entry, which is returned with created
// false and no event.
func (s *Emails) AddSuppression(ctx context.Context, sp Suppression) (Suppression, bool, error) {
	var got Suppression
	var created bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		got, created, err = addSuppressionEmitting(ctx, tx, sp)
		return err
	})
	if err != nil {
		return Suppression{}, false, err
	}
	return got, created, nil
}

// addSuppressionEmitting is addSuppression with the suppression.added
// event of a new entry.
func addSuppressionEmitting(ctx context.Context, tx pgx.Tx, sp Suppression) (Suppression, bool, error) {
	got, created, err := addSuppression(ctx, tx, sp)
	if err == nil && created {
		err = emitSuppression(ctx, tx, EventSuppressionAdded, got)
	}
	if err != nil {
		return Suppression{}, false, err
	}
	return got, created, nil
}

// AddSuppressionBy adds an address as AddSuppression does and records by
// (an audit entry with its actor and client filled in) as
// suppression.create of the entry, new or already listed, in the same
// transaction.
func (s *Emails) AddSuppressionBy(ctx context.Context, sp Suppression, by audit.Entry) (Suppression, bool, error) {
	got, err := s.AddSuppressionsBy(ctx, []Suppression{sp}, by)
	if err != nil {
		return Suppression{}, false, err
	}
	return got[0].Suppression, got[0].Created, nil
}

// AddedSuppression is an entry AddSuppressionsBy returns: new (Created)
// or already listed.
type AddedSuppression struct {
	Suppression
	Created bool
}

// AddSuppressionsBy adds the entries, in order, in one transaction, as
// AddSuppression does each (an address already listed keeps its entry),
// and records by once per entry as suppression.create, new or already
// listed; a new entry's suppression.added event is written in the same
// transaction.
func (s *Emails) AddSuppressionsBy(ctx context.Context, sps []Suppression, by audit.Entry) ([]AddedSuppression, error) {
	out := make([]AddedSuppression, 0, len(sps))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		for _, sp := range sps {
			got, created, err := addSuppressionEmitting(ctx, tx, sp)
			if err != nil {
				return err
			}
			e := by
			e.TeamID, e.Action, e.TargetType, e.TargetID = &got.TeamID, audit.SuppressionCreate, "suppression", got.ID.String()
			if _, err := appendAudit(ctx, tx, e); err != nil {
				return err
			}
			out = append(out, AddedSuppression{got, created})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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

// GetSuppression returns the team's entry with this id (when id is set)
// or for this address; ErrNotFound when there is none.
func (s *Emails) GetSuppression(ctx context.Context, teamID uuid.UUID, id *uuid.UUID, email string) (Suppression, error) {
	if id == nil {
		return suppressionByEmail(ctx, s.pool, teamID, email)
	}
	return scanSuppression(s.pool.QueryRow(ctx, `SELECT `+suppressionColumns+` FROM suppression
		WHERE team_id = @team AND id = @id`, pgx.NamedArgs{"team": teamID, "id": *id}))
}

// ListSuppressions lists the team's entries, newest first; only those of
// this reason (origin) when reason is not "".
func (s *Emails) ListSuppressions(ctx context.Context, teamID uuid.UUID, reason string, p Page) ([]Suppression, bool, error) {
	q, args := `SELECT `+suppressionColumns+` FROM suppression WHERE team_id = @team`, pgx.NamedArgs{"team": teamID}
	if reason != "" {
		q += ` AND reason = @reason`
		args["reason"] = reason
	}
	return listPage(ctx, s.Store, p, q, args, scanSuppression)
}

// DeleteSuppression removes the team's entry with this id (when id is set)
// or for this address, and returns it. ErrNotFound when there is none. It
// records by (an audit entry with its actor and client filled in) as
// suppression.delete of the entry, and its suppression.removed event, in
// the same transaction.
func (s *Emails) DeleteSuppression(ctx context.Context, teamID uuid.UUID, id *uuid.UUID, email string, by audit.Entry) (Suppression, error) {
	var ids []uuid.UUID
	var emails []string
	if id != nil {
		ids = []uuid.UUID{*id}
	} else {
		emails = []string{email}
	}
	got, err := s.DeleteSuppressionsBy(ctx, teamID, ids, emails, by)
	if err != nil {
		return Suppression{}, err
	}
	if len(got) == 0 {
		return Suppression{}, ErrNotFound
	}
	return got[0], nil
}

// DeleteSuppressionsBy removes, in one transaction, the team's entries
// with these ids and those for these addresses, and returns those it
// removed, oldest first (what the team has no entry for is left out). It
// records by once per entry as suppression.delete, and the entry's
// suppression.removed event, in the same transaction.
func (s *Emails) DeleteSuppressionsBy(ctx context.Context, teamID uuid.UUID, ids []uuid.UUID, emails []string,
	by audit.Entry) ([]Suppression, error) {
	lower := make([]string, len(emails))
	for i, e := range emails {
		lower[i] = NormalizeAddress(e)
	}
	if ids == nil {
		ids = []uuid.UUID{}
	}
	var out []Suppression
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM suppression
			WHERE team_id = @team AND (id = ANY(@ids) OR email = ANY(@emails))
			RETURNING `+suppressionColumns, pgx.NamedArgs{"team": teamID, "ids": ids, "emails": lower})
		if err != nil {
			return mapErr(err)
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Suppression, error) { return scanSuppression(r) })
		if err != nil {
			return fmt.Errorf("removing suppressions: %w", mapErr(err))
		}
		slices.SortFunc(out, func(a, b Suppression) int { return strings.Compare(a.ID.String(), b.ID.String()) })
		for _, sp := range out {
			e := by
			e.TeamID, e.Action, e.TargetType, e.TargetID = &sp.TeamID, audit.SuppressionDelete, "suppression", sp.ID.String()
			if _, err := appendAudit(ctx, tx, e); err != nil {
				return err
			}
			if err := emitSuppression(ctx, tx, EventSuppressionRemoved, sp); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Suppressed returns which of the addresses are on the team's list, keyed
// by lower-cased address.
func (s *Emails) Suppressed(ctx context.Context, teamID uuid.UUID, emails []string) (map[string]bool, error) {
	reasons, err := s.SuppressionReasons(ctx, teamID, emails)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(reasons))
	for e := range reasons {
		out[e] = true
	}
	return out, nil
}

// SuppressionReasons is Suppressed with the reason (Suppression*) each
// suppressed address is on the list for.
func (s *Emails) SuppressionReasons(ctx context.Context, teamID uuid.UUID, emails []string) (map[string]string, error) {
	lower := make([]string, len(emails))
	for i, e := range emails {
		lower[i] = NormalizeAddress(e)
	}
	rows, err := s.pool.Query(ctx, `SELECT email, reason FROM suppression WHERE team_id = @team AND email = ANY(@emails)`,
		pgx.NamedArgs{"team": teamID, "emails": lower})
	if err != nil {
		return nil, mapErr(err)
	}
	out := map[string]string{}
	var email, reason string
	if _, err := pgx.ForEachRow(rows, []any{&email, &reason}, func() error {
		out[email] = reason
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading suppressions: %w", mapErr(err))
	}
	return out, nil
}
