package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInboundUsageMigrationDown: migration 00039 goes down and up again.
func TestInboundUsageMigrationDown(t *testing.T) {
	ctx := context.Background()
	st := openUnmigrated(t)
	migrateTo(t, st, 39, false)
	_, err := st.pool.Exec(ctx, `INSERT INTO team (id, name, inbound_daily_messages) VALUES (gen_random_uuid(), 't', 5)`)
	require.NoError(t, err)
	_, err = st.pool.Exec(ctx, `INSERT INTO inbound_usage (team_id, day, messages, bytes)
		SELECT id, current_date, 1, 10 FROM team`)
	require.NoError(t, err)
	migrateTo(t, st, 38, true)
	var gone bool
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT to_regclass('inbound_usage') IS NULL
		AND NOT EXISTS (SELECT FROM information_schema.columns WHERE table_name = 'team'
			AND column_name LIKE 'inbound_%')`).Scan(&gone))
	require.True(t, gone)
	migrateTo(t, st, 39, false)
}
