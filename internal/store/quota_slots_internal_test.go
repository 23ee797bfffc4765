package store

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestQuotaSlotsMigration: usage counted before migration 00038 is slot 0
// of the new form, and going back sums the slots into one row.
func TestQuotaSlotsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openUnmigrated(t)
	migrateTo(t, st, 37, false)
	team := uuid.New()
	_, err := st.pool.Exec(ctx, `INSERT INTO team (id, name, plan) VALUES ($1, 't', '50k')`, team)
	require.NoError(t, err)
	var used int64
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT quota_take($1, '2026-11-01', 40)`, team).Scan(&used))
	require.EqualValues(t, 40, used)

	migrateTo(t, st, 38, false)
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT quota_take($1, '2026-11-01', 2, false)`, team).Scan(&used))
	require.EqualValues(t, 42, used, "the old usage counts")
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT quota_take($1, '2026-11-01', 3, true)`, team).Scan(&used))
	require.EqualValues(t, 45, used)
	var rows int
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT count(*) FROM quota_usage WHERE team_id = $1`, team).Scan(&rows))
	require.Equal(t, 16, rows, "an exact take makes every slot")

	migrateTo(t, st, 37, true)
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT used FROM quota_usage WHERE team_id = $1`, team).Scan(&used))
	require.EqualValues(t, 45, used)
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT quota_take($1, '2026-11-01', 5)`, team).Scan(&used))
	require.EqualValues(t, 50, used)
	_, err = st.pool.Exec(ctx, `SELECT quota_take($1, '2026-11-01', 1, false)`, team)
	require.Error(t, err, "the new function is gone")
}
