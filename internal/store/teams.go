package store

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/audit"
)

// Team owns keys, domains and emails.
type Team struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
}

// User is a dashboard user.
type User struct {
	ID           uuid.UUID
	Email        string
	Name         string // optional display name
	PasswordHash string
	CreatedAt    time.Time
	// EmailVerifiedAt is when the address was proven to be the user's (an
	// emailed link was used, an identity provider vouched for it, or the
	// operator created the user); nil while it is unproven. OAuth sign-in
	// never enters an account whose address is unproven.
	EmailVerifiedAt *time.Time
}

// Permission of an API key.
const (
	PermissionFullAccess    = "full_access"
	PermissionSendingAccess = "sending_access"
)

// APIKey is a stored key. Only the hash of its token is kept.
type APIKey struct {
	ID         uuid.UUID
	TeamID     uuid.UUID
	Name       string
	Prefix     string
	Hash       []byte
	Permission string
	DomainID   *uuid.UUID
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	// AllowedIPs are the client address ranges the key may be used from,
	// as masked prefixes; empty: any address.
	AllowedIPs []netip.Prefix
	// CreatedBy is the user the key was made by: the dashboard user, the
	// creator of the key that made it through the API, the team's first
	// owner for `posthaste admin` and the bootstrap key. Nil only when
	// that user was deleted.
	CreatedBy *uuid.UUID
	// TeamRateLimit is the team's own request rate; 0 for the default.
	// Filled by UseAPIKey only.
	TeamRateLimit int
	// ByOwner reports whether CreatedBy owns the team now. Filled by
	// UseAPIKey only.
	ByOwner bool
}

// CreateTeam inserts a team.
func (s *Accounts) CreateTeam(ctx context.Context, t Team) error {
	_, err := s.pool.Exec(ctx,
		`INSERT INTO team (id, name) VALUES (@id, @name)`,
		pgx.NamedArgs{"id": t.ID, "name": t.Name})
	return mapErr(err)
}

// CreateUser inserts a user with a lower-cased email (and its
// EmailVerifiedAt). ErrConflict when the email is taken.
func (s *Accounts) CreateUser(ctx context.Context, u User) error {
	_, err := s.pool.Exec(ctx,
		`INSERT INTO app_user (id, email, name, password_hash, email_verified_at) VALUES (@id, @email, @name, @hash, @verified)`,
		pgx.NamedArgs{"id": u.ID, "email": strings.ToLower(u.Email), "name": u.Name, "hash": u.PasswordHash,
			"verified": u.EmailVerifiedAt})
	return mapErr(err)
}

const userColumns = `id, email, name, coalesce(password_hash, ''), created_at, email_verified_at`

// fields are the scan targets of userColumns.
func (u *User) fields() []any {
	return []any{&u.ID, &u.Email, &u.Name, &u.PasswordHash, &u.CreatedAt, &u.EmailVerifiedAt}
}

// UserByEmail finds a user by email, case-insensitively.
func (s *Accounts) UserByEmail(ctx context.Context, email string) (User, error) {
	var u User
	err := s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM app_user WHERE email = @email`,
		pgx.NamedArgs{"email": strings.ToLower(email)}).Scan(u.fields()...)
	return u, mapErr(err)
}

// UserByID finds a user by id. ErrNotFound when there is none.
func (s *Accounts) UserByID(ctx context.Context, id uuid.UUID) (User, error) {
	var u User
	err := s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM app_user WHERE id = @id`,
		pgx.NamedArgs{"id": id}).Scan(u.fields()...)
	return u, mapErr(err)
}

// VerifyUserEmail records that the user's address is proven, keeping the
// first time it was. ErrNotFound when there is no such user.
func (s *Accounts) VerifyUserEmail(ctx context.Context, id uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `UPDATE app_user SET email_verified_at = coalesce(email_verified_at, now()) WHERE id = @id`,
		pgx.NamedArgs{"id": id})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// AddMember makes a user a member of a team; adding twice keeps the first role.
