package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Test-only queries and setups of the store's own tests. Tests of other
// packages find theirs in internal/testkit/storetest (which the store's
// internal tests cannot import).

// HasDomains reports whether any domain exists (deleted ones included,
// since their keys still sign accepted mail).
func (s *Store) HasDomains(ctx context.Context) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM domain)`).Scan(&ok)
	return ok, mapErr(err)
}

// PurgeIdempotencyKeys deletes expired records and returns how many.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_key WHERE expires_at < now()`)
	if err != nil {
		return 0, fmt.Errorf("purging idempotency keys: %w", mapErr(err))
	}
	return tag.RowsAffected(), nil
}

// WithSealer returns a Store on the same pool that seals mail content it
// writes with sl and opens it when read, for tests that seal with a sealer
// of their own (processes get theirs from Config.MasterKey). Rows written
// before sealing, or without a sealer, are read as they are.
func (s *Store) WithSealer(sl Sealer) *Store {
	c := *s
	c.sealer = sl
	c.areas()
	return &c
}

// outboxLen counts the outbox entries waiting to be started (what
// storetest.OutboxLen does for other packages' tests).
func outboxLen(ctx context.Context, s *Store) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n)
	return n, mapErr(err)
}

// setInboundBudget sets a team's own inbound budget; zero is the default
// (what storetest.SetInboundBudget does for other packages' tests).
func setInboundBudget(ctx context.Context, s *Store, team uuid.UUID, dailyMessages, storageBytes int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE team SET inbound_daily_messages = nullif(@m::integer, 0),
		inbound_storage_bytes = nullif(@b::bigint, 0) WHERE id = @team`,
		pgx.NamedArgs{"team": team, "m": dailyMessages, "b": storageBytes})
	return mapErr(err)
}
