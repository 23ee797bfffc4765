package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// inTx runs fn in a transaction of its own: it commits when fn returns
// nil and rolls back when fn returns an error or panics (the panic goes
// on). Every error, fn's included, comes back through mapErr, so fn may
// return driver errors as they are; an error fn already mapped or wrapped
// with its own words is returned unchanged, unless it wraps pgx.ErrNoRows
// or a constraint's error, which mapErr turns into ErrNotFound or
// ErrConflict as it always does. An error from a caller's callback that
// must reach the caller unmapped is kept aside by fn's site and returned
// in place of inTx's (see RescheduleEmail, UpdateTemplate).
//
// This is the store's one way to run a transaction. Only what holds a
// transaction across calls (ImportWriter) or a connection for a session
// (LISTEN, goose's migration lock) does it another way.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.runTx(ctx, pgx.TxOptions{}, fn)
}

// inSnapshot is inTx for a read-only transaction that sees one snapshot
// of the whole database from its first statement to its last (REPEATABLE
// READ), for reads that must agree with each other (VerifyAudit).
func (s *Store) inSnapshot(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.runTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (s *Store) runTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", mapErr(err))
	}
	// A no-op after Commit; after an error or a panic it undoes what fn
	// wrote and hands the connection back to the pool.
	defer tx.Rollback(ctx) //nolint:errcheck // fn's error, or the panic, is what matters
	if err := fn(tx); err != nil {
		return mapErr(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing transaction: %w", mapErr(err))
	}
	return nil
}
