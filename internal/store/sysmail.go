package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Kinds of SystemMail.
const (
	SystemMailInvitation    = "invitation"
	SystemMailPasswordReset = "password_reset"
)

// Errors of ReserveSystemMail.
var (
	// ErrTeamMailLimit: the team sent its most invitation emails for now.
	ErrTeamMailLimit = errors.New("team invitation email limit reached")
	// ErrAddressMailLimit: the address got its most system emails for now.
	ErrAddressMailLimit = errors.New("address system email limit reached")
)

// SystemMail is one email the dashboard sends through the system mailer:
// an invitation from a team, or a password-reset link.
type SystemMail struct {
	Kind   string    // SystemMailInvitation or SystemMailPasswordReset
	TeamID uuid.UUID // the inviting team; uuid.Nil for a password reset
	Email  string
}

// SystemMailLimits bound the system emails sent within a sliding window.
// A limit of 0 or less does not limit.
type SystemMailLimits struct {
	Window time.Duration
	// PerTeam is how many invitation emails one team sends.
	PerTeam int
	// PerAddress is how many system emails, of every kind and from every
	// team, one address receives.
	PerAddress int
}

// ReserveSystemMail records that m is sent at now, unless that would take
// its team or its address past lim within the window that ends at now: then
// it records nothing and returns ErrTeamMailLimit or ErrAddressMailLimit.
// The counts live in PostgreSQL, so every process shares them; concurrent
// reservations for the same team or address serialise on advisory locks
// (team first, then address, so they cannot deadlock).
func (s *Emails) ReserveSystemMail(ctx context.Context, m SystemMail, lim SystemMailLimits, now time.Time) error {
	email := strings.ToLower(m.Email)
	var team *uuid.UUID
	if m.TeamID != uuid.Nil {
		team = &m.TeamID
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		args := pgx.NamedArgs{"kind": m.Kind, "team": team, "email": email, "now": now, "since": now.Add(-lim.Window)}
		if team != nil {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('system_mail team ' || @team::text, 0))`,
				args); err != nil {
				return fmt.Errorf("locking the team's system email count: %w", mapErr(err))
			}
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('system_mail address ' || @email::text, 0))`,
			args); err != nil {
			return fmt.Errorf("locking the address's system email count: %w", mapErr(err))
		}
		var byTeam, byAddress int
		err := tx.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM system_mail WHERE team_id = @team AND kind = 'invitation'
					AND created_at > @since AND created_at <= @now),
				(SELECT count(*) FROM system_mail WHERE email = @email AND created_at > @since AND created_at <= @now)`,
			args).Scan(&byTeam, &byAddress)
		if err != nil {
			return fmt.Errorf("counting system emails: %w", mapErr(err))
		}
		switch {
		case team != nil && m.Kind == SystemMailInvitation && lim.PerTeam > 0 && byTeam >= lim.PerTeam:
			return ErrTeamMailLimit
		case lim.PerAddress > 0 && byAddress >= lim.PerAddress:
			return ErrAddressMailLimit
		}
		if _, err := tx.Exec(ctx, `INSERT INTO system_mail (kind, team_id, email, created_at) VALUES (@kind, @team, @email, @now)`,
			args); err != nil {
			return fmt.Errorf("recording a system email: %w", mapErr(err))
		}
		return nil
	})
}
