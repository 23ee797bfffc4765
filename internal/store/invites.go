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

// SystemTeamID is Posthaste's own team (migration 00008). It has no members,
// so nobody reads its email log: the system mailer sends the emails that
// carry secret links (invitations, password resets) from the sandbox sender
// as this team.
var SystemTeamID = uuid.MustParse("00000000-0000-0000-0000-000000000001")

// Invitation is an invitation to join a team. Only the hash of its token is
// stored.
type Invitation struct {
	ID        uuid.UUID
	TeamID    uuid.UUID
	Email     string // lower case
	Role      string // "owner" or "member"
	InvitedBy *uuid.UUID
	CreatedAt time.Time
	ExpiresAt time.Time
	// EmailedAt is when the link was emailed to the address; nil when it
	// was shown to the inviting owner instead. Only an emailed link proves
	// that whoever uses it controls the address.
	EmailedAt *time.Time
	TeamName  string // filled by InvitationByToken
}

const invitationColumns = `id, team_id, email, role, invited_by, created_at, expires_at, emailed_at`

// fields are the scan targets of invitationColumns.
func (i *Invitation) fields() []any {
	return []any{&i.ID, &i.TeamID, &i.Email, &i.Role, &i.InvitedBy, &i.CreatedAt, &i.ExpiresAt, &i.EmailedAt}
}

// Invite stores an invitation with the hash of its token, or, when the team
// already invited the address, gives that invitation the new token, role,
// inviter and expiry (the old link stops working). It returns the stored
// invitation, whose ID is the first invitation's. The new link counts as
// not emailed (inv.EmailedAt is ignored) until MarkInvitationEmailed. by
// gives the audit entry of the invitation as stored; it is appended in the
// same transaction (nil: none).
func (s *Accounts) Invite(ctx context.Context, inv Invitation, tokenHash []byte,
	by func(Invitation) (audit.Entry, error)) (Invitation, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO invitation AS i (id, team_id, email, role, token_hash, invited_by, expires_at)
		VALUES (@id, @team, @email, @role, @hash, @by, @expires)
		ON CONFLICT (team_id, email) DO UPDATE SET role = excluded.role, token_hash = excluded.token_hash,
			invited_by = excluded.invited_by, created_at = now(), expires_at = excluded.expires_at, emailed_at = NULL
		RETURNING i.id, i.created_at`,
			pgx.NamedArgs{"id": inv.ID, "team": inv.TeamID, "email": strings.ToLower(inv.Email), "role": inv.Role,
				"hash": tokenHash, "by": inv.InvitedBy, "expires": inv.ExpiresAt}).Scan(&inv.ID, &inv.CreatedAt)
		if err != nil {
			return err
		}
		inv.Email = strings.ToLower(inv.Email)
		inv.EmailedAt = nil
		return appendAuditFrom(ctx, tx, by, inv)
	})
	if err != nil {
		return Invitation{}, err
	}
	return inv, nil
}

// MarkInvitationEmailed records that the link with this token hash was
// emailed to the invited address, so that using it proves the address. An
// invitation whose token was replaced meanwhile is left as it is.
func (s *Accounts) MarkInvitationEmailed(ctx context.Context, tokenHash []byte) error {
	_, err := s.pool.Exec(ctx, `UPDATE invitation SET emailed_at = now() WHERE token_hash = @hash`,
		pgx.NamedArgs{"hash": tokenHash})
	return mapErr(err)
}

// Invitations lists a team's invitations, expired ones included, newest
// first.
func (s *Accounts) Invitations(ctx context.Context, teamID uuid.UUID) ([]Invitation, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+invitationColumns+`
		FROM invitation WHERE team_id = @team ORDER BY created_at DESC, email`, pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Invitation, error) {
		var i Invitation
		err := r.Scan(i.fields()...)
		return i, err
	})
	return out, mapErr(err)
}

// RevokeInvitation deletes one of the team's invitations. ErrNotFound when
// the team has no such invitation. by, the audit entry of the change, is
// appended in the same transaction.
func (s *Accounts) RevokeInvitation(ctx context.Context, teamID, id uuid.UUID, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM invitation WHERE id = @id AND team_id = @team`,
			pgx.NamedArgs{"id": id, "team": teamID})
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// InvitationByToken returns the live invitation with this token hash and
// its team's name. ErrNotFound when unknown, used, revoked or expired.
func (s *Accounts) InvitationByToken(ctx context.Context, tokenHash []byte) (Invitation, error) {
	var i Invitation
	err := s.pool.QueryRow(ctx, `SELECT `+invitationColumns+`, (SELECT name FROM team WHERE id = team_id)
		FROM invitation WHERE token_hash = @hash AND expires_at > now()`, pgx.NamedArgs{"hash": tokenHash}).
		Scan(append(i.fields(), &i.TeamName)...)
	return i, mapErr(err)
}

