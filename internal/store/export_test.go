package store

import (
	"context"
	"fmt"
)

// Test-only queries of the store's own tests.

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
