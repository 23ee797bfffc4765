package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// Member is a user of a team.
type Member struct {
	UserID   uuid.UUID
	Email    string
	Name     string
	Role     string
	JoinedAt time.Time
}

// Members lists a team's members, owners first.
func (s *Accounts) Members(ctx context.Context, teamID uuid.UUID) ([]Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT u.id, u.email, u.name, m.role, m.created_at
		FROM membership m JOIN app_user u ON u.id = m.user_id
		WHERE m.team_id = @team ORDER BY m.role = 'owner' DESC, u.email`, pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		err := r.Scan(&m.UserID, &m.Email, &m.Name, &m.Role, &m.JoinedAt)
		return m, err
	})
	return out, mapErr(err)
}

// RevokedKey is a key revoked with its creator's membership.
type RevokedKey struct {
	ID   uuid.UUID
	Hash []byte
}

// RemoveMember takes a user out of a team, ends their sessions of it and
// revokes the team's live API keys they created, and writes the audit
// entries of it all (member.remove, and api_key.revoke for each key, with
// reason member_removed), in one transaction. by is the audit entry of the
// action's actor (actor, client address, user agent); its action, target
// and detail are set here. It returns the revoked keys, for the caller to
// drop from its key cache. ErrNotFound when the user is not a member;
// ErrConflict when they are the team's last owner.
func (s *Accounts) RemoveMember(ctx context.Context, teamID, userID uuid.UUID, by audit.Entry) ([]RevokedKey, error) {
	var keys []RevokedKey
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		keys, err = removeMember(ctx, tx, teamID, userID)
		if err != nil {
			return err
		}
		by.TeamID, by.Outcome = &teamID, audit.Success
		e := by
		e.Action, e.TargetType, e.TargetID, e.Detail = audit.MemberRemove, "user", userID.String(), ""
		if _, err := appendAudit(ctx, tx, e); err != nil {
			return fmt.Errorf("removing member %s: %w", userID, mapErr(err))
		}
		detail, err := json.Marshal(map[string]string{"reason": "member_removed", "member": userID.String()})
		if err != nil {
			return err
		}
		for _, k := range keys {
			e := by
			e.Action, e.TargetType, e.TargetID, e.Detail = audit.APIKeyRevoke, "api_key", k.ID.String(), string(detail)
			if _, err := appendAudit(ctx, tx, e); err != nil {
				return fmt.Errorf("removing member %s: %w", userID, mapErr(err))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// removeMember is RemoveMember within tx. It first locks the team's owner
// rows, in one order, so that two owners removing each other at once
// (or leaving) cannot both see another owner left: the second waits for
// the first to commit, then counts the owners that remain.
func removeMember(ctx context.Context, tx pgx.Tx, teamID, userID uuid.UUID) ([]RevokedKey, error) {
	rows, err := tx.Query(ctx, `SELECT user_id FROM membership WHERE team_id = @team AND role = 'owner'
		ORDER BY user_id FOR UPDATE`, pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, mapErr(err)
	}
	owners, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, mapErr(err)
	}
	var role string
	err = tx.QueryRow(ctx, `SELECT role FROM membership WHERE team_id = @team AND user_id = @user FOR UPDATE`,
		pgx.NamedArgs{"team": teamID, "user": userID}).Scan(&role)
	if err != nil {
		return nil, mapErr(err)
	}
	if role == "owner" && len(owners) <= 1 {
		return nil, ErrConflict
	}
	if _, err := tx.Exec(ctx, `DELETE FROM membership WHERE team_id = @team AND user_id = @user`,
		pgx.NamedArgs{"team": teamID, "user": userID}); err != nil {
		return nil, mapErr(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM dashboard_session WHERE team_id = @team AND user_id = @user`,
		pgx.NamedArgs{"team": teamID, "user": userID}); err != nil {
		return nil, mapErr(err)
	}
	rows, err = tx.Query(ctx, `UPDATE api_key SET revoked_at = now()
		WHERE team_id = @team AND created_by = @user AND revoked_at IS NULL RETURNING id, hash`,
		pgx.NamedArgs{"team": teamID, "user": userID})
	if err != nil {
		return nil, mapErr(err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RevokedKey, error) {
		var k RevokedKey
		err := r.Scan(&k.ID, &k.Hash)
		return k, err
	})
	return keys, mapErr(err)
}

// SetPassword replaces a user's password hash and ends every other session
// of the user (keep is the hash of the session that made the change),
// appending by, the audit entry of the change, in the same transaction.
func (s *Accounts) SetPassword(ctx context.Context, userID uuid.UUID, hash string, keep []byte, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		return sendBatch(ctx, tx, setPasswordBatch(userID, hash, keep))
	})
}

func setPasswordBatch(userID uuid.UUID, hash string, keep []byte) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`UPDATE app_user SET password_hash = @hash WHERE id = @user`, pgx.NamedArgs{"user": userID, "hash": hash})
	b.Queue(`DELETE FROM dashboard_session WHERE user_id = @user AND id_hash <> @keep`,
		pgx.NamedArgs{"user": userID, "keep": keep})
	return b
}

// sendBatch sends b in tx and reads every result.
func sendBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
	return tx.SendBatch(ctx, b).Close()
}

// UserPasswordHash returns a user's password hash ("" for users who sign
// in only through a provider).
func (s *Accounts) UserPasswordHash(ctx context.Context, userID uuid.UUID) (string, error) {
	var h string
	err := s.pool.QueryRow(ctx, `SELECT coalesce(password_hash, '') FROM app_user WHERE id = @user`,
		pgx.NamedArgs{"user": userID}).Scan(&h)
	return h, mapErr(err)
}
