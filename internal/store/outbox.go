package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// OutboxItem is accepted work whose workflow has not been started yet.
type OutboxItem struct {
	ID          int64
	Kind        string
	TeamID      uuid.UUID
	Ref         uuid.UUID
	ScheduledAt *time.Time
	// IdempotencyKey is the key of the accepting request, if any; it is
	// part of the workflow ID.
	IdempotencyKey *string
	CreatedAt      time.Time
}

// DrainOutbox claims up to limit outbox entries that no other process holds
// (FOR UPDATE SKIP LOCKED), passes them to start and deletes those whose ids
// start returns, all in one transaction. Entries start did not return stay
// for a later drain. It returns how many entries it claimed.
func (s *Store) DrainOutbox(ctx context.Context, limit int,
	start func(context.Context, []OutboxItem) []int64) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("beginning outbox drain: %w", mapErr(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rollback after commit is a no-op
	rows, err := tx.Query(ctx, `SELECT id, kind, team_id, ref, scheduled_at, idempotency_key, created_at FROM outbox
		ORDER BY id LIMIT @limit FOR UPDATE SKIP LOCKED`, pgx.NamedArgs{"limit": limit})
	if err != nil {
		return 0, fmt.Errorf("claiming outbox: %w", mapErr(err))
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutboxItem, error) {
		var it OutboxItem
		err := r.Scan(&it.ID, &it.Kind, &it.TeamID, &it.Ref, &it.ScheduledAt, &it.IdempotencyKey, &it.CreatedAt)
		return it, err
	})
	if err != nil {
		return 0, fmt.Errorf("reading outbox: %w", mapErr(err))
	}
	if len(items) == 0 {
		return 0, nil
	}
	done := start(ctx, items)
	if len(done) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = ANY(@ids)`,
			pgx.NamedArgs{"ids": done}); err != nil {
			return 0, fmt.Errorf("deleting started outbox entries: %w", mapErr(err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("committing outbox drain: %w", mapErr(err))
	}
	return len(items), nil
}

// OutboxLen counts entries waiting to be started.
func (s *Store) OutboxLen(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n)
	return n, mapErr(err)
}
