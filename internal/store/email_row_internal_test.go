package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/pgtest"
)

// openUnmigrated returns a store on a new, empty database.
func openUnmigrated(t *testing.T) *Store {
	t.Helper()
	st, err := Open(context.Background(), Config{URL: pgtest.NewDatabase(t)})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

func migrateTo(t *testing.T, st *Store, version int64, down bool) {
	t.Helper()
	db := stdlib.OpenDBFromPool(st.pool)
	defer db.Close()
	p, err := migrator(db)
	require.NoError(t, err)
	if down {
		_, err = p.DownTo(context.Background(), version)
	} else {
		_, err = p.UpTo(context.Background(), version)
	}
	require.NoError(t, err)
}

// TestEmailRowMigration moves emails accepted before migration 00011
// (recipient rows and a stored first event) into the one-row form and
// back, losing nothing either way.
func TestEmailRowMigration(t *testing.T) {
	ctx := context.Background()
	st := openUnmigrated(t)
	migrateTo(t, st, 10, false)

	team, queued, scheduled := uuid.New(), uuid.New(), uuid.New()
	created := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	args := pgx.NamedArgs{"team": team, "queued": queued, "scheduled": scheduled, "created": created}
	b := &pgx.Batch{}
	for _, q := range []string{
		`INSERT INTO team (id, name) VALUES (@team, 't')`,
		`INSERT INTO email (id, team_id, from_addr, from_domain, to_addrs, cc_addrs, bcc_addrs, reply_to,
			subject, last_event, scheduled_at, created_at, updated_at)
		VALUES (@queued, @team, 'a@posthaste.test', 'posthaste.test', '{x}', '{}', '{}', '{}', 's', 'delivered',
			NULL, @created, @created),
			(@scheduled, @team, 'a@posthaste.test', 'posthaste.test', '{x}', '{}', '{}', '{}', 's', 'canceled',
			@created, @created, @created)`,
		`INSERT INTO email_recipient (email_id, address, position, kind, domain, status) VALUES
			(@queued, 'b"q,@x.test', 2, 'cc', 'x.test', 'bounced'),
			(@queued, 'a@x.test', 1, 'to', 'x.test', 'delivered'),
			(@scheduled, 'c@y.test', 1, 'bcc', 'y.test', 'canceled')`,
		`INSERT INTO email_event (email_id, type, recipient, created_at) VALUES
			(@queued, 'queued', NULL, @created),
			(@queued, 'sent', NULL, @created),
			(@queued, 'delivered', 'a@x.test', @created),
			(@scheduled, 'scheduled', NULL, @created),
			(@scheduled, 'canceled', NULL, @created)`,
	} {
		b.Queue(q, args)
	}
	err := st.pool.SendBatch(ctx, b).Close()
	require.NoError(t, err)

	migrateTo(t, st, 11, false)
	got, err := st.GetEmail(ctx, team, queued)
	require.NoError(t, err)
	require.Equal(t, []Recipient{
		{Address: "a@x.test", Kind: "to", Domain: "x.test", Status: "delivered"},
		{Address: `b"q,@x.test`, Kind: "cc", Domain: "x.test", Status: "bounced"},
	}, got.Recipients)
	history := func(id uuid.UUID) []string {
		evs, err := st.Events(ctx, id)
		require.NoError(t, err)
		var out []string
		for _, ev := range evs {
			require.True(t, created.Equal(ev.CreatedAt))
			out = append(out, ev.Type+":"+ev.Recipient)
		}
		return out
	}
	require.Equal(t, []string{"queued:", "sent:", "delivered:a@x.test"}, history(queued))
	require.Equal(t, []string{"scheduled:", "canceled:"}, history(scheduled))

	migrateTo(t, st, 10, true)
	rows, err := st.pool.Query(ctx, `SELECT email_id, address, position, kind, domain, status
		FROM email_recipient ORDER BY email_id, position`)
	require.NoError(t, err)
	type rcpt struct {
		Email                uuid.UUID
		Address              string
		Position             int32
		Kind, Domain, Status string
	}
	back, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rcpt])
	require.NoError(t, err)
	want := []rcpt{
		{queued, "a@x.test", 1, "to", "x.test", "delivered"},
		{queued, `b"q,@x.test`, 2, "cc", "x.test", "bounced"},
		{scheduled, "c@y.test", 1, "bcc", "y.test", "canceled"},
	}
	if scheduled.String() < queued.String() {
		want = append(want[2:], want[:2]...)
	}
	require.Equal(t, want, back)
	var firsts int
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT count(*) FROM email_event
		WHERE (email_id = @queued AND type = 'queued') OR (email_id = @scheduled AND type = 'scheduled')`,
		pgx.NamedArgs{"queued": queued, "scheduled": scheduled}).Scan(&firsts))
	require.Equal(t, 2, firsts, "the first events are stored again")
}
