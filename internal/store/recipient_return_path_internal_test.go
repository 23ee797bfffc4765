package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRecipientReturnPathMigration: migration 00040 records when return
// paths became per recipient (the cutover inroute.Router.ReturnPath compares
// emails' creation with), and its Down removes the record.
func TestRecipientReturnPathMigration(t *testing.T) {
	ctx := context.Background()
	st := openUnmigrated(t)
	migrateTo(t, st, 38, false)
	var before time.Time
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT now()`).Scan(&before))
	migrateTo(t, st, 40, false)
	var since time.Time
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT per_recipient_since FROM return_path_recipient`).Scan(&since))
	require.False(t, since.Before(before), "the cutover is when the migration ran")
	var n int
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT count(*) FROM return_path_recipient`).Scan(&n))
	require.Equal(t, 1, n, "one row")
	_, err := st.pool.Exec(ctx, `INSERT INTO return_path_recipient (only_row) VALUES (false)`)
	require.Error(t, err, "only one row")

	migrateTo(t, st, 38, true)
	_, err = st.pool.Exec(ctx, `SELECT 1 FROM return_path_recipient`)
	require.Error(t, err, "gone after Down")
}