// AcceptInvitation spends the live invitation with this token hash and
// makes the user, who must have the invited address, a member of its team
// (a member already keeps their role). An emailed invitation also proves the
// user's address: they hold both the account and the emailed link.
// ErrNotFound when the invitation is not live or is for another address.
// by gives the audit entry of the accepted invitation; it is appended in
// the same transaction (nil: none).
func (s *Accounts) AcceptInvitation(ctx context.Context, tokenHash []byte, userID uuid.UUID,
	by func(Invitation) (audit.Entry, error)) (Invitation, error) {
	return s.acceptInvitation(ctx, tokenHash, by, func(tx pgx.Tx, inv Invitation) (uuid.UUID, error) {
		var email string
		err := tx.QueryRow(ctx, `SELECT email FROM app_user WHERE id = @user FOR UPDATE`, pgx.NamedArgs{"user": userID}).Scan(&email)
		if err != nil {
			return uuid.Nil, err
		}
		if email != inv.Email {
			return uuid.Nil, fmt.Errorf("%w: the invitation is for another address", ErrNotFound)
		}
		if inv.EmailedAt != nil {
			if _, err := tx.Exec(ctx, `UPDATE app_user SET email_verified_at = coalesce(email_verified_at, now()) WHERE id = @user`,
				pgx.NamedArgs{"user": userID}); err != nil {
				return uuid.Nil, err
			}
		}
		return userID, nil
	})
}

// AcceptInvitationAsNewUser spends the live invitation with this token hash
// and creates its user (u's ID, name and password hash, the invited
// address) as a member of its team. The user's address counts as proven
// only when the invitation was emailed (Invitation.EmailedAt); a link shown
// to the inviting owner proves nothing. ErrNotFound when the invitation is
// not live; ErrConflict when a user with that address exists. by gives
// the audit entry of the accepted invitation; it is appended in the same
// transaction (nil: none).
func (s *Accounts) AcceptInvitationAsNewUser(ctx context.Context, tokenHash []byte, u User,
	by func(Invitation) (audit.Entry, error)) (Invitation, error) {
	return s.acceptInvitation(ctx, tokenHash, by, func(tx pgx.Tx, inv Invitation) (uuid.UUID, error) {
		_, err := tx.Exec(ctx, `INSERT INTO app_user (id, email, name, password_hash, email_verified_at)
			VALUES (@id, @email, @name, @hash, CASE WHEN @emailed::boolean THEN now() END)`,
			pgx.NamedArgs{"id": u.ID, "email": inv.Email, "name": u.Name, "hash": u.PasswordHash, "emailed": inv.EmailedAt != nil})
		return u.ID, err
	})
}

