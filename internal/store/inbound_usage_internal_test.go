package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/stretchr/testify/require"
)

// TestInboundUsageMigrationDown: migration 00039 goes down and up again.
func TestInboundUsageMigrationDown(t *testing.T) {
	t.Parallel()
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

// TestInboundUsageSlots: the accepts of a team without a budget count in
// slots of their own and do not wait for each other; those of a team with
// one count in its one row, so the second waits for the first to commit
// (which makes the budget exact). Usage sums the slots.
func TestInboundUsageSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openMigrated(t)
	free, capped := uuid.New(), uuid.New()
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: free, Name: "free"}))
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: capped, Name: "capped"}))
	require.NoError(t, setInboundBudget(ctx, st, capped, 100, 0))
	in := NewInbound(st, nil)
	now := time.Now()
	msg := func(team uuid.UUID) inmail.Message {
		return inmail.Message{ID: uuid.New(), ReceivedAt: now, Data: []byte("Subject: x\r\n\r\nx\r\n"),
			Recipients: []inmail.Recipient{{Address: "a@x.test", Route: inmail.Route{Kind: inmail.RouteReceiving, TeamID: team}}}}
	}
	count := func(team uuid.UUID) (pgx.Tx, chan error) {
		tx, err := st.pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		done := make(chan error, 1)
		go func() { done <- in.countUsage(ctx, tx, msg(team)) }()
		return tx, done
	}
	for _, team := range []uuid.UUID{free, capped} {
		first, done := count(team)
		require.NoError(t, <-done)
		second, done := count(team)
		if team == free {
			select {
			case err := <-done:
				require.NoError(t, err, "counted while the first is open")
			case <-time.After(30 * time.Second):
				t.Fatal("an accept for a team without a budget waited for another")
			}
			require.NoError(t, first.Commit(ctx))
		} else {
			require.Eventually(t, func() bool {
				var waiting int
				err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
				return err == nil && waiting == 1
			}, 10*time.Second, 10*time.Millisecond, "the second accept waits for the first")
			require.NoError(t, first.Commit(ctx))
			require.NoError(t, <-done)
		}
		require.NoError(t, second.Commit(ctx))
		u, err := st.Received.InboundUsage(ctx, team, now)
		require.NoError(t, err)
		require.Equal(t, int64(2), u.Messages)
		require.Positive(t, u.Bytes)
	}
}