func (s *Accounts) AddMember(ctx context.Context, teamID, userID uuid.UUID, role string) error {
	_, err := s.pool.Exec(ctx,
		`INSERT INTO membership (team_id, user_id, role) VALUES (@team, @user, @role)
		 ON CONFLICT (team_id, user_id) DO NOTHING`,
		pgx.NamedArgs{"team": teamID, "user": userID, "role": role})
	return mapErr(err)
}

// TeamMembers returns which of the given addresses belong to members of the
// team, keyed by lower-cased address.
func (s *Accounts) TeamMembers(ctx context.Context, teamID uuid.UUID, emails []string) (map[string]bool, error) {
	lower := make([]string, len(emails))
	for i, e := range emails {
		lower[i] = strings.ToLower(e)
	}
	rows, err := s.pool.Query(ctx,
		`SELECT u.email FROM app_user u JOIN membership m ON m.user_id = u.id
		 WHERE m.team_id = @team AND u.email = ANY(@emails)`,
		pgx.NamedArgs{"team": teamID, "emails": lower})
	if err != nil {
		return nil, mapErr(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(err)
	}
	out := make(map[string]bool, len(found))
	for _, e := range found {
		out[e] = true
	}
	return out, nil
}

// CreateAPIKey inserts a key made by k.CreatedBy. This is where the rule
// "full_access keys only by owners" is kept, in the insert itself so that
// no role change slips between check and write: a full_access key needs
// a CreatedBy who owns the team, any other key one who is a member
// (or none, for keys no user made). ErrOwnersOnly otherwise.
func (s *Accounts) CreateAPIKey(ctx context.Context, k APIKey) error {
	return s.CreateAPIKeyBy(ctx, k, audit.Entry{})
}

// CreateAPIKeyBy is CreateAPIKey that also appends by, the audit entry of
// the creation, in its transaction.
func (s *Accounts) CreateAPIKeyBy(ctx context.Context, k APIKey, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		return s.createAPIKey(ctx, tx, k)
	})
}

func (s *Accounts) createAPIKey(ctx context.Context, tx pgx.Tx, k APIKey) error {
	tag, err := tx.Exec(ctx,
		`INSERT INTO api_key (id, team_id, name, prefix, hash, permission, domain_id, allowed_ips, created_by)
		 SELECT @id::uuid, @team::uuid, @name::text, @prefix::text, @hash::bytea, @permission::text,
		 	@domain::uuid, @allowed::cidr[], @by::uuid
		 WHERE CASE WHEN @permission::text = 'full_access' THEN EXISTS (SELECT 1 FROM membership
		 		WHERE team_id = @team::uuid AND user_id = @by::uuid AND role = 'owner')
		 	WHEN @by::uuid IS NULL THEN true
		 	ELSE EXISTS (SELECT 1 FROM membership WHERE team_id = @team::uuid AND user_id = @by::uuid) END`,
		pgx.NamedArgs{"id": k.ID, "team": k.TeamID, "name": k.Name, "prefix": k.Prefix,
			"hash": k.Hash, "permission": k.Permission, "domain": k.DomainID, "allowed": allowedIPs(k.AllowedIPs),
			"by": k.CreatedBy})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrOwnersOnly
	}
	return nil
}

// FirstOwner returns the team's earliest owner, who holds the keys no
// user made (`posthaste admin`). ErrNotFound when the team has none.
func (s *Accounts) FirstOwner(ctx context.Context, teamID uuid.UUID) (uuid.UUID, error) {
	var id uuid.UUID
	err := s.pool.QueryRow(ctx, `SELECT user_id FROM membership WHERE team_id = @team AND role = 'owner'
		ORDER BY created_at, user_id LIMIT 1`, pgx.NamedArgs{"team": teamID}).Scan(&id)
	return id, mapErr(err)
}

