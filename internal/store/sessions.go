package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// Session is a signed-in dashboard user acting for one team.
type Session struct {
	IDHash    []byte
	UserID    uuid.UUID
	TeamID    uuid.UUID
	CSRFToken string
	ExpiresAt time.Time
	// MFAPending means the password was right but the second factor is
	// still due; such a session reaches only the second-factor page.
	MFAPending bool
	UserEmail  string // filled by UseSession
	TeamName   string // filled by UseSession
	// ClientAddr and UserAgent describe the client that signed in.
	ClientAddr string
	UserAgent  string
	CreatedAt  time.Time // set by the database
	// LastUsedAt is when a request last used the session, to the minute
	// (see SessionTouchInterval); zero on create means now.
	LastUsedAt time.Time
}

// SessionTouchInterval is how stale a session's last use may get before a
// request refreshes it: a session costs at most one write a minute.
const SessionTouchInterval = time.Minute

// CreateSession stores a session.
func (s *Sessions) CreateSession(ctx context.Context, se Session) error {
	var last *time.Time
	if !se.LastUsedAt.IsZero() {
		last = &se.LastUsedAt
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO dashboard_session (id_hash, user_id, team_id, csrf_token, expires_at, mfa_pending,
			client_addr, user_agent, last_used_at)
		VALUES (@hash, @user, @team, @csrf, @expires, @pending, @addr, @agent, COALESCE(@last::timestamptz, now()))`,
		pgx.NamedArgs{"hash": se.IDHash, "user": se.UserID, "team": se.TeamID, "csrf": se.CSRFToken,
			"expires": se.ExpiresAt, "pending": se.MFAPending, "addr": se.ClientAddr, "agent": se.UserAgent, "last": last})
	return mapErr(err)
}

// UseSession returns the live session of a request at now and records the
// use: a session is live until it expires and while it was used within
// idle of now (idle <= 0: no idle timeout). The last use is written only
// when it is older than SessionTouchInterval, in the same statement.
// ErrNotFound when unknown, expired or idle.
func (s *Sessions) UseSession(ctx context.Context, hash []byte, now time.Time, idle time.Duration) (Session, error) {
	var se Session
	err := s.pool.QueryRow(ctx, `WITH live AS (
			SELECT s.id_hash, s.user_id, s.team_id, s.csrf_token, s.expires_at, s.mfa_pending, s.client_addr, s.user_agent,
				s.created_at, s.last_used_at
			FROM dashboard_session s
			WHERE s.id_hash = @hash AND s.expires_at > @now AND (@idle::float8 <= 0 OR s.last_used_at > @now - make_interval(secs => @idle::float8))
		), touched AS (
			UPDATE dashboard_session d SET last_used_at = @now FROM live
			WHERE d.id_hash = live.id_hash AND d.last_used_at <= @now - make_interval(secs => @touch::float8)
			RETURNING d.last_used_at
		)
		SELECT l.id_hash, l.user_id, l.team_id, l.csrf_token, l.expires_at, l.mfa_pending, l.client_addr, l.user_agent,
			l.created_at, COALESCE((SELECT last_used_at FROM touched), l.last_used_at), u.email, t.name
		FROM live l JOIN app_user u ON u.id = l.user_id JOIN team t ON t.id = l.team_id`,
		pgx.NamedArgs{"hash": hash, "now": now, "idle": idle.Seconds(), "touch": SessionTouchInterval.Seconds()}).
		Scan(&se.IDHash, &se.UserID, &se.TeamID, &se.CSRFToken, &se.ExpiresAt, &se.MFAPending, &se.ClientAddr, &se.UserAgent,
			&se.CreatedAt, &se.LastUsedAt, &se.UserEmail, &se.TeamName)
	return se, mapErr(err)
}

// UserSessions lists a user's live sessions at now (as UseSession counts
// them), most recently used first; second-factor-pending ones included.
func (s *Sessions) UserSessions(ctx context.Context, userID uuid.UUID, now time.Time, idle time.Duration) ([]Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT id_hash, user_id, team_id, expires_at, mfa_pending, client_addr, user_agent,
			created_at, last_used_at
		FROM dashboard_session
		WHERE user_id = @user AND expires_at > @now AND (@idle::float8 <= 0 OR last_used_at > @now - make_interval(secs => @idle::float8))
		ORDER BY last_used_at DESC, created_at DESC, id_hash`,
		pgx.NamedArgs{"user": userID, "now": now, "idle": idle.Seconds()})
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var se Session
		if err := rows.Scan(&se.IDHash, &se.UserID, &se.TeamID, &se.ExpiresAt, &se.MFAPending, &se.ClientAddr, &se.UserAgent,
			&se.CreatedAt, &se.LastUsedAt); err != nil {
			return nil, fmt.Errorf("scan session: %w", err)
		}
		out = append(out, se)
	}
	return out, mapErr(rows.Err())
}

// RevokeUserSession ends one session of a user. ErrNotFound when the user
// has no such session (another user's session is never touched). by, the
// audit entry of the change, is appended in the same transaction.
func (s *Sessions) RevokeUserSession(ctx context.Context, userID uuid.UUID, hash []byte, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM dashboard_session WHERE user_id = @user AND id_hash = @hash`,
			pgx.NamedArgs{"user": userID, "hash": hash})
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// RevokeOtherSessions ends every session of a user but keep; it returns how
// many it ended. by gives the audit entry of the change from that count;
// it is appended in the same transaction (nil: none).
func (s *Sessions) RevokeOtherSessions(ctx context.Context, userID uuid.UUID, keep []byte,
	by func(ended int) (audit.Entry, error)) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM dashboard_session WHERE user_id = @user AND id_hash <> @keep`,
			pgx.NamedArgs{"user": userID, "keep": keep})
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		return appendAuditFrom(ctx, tx, by, n)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// DeleteSession ends one session, appending by, the audit entry of the
// change, in the same transaction.
func (s *Sessions) DeleteSession(ctx context.Context, hash []byte, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM dashboard_session WHERE id_hash = @hash`, pgx.NamedArgs{"hash": hash})
		return err
	})
}

// DeleteUserSessions ends every session of a user (logout everywhere),
// appending by, the audit entry of the change, in the same transaction.
func (s *Sessions) DeleteUserSessions(ctx context.Context, userID uuid.UUID, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM dashboard_session WHERE user_id = @user`, pgx.NamedArgs{"user": userID})
		return err
	})
}

// FirstTeam returns the team a user signs into: the oldest membership.
func (s *Sessions) FirstTeam(ctx context.Context, userID uuid.UUID) (uuid.UUID, error) {
	var id uuid.UUID
	err := s.pool.QueryRow(ctx, `SELECT team_id FROM membership WHERE user_id = @user
		ORDER BY created_at, team_id LIMIT 1`, pgx.NamedArgs{"user": userID}).Scan(&id)
	return id, mapErr(err)
}

// UserTeams lists the teams a user is a member of, in the order they
// joined (the first is the one FirstTeam returns).
func (s *Sessions) UserTeams(ctx context.Context, userID uuid.UUID) ([]Team, error) {
	rows, err := s.pool.Query(ctx, `SELECT t.id, t.name, t.created_at FROM membership m JOIN team t ON t.id = m.team_id
		WHERE m.user_id = @user ORDER BY m.created_at, m.team_id`, pgx.NamedArgs{"user": userID})
	if err != nil {
		return nil, mapErr(err)
	}
	teams, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Team])
	if err != nil {
		return nil, fmt.Errorf("listing teams: %w", mapErr(err))
	}
	return teams, nil
}
