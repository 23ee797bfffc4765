package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Idempotency record states.
const (
	IdempotencyInFlight  = "in_flight"
	IdempotencyCompleted = "completed"
)

// ErrClaimLost means an idempotency claim was no longer held when its
// request tried to complete or renew it (its lease ran out and another
// request took the key over, or the claim was completed or released);
// nothing was written.
var ErrClaimLost = errors.New("idempotency claim lost")

// IdempotencyClaim is one request's hold on an idempotency key. Token
// identifies the holder; only it can complete or release the claim.
type IdempotencyClaim struct {
	TeamID   uuid.UUID
	Key      string
	Endpoint string
	Hash     []byte
	Token    uuid.UUID
}

// IdempotencyRecord is the stored state of a key held by another request.
type IdempotencyRecord struct {
	Endpoint string
	Hash     []byte
	State    string
	Response []byte // set when State is IdempotencyCompleted
}

// ClaimIdempotencyKey claims a key for a request. It returns nil when the
// claim is the caller's (a new key, an expired record, or an in-flight
// claim whose lease ran out), and otherwise the record that holds the key.
// lease bounds how long an unfinished claim blocks the key unless its
// holder renews it (RenewIdempotencyClaim); ttl is the lifetime of the
// record. Leases are measured on the database's clock, so the processes
// sharing a database need not agree on the time.
func (s *Emails) ClaimIdempotencyKey(ctx context.Context, c IdempotencyClaim, lease, ttl time.Duration) (*IdempotencyRecord, error) {
	args := pgx.NamedArgs{"team": c.TeamID, "key": c.Key, "endpoint": c.Endpoint, "hash": c.Hash,
		"token": c.Token, "lease": lease.Seconds(), "ttl": ttl.Seconds()}
	for range 3 {
		var claimed bool
		err := s.pool.QueryRow(ctx, `INSERT INTO idempotency_key AS k (team_id, key, endpoint, request_hash,
				state, token, locked_until, expires_at)
			VALUES (@team, @key, @endpoint, @hash, 'in_flight', @token,
				now() + make_interval(secs => @lease), now() + make_interval(secs => @ttl))
			ON CONFLICT (team_id, key) DO UPDATE SET endpoint = excluded.endpoint,
				request_hash = excluded.request_hash, state = 'in_flight', token = excluded.token,
				response = NULL, locked_until = excluded.locked_until, created_at = now(),
				expires_at = excluded.expires_at
			WHERE k.expires_at < now() OR (k.state = 'in_flight' AND k.locked_until < now())
			RETURNING true`, args).Scan(&claimed)
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("claiming idempotency key: %w", mapErr(err))
		}
		var r IdempotencyRecord
		err = s.pool.QueryRow(ctx, `SELECT endpoint, request_hash, state, response FROM idempotency_key
			WHERE team_id = @team AND key = @key`, args).Scan(&r.Endpoint, &r.Hash, &r.State, &r.Response)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // released meanwhile: claim again
		}
		if err != nil {
			return nil, fmt.Errorf("reading idempotency key: %w", mapErr(err))
		}
		return &r, nil
	}
	return nil, fmt.Errorf("claiming idempotency key: the key keeps changing hands")
}

// RenewIdempotencyClaim extends the lease of a claim that is still in
// flight to lease from now. It returns ErrClaimLost when c no longer holds
// the key: another request took it over after the lease ran out, or the
// claim was completed or released.
func (s *Emails) RenewIdempotencyClaim(ctx context.Context, c IdempotencyClaim, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE idempotency_key SET locked_until = now() + make_interval(secs => @lease)
		WHERE team_id = @team AND key = @key AND token = @token AND state = 'in_flight'`,
		pgx.NamedArgs{"team": c.TeamID, "key": c.Key, "token": c.Token, "lease": lease.Seconds()})
	if err != nil {
		return fmt.Errorf("renewing idempotency claim: %w", mapErr(err))
	}
	if tag.RowsAffected() != 1 {
		return ErrClaimLost
	}
	return nil
}

// ReleaseIdempotencyKey gives up a claim that did not lead to an
// acceptance (a request that failed validation is not remembered).
func (s *Emails) ReleaseIdempotencyKey(ctx context.Context, c IdempotencyClaim) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM idempotency_key
		WHERE team_id = @team AND key = @key AND token = @token AND state = 'in_flight'`,
		pgx.NamedArgs{"team": c.TeamID, "key": c.Key, "token": c.Token})
	if err != nil {
		return fmt.Errorf("releasing idempotency key: %w", mapErr(err))
	}
	return nil
}
