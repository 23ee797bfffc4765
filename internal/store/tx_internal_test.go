package store

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// teamExists reports whether a team with id is committed, as another
// session sees it.
func teamExists(t *testing.T, st *Store, id uuid.UUID) bool {
	t.Helper()
	var ok bool
	require.NoError(t, st.pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM team WHERE id = @id)`, pgx.NamedArgs{"id": id}).Scan(&ok))
	return ok
}

// insertTeam writes a team within tx.
func insertTeam(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	_, err := tx.Exec(ctx, `INSERT INTO team (id, name) VALUES (@id, 't')`, pgx.NamedArgs{"id": id})
	return err
}

// TestInTxCommits: what fn writes is there once inTx returns nil, and
// the connection is back in the pool.
func TestInTxCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openMigrated(t)
	id := uuid.New()
	require.NoError(t, st.inTx(ctx, func(tx pgx.Tx) error { return insertTeam(ctx, tx, id) }))
	require.True(t, teamExists(t, st, id))
	require.Zero(t, st.pool.Stat().AcquiredConns(), "the connection went back to the pool")
}

// TestInTxRollsBackOnError: a fn that writes and then fails leaves
// nothing behind, its error comes back mapped once, and the transaction
// has ended (its connection is back in the pool, its row locks gone).
func TestInTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openMigrated(t)
	id := uuid.New()
	boom := errors.New("boom")
	err := st.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertTeam(ctx, tx, id); err != nil {
			return err
		}
		return boom
	})
	require.Same(t, boom, err, "an error that is not the driver's comes back as it is")
	require.False(t, teamExists(t, st, id), "the write was rolled back")
	require.Zero(t, st.pool.Stat().AcquiredConns(), "the transaction ended and its connection went back")

	// Driver errors are mapped: a unique violation is ErrConflict, no row
	// is ErrNotFound, and the first write of fn is undone with them.
	require.NoError(t, st.inTx(ctx, func(tx pgx.Tx) error { return insertTeam(ctx, tx, id) }))
	other := uuid.New()
	err = st.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertTeam(ctx, tx, other); err != nil {
			return err
		}
		return insertTeam(ctx, tx, id)
	})
	require.ErrorIs(t, err, ErrConflict)
	require.False(t, teamExists(t, st, other))
	err = st.inTx(ctx, func(tx pgx.Tx) error {
		var name string
		return tx.QueryRow(ctx, `SELECT name FROM team WHERE id = @id`, pgx.NamedArgs{"id": uuid.New()}).Scan(&name)
	})
	require.Same(t, ErrNotFound, err)

	// An error fn mapped itself is not mapped again.
	err = st.inTx(ctx, func(tx pgx.Tx) error { return mapErr(context.DeadlineExceeded) })
	require.ErrorIs(t, err, ErrUnavailable)
	require.Equal(t, mapErr(context.DeadlineExceeded).Error(), err.Error())
}

// TestInTxRollsBackOnPanic: a panic in fn goes on to the caller, and what
// fn wrote before it is rolled back.
func TestInTxRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openMigrated(t)
	id := uuid.New()
	require.PanicsWithValue(t, "boom", func() {
		_ = st.inTx(ctx, func(tx pgx.Tx) error {
			if err := insertTeam(ctx, tx, id); err != nil {
				return err
			}
			panic("boom")
		})
	})
	require.False(t, teamExists(t, st, id), "the write was rolled back")
	require.Zero(t, st.pool.Stat().AcquiredConns(), "the transaction ended and its connection went back")
	// The team can be written now: no lock of the panicked transaction is left.
	require.NoError(t, st.inTx(ctx, func(tx pgx.Tx) error { return insertTeam(ctx, tx, id) }))
}

// TestInSnapshotIsReadOnly: inSnapshot's transaction refuses writes.
func TestInSnapshotIsReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openMigrated(t)
	id := uuid.New()
	err := st.inSnapshot(ctx, func(tx pgx.Tx) error { return insertTeam(ctx, tx, id) })
	require.Error(t, err)
	require.False(t, teamExists(t, st, id))
	require.Zero(t, st.pool.Stat().AcquiredConns())
}