// acceptInvitation deletes the live invitation and adds the user that
// member returns to its team, with the audit entry by gives, in one
// transaction.
func (s *Accounts) acceptInvitation(ctx context.Context, tokenHash []byte, by func(Invitation) (audit.Entry, error),
	member func(pgx.Tx, Invitation) (uuid.UUID, error)) (Invitation, error) {
	var inv Invitation
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `DELETE FROM invitation WHERE token_hash = @hash AND expires_at > now()
			RETURNING `+invitationColumns, pgx.NamedArgs{"hash": tokenHash}).Scan(inv.fields()...)
		if err != nil {
			return err
		}
		userID, err := member(tx, inv)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO membership (team_id, user_id, role) VALUES (@team, @user, @role)
			ON CONFLICT (team_id, user_id) DO NOTHING`,
			pgx.NamedArgs{"team": inv.TeamID, "user": userID, "role": inv.Role})
		if err != nil {
			return err
		}
		return appendAuditFrom(ctx, tx, by, inv)
	})
	return inv, err
}

// SetSessionTeam moves a session to another team of its user. ErrNotFound
// when the user is not a member of that team.
func (s *Accounts) SetSessionTeam(ctx context.Context, hash []byte, teamID uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `UPDATE dashboard_session s SET team_id = @team
		WHERE s.id_hash = @hash AND EXISTS (SELECT 1 FROM membership m WHERE m.team_id = @team AND m.user_id = s.user_id)`,
		pgx.NamedArgs{"hash": hash, "team": teamID})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// RequestPasswordReset stores the hash of a user's password-reset token,
// replacing any earlier one, which stops working.
func (s *Accounts) RequestPasswordReset(ctx context.Context, userID uuid.UUID, tokenHash []byte, expires time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO password_reset (user_id, token_hash, expires_at) VALUES (@user, @hash, @expires)
		ON CONFLICT (user_id) DO UPDATE SET token_hash = excluded.token_hash, created_at = now(), expires_at = excluded.expires_at`,
		pgx.NamedArgs{"user": userID, "hash": tokenHash, "expires": expires})
	return mapErr(err)
}

// PasswordResetUser returns the user of a live password-reset token.
// ErrNotFound when it is unknown, used, replaced or expired.
func (s *Accounts) PasswordResetUser(ctx context.Context, tokenHash []byte) (uuid.UUID, error) {
	var id uuid.UUID
	err := s.pool.QueryRow(ctx, `SELECT user_id FROM password_reset WHERE token_hash = @hash AND expires_at > now()`,
		pgx.NamedArgs{"hash": tokenHash}).Scan(&id)
	return id, mapErr(err)
}

// PasswordReset is what ResetPassword did.
type PasswordReset struct {
	UserID uuid.UUID
	// ProvedAddress means the user's address was unproven until this
	// reset: whoever set the old password and second factor may not have
	// controlled it, so the second factor was removed too.
	ProvedAddress bool
}

// ResetPassword spends a live password-reset token: it sets the user's
// password hash, ends every session of the user and marks the address
// proven (the link was emailed to it), in one transaction. The second
// factor is kept when the address was already proven and removed, with its
// recovery codes, when it was not (PasswordReset.ProvedAddress): the
// address's owner takes over an account someone else may have set up.
// ErrNotFound when the token is not live. by gives the audit entry of the
// reset; it is appended in the same transaction (nil: none).
func (s *Accounts) ResetPassword(ctx context.Context, tokenHash []byte, passwordHash string,
	by func(PasswordReset) (audit.Entry, error)) (PasswordReset, error) {
	var pr PasswordReset
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `DELETE FROM password_reset WHERE token_hash = @hash AND expires_at > now() RETURNING user_id`,
			pgx.NamedArgs{"hash": tokenHash}).Scan(&pr.UserID)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `SELECT email_verified_at IS NULL FROM app_user WHERE id = @user FOR UPDATE`,
			pgx.NamedArgs{"user": pr.UserID}).Scan(&pr.ProvedAddress)
		if err != nil {
			return fmt.Errorf("reading the user: %w", mapErr(err))
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE app_user SET password_hash = @hash, email_verified_at = coalesce(email_verified_at, now()) WHERE id = @user`,
			pgx.NamedArgs{"user": pr.UserID, "hash": passwordHash})
		b.Queue(`DELETE FROM dashboard_session WHERE user_id = @user`, pgx.NamedArgs{"user": pr.UserID})
		if pr.ProvedAddress {
			b.Queue(`UPDATE app_user SET totp_secret = NULL, totp_enabled_at = NULL WHERE id = @user`, pgx.NamedArgs{"user": pr.UserID})
			b.Queue(`DELETE FROM recovery_code WHERE user_id = @user`, pgx.NamedArgs{"user": pr.UserID})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("resetting the password: %w", mapErr(err))
		}
		return appendAuditFrom(ctx, tx, by, pr)
	})
	return pr, err
}
