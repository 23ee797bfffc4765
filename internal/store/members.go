package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
func (s *Store) Members(ctx context.Context, teamID uuid.UUID) ([]Member, error) {
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

// RemoveMember takes a user out of a team and ends their sessions of it.
// ErrNotFound when the user is not a member; ErrConflict when they are the
// team's last owner.
func (s *Store) RemoveMember(ctx context.Context, teamID, userID uuid.UUID) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rollback after commit is a no-op
	var role string
	err = tx.QueryRow(ctx, `SELECT role FROM membership WHERE team_id = @team AND user_id = @user FOR UPDATE`,
		pgx.NamedArgs{"team": teamID, "user": userID}).Scan(&role)
	if err != nil {
		return mapErr(err)
	}
	if role == "owner" {
		var owners int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM membership WHERE team_id = @team AND role = 'owner'`,
			pgx.NamedArgs{"team": teamID}).Scan(&owners); err != nil {
			return mapErr(err)
		}
		if owners <= 1 {
			return ErrConflict
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM membership WHERE team_id = @team AND user_id = @user`,
		pgx.NamedArgs{"team": teamID, "user": userID}); err != nil {
		return mapErr(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM dashboard_session WHERE team_id = @team AND user_id = @user`,
		pgx.NamedArgs{"team": teamID, "user": userID}); err != nil {
		return mapErr(err)
	}
	return mapErr(tx.Commit(ctx))
}

// SetPassword replaces a user's password hash and ends every other session
// of the user (keep is the hash of the session that made the change).
func (s *Store) SetPassword(ctx context.Context, userID uuid.UUID, hash string, keep []byte) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE app_user SET password_hash = @hash WHERE id = @user`, pgx.NamedArgs{"user": userID, "hash": hash})
	b.Queue(`DELETE FROM dashboard_session WHERE user_id = @user AND id_hash <> @keep`,
		pgx.NamedArgs{"user": userID, "keep": keep})
	return mapErr(s.pool.SendBatch(ctx, b).Close())
}

// UserPasswordHash returns a user's password hash ("" for users who sign
// in only through a provider).
func (s *Store) UserPasswordHash(ctx context.Context, userID uuid.UUID) (string, error) {
	var h string
	err := s.pool.QueryRow(ctx, `SELECT coalesce(password_hash, '') FROM app_user WHERE id = @user`,
		pgx.NamedArgs{"user": userID}).Scan(&h)
	return h, mapErr(err)
}