// allowedIPs is the allowed_ips value of prefixes: never NULL.
func allowedIPs(p []netip.Prefix) []netip.Prefix {
	if p == nil {
		return []netip.Prefix{}
	}
	return p
}

const apiKeyColumns = `id, team_id, name, prefix, hash, permission, domain_id, created_at, last_used_at, revoked_at, allowed_ips, created_by`

func scanAPIKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.ID, &k.TeamID, &k.Name, &k.Prefix, &k.Hash, &k.Permission, &k.DomainID,
		&k.CreatedAt, &k.LastUsedAt, &k.RevokedAt, &k.AllowedIPs, &k.CreatedBy)
	return k, mapErr(err)
}

// UseAPIKey finds the live (not revoked) key with this token hash and marks
// it used. ErrNotFound for unknown or revoked keys.
// It also returns the team's own rate limit (TeamRateLimit) and whether
// the key's creator owns the team now (ByOwner).
func (s *Accounts) UseAPIKey(ctx context.Context, hash []byte) (APIKey, error) {
	var k APIKey
	var limit *int
	err := s.pool.QueryRow(ctx,
		`UPDATE api_key k SET last_used_at = now() FROM team t
		 WHERE k.hash = @hash AND k.revoked_at IS NULL AND t.id = k.team_id
		 RETURNING k.id, k.team_id, k.name, k.prefix, k.hash, k.permission, k.domain_id,
		 	k.created_at, k.last_used_at, k.revoked_at, k.allowed_ips, t.rate_limit, k.created_by,
		 	EXISTS (SELECT 1 FROM membership m WHERE m.team_id = k.team_id AND m.user_id = k.created_by
		 		AND m.role = 'owner')`,
		pgx.NamedArgs{"hash": hash}).Scan(&k.ID, &k.TeamID, &k.Name, &k.Prefix, &k.Hash, &k.Permission,
		&k.DomainID, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt, &k.AllowedIPs, &limit, &k.CreatedBy, &k.ByOwner)
	if limit != nil {
		k.TeamRateLimit = *limit
	}
	return k, mapErr(err)
}

// ListAPIKeys lists the team's live keys, newest first.
func (s *Accounts) ListAPIKeys(ctx context.Context, teamID uuid.UUID, p Page) ([]APIKey, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+apiKeyColumns+` FROM api_key
		WHERE team_id = @team AND revoked_at IS NULL`, pgx.NamedArgs{"team": teamID}, scanAPIKey)
}

// RevokeAPIKey revokes a live key of the team and returns its hash.
// ErrNotFound when the team has no such live key.
func (s *Accounts) RevokeAPIKey(ctx context.Context, teamID, id uuid.UUID) ([]byte, error) {
	return s.RevokeAPIKeyBy(ctx, teamID, id, audit.Entry{})
}

// RenameAPIKeyBy renames a live key of the team and writes the audit
// entry by in the same transaction. ErrNotFound when the team has no such
// live key (nothing is written then).
func (s *Accounts) RenameAPIKeyBy(ctx context.Context, teamID, id uuid.UUID, name string, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		var got uuid.UUID
		return tx.QueryRow(ctx, `UPDATE api_key SET name = @name
			 WHERE id = @id AND team_id = @team AND revoked_at IS NULL RETURNING id`,
			pgx.NamedArgs{"id": id, "team": teamID, "name": name}).Scan(&got)
	})
}

// RevokeAPIKeyBy is RevokeAPIKey that also appends by, the audit entry of
// the revocation, in its transaction.
func (s *Accounts) RevokeAPIKeyBy(ctx context.Context, teamID, id uuid.UUID, by audit.Entry) ([]byte, error) {
	var hash []byte
	err := s.audited(ctx, by, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx,
			`UPDATE api_key SET revoked_at = now()
			 WHERE id = @id AND team_id = @team AND revoked_at IS NULL RETURNING hash`,
			pgx.NamedArgs{"id": id, "team": teamID}).Scan(&hash)
	})
	if err != nil {
		return nil, err
	}
	return hash, nil
}
