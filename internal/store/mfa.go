package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// MFA is a user's second factor.
type MFA struct {
	SealedSecret []byte     // nil when never set up
	EnabledAt    *time.Time // nil until the user confirmed a code
	TeamRequires bool       // the session's team requires a second factor
}

// UserMFA reads a user's second factor and whether the team requires one.
func (s *Sessions) UserMFA(ctx context.Context, userID, teamID uuid.UUID) (MFA, error) {
	var m MFA
	err := s.pool.QueryRow(ctx, `SELECT u.totp_secret, u.totp_enabled_at, t.mfa_required
		FROM app_user u, team t WHERE u.id = @user AND t.id = @team`,
		pgx.NamedArgs{"user": userID, "team": teamID}).Scan(&m.SealedSecret, &m.EnabledAt, &m.TeamRequires)
	return m, mapErr(err)
}

// StartTOTP stores a new, not yet confirmed secret, replacing an
// unconfirmed one. ErrConflict when a confirmed one exists.
func (s *Sessions) StartTOTP(ctx context.Context, userID uuid.UUID, sealed []byte) error {
	tag, err := s.pool.Exec(ctx, `UPDATE app_user SET totp_secret = @secret, totp_last_step = NULL
		WHERE id = @user AND totp_enabled_at IS NULL`, pgx.NamedArgs{"user": userID, "secret": sealed})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrConflict
	}
	return nil
}

// EnableTOTP confirms the secret and replaces the recovery codes, in one
// transaction that also appends by, the audit entry of the change (none
// when zero).
func (s *Sessions) EnableTOTP(ctx context.Context, userID uuid.UUID, codeHashes [][]byte, by audit.Entry) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE app_user SET totp_enabled_at = now() WHERE id = @user AND totp_secret IS NOT NULL`,
		pgx.NamedArgs{"user": userID})
	b.Queue(`DELETE FROM recovery_code WHERE user_id = @user`, pgx.NamedArgs{"user": userID})
	b.Queue(`INSERT INTO recovery_code (user_id, code_hash) SELECT @user, unnest(@codes::bytea[])`,
		pgx.NamedArgs{"user": userID, "codes": codeHashes})
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		if err := sendBatch(ctx, tx, b); err != nil {
			return fmt.Errorf("enabling totp: %w", mapErr(err))
		}
		return nil
	})
}

// DisableTOTP removes the second factor and its recovery codes, appending
// by, the audit entry of the change, in the same transaction.
func (s *Sessions) DisableTOTP(ctx context.Context, userID uuid.UUID, by audit.Entry) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE app_user SET totp_secret = NULL, totp_enabled_at = NULL, totp_last_step = NULL WHERE id = @user`,
		pgx.NamedArgs{"user": userID})
	b.Queue(`DELETE FROM recovery_code WHERE user_id = @user`, pgx.NamedArgs{"user": userID})
	return s.audited(ctx, by, func(tx pgx.Tx) error { return sendBatch(ctx, tx, b) })
}

// UseTOTPStep records that a TOTP code of time step step (RFC 6238 §4.2)
// was accepted for the user; false when a code of this step or a later one
// already was: RFC 6238 §5.2, a code is accepted once. Concurrent uses of
// one step are decided by the row lock: one wins.
func (s *Sessions) UseTOTPStep(ctx context.Context, userID uuid.UUID, step int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE app_user SET totp_last_step = @step
		WHERE id = @user AND totp_secret IS NOT NULL AND (totp_last_step IS NULL OR totp_last_step < @step)`,
		pgx.NamedArgs{"user": userID, "step": step})
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

// UseRecoveryCode spends an unused recovery code; false when there is none.
func (s *Sessions) UseRecoveryCode(ctx context.Context, userID uuid.UUID, codeHash []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE recovery_code SET used_at = now()
		WHERE user_id = @user AND code_hash = @hash AND used_at IS NULL`,
		pgx.NamedArgs{"user": userID, "hash": codeHash})
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

// SetTeamMFARequired turns the team's second-factor requirement on or off,
// appending by, the audit entry of the change, in the same transaction.
func (s *Sessions) SetTeamMFARequired(ctx context.Context, teamID uuid.UUID, required bool, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE team SET mfa_required = @req WHERE id = @team`,
			pgx.NamedArgs{"team": teamID, "req": required})
		return err
	})
}

// CompleteMFA marks a session waiting for its second factor as having
// passed it, under a new id (the hash of a new cookie value) and until
// expires. ErrNotFound when no such session waits.
func (s *Sessions) CompleteMFA(ctx context.Context, hash, newHash []byte, expires time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE dashboard_session SET mfa_pending = false, id_hash = @new, expires_at = @expires
		WHERE id_hash = @hash AND mfa_pending AND expires_at > now()`,
		pgx.NamedArgs{"hash": hash, "new": newHash, "expires": expires})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// HasSealedSecrets reports whether anything sealed with the master key is
// stored: DKIM keys of domains, TOTP secrets, teams' data keys (which
// seal mail content) or subject keys (which encrypt addresses in Temporal
// histories).
func (s *Sessions) HasSealedSecrets(ctx context.Context) (bool, error) {
	var has bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM domain) OR EXISTS (SELECT 1 FROM app_user WHERE totp_secret IS NOT NULL)
		OR EXISTS (SELECT 1 FROM team_data_key) OR EXISTS (SELECT 1 FROM subject_key)`).Scan(&has)
	return has, mapErr(err)
}

// MemberRole returns the user's role in the team ("owner" or "member").
func (s *Sessions) MemberRole(ctx context.Context, teamID, userID uuid.UUID) (string, error) {
	var role string
	err := s.pool.QueryRow(ctx, `SELECT role FROM membership WHERE team_id = @team AND user_id = @user`,
		pgx.NamedArgs{"team": teamID, "user": userID}).Scan(&role)
	return role, mapErr(err)
}
