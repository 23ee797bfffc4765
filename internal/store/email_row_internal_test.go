package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store/migrations"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// openUnmigrated returns a store on a new, empty database.
func openUnmigrated(t *testing.T) *Store {
	t.Helper()
	return openURL(t, pgtest.NewDatabase(t))
}

// openMigrated returns a store on a new database with every migration
// applied: a copy of the template that storetest's databases copy too
// (same Key), migrated once per test binary.
func openMigrated(t *testing.T) *Store {
	t.Helper()
	return openURL(t, pgtest.NewDatabaseFrom(t, migratedTemplate))
}

var migratedTemplate = pgtest.Template{
	Key: "store migrations " + func() string {
		d, err := pgtest.Digest(migrations.FS)
		if err != nil {
			panic(err) // the files are embedded: reading them cannot fail
		}
		return d
	}(),
	Prepare: func(ctx context.Context, url string) error {
		st, err := Open(ctx, Config{URL: url})
		if err != nil {
			return err
		}
		defer st.Close()
		return st.Migrate(ctx)
	},
}

func openURL(t *testing.T, url string) *Store {
	t.Helper()
	st, err := Open(context.Background(), Config{URL: url})
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
	t.Parallel()
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

	// Up to the newest version (the code reads the newest schema), then
	// back through every later migration to 10.
	require.NoError(t, st.Migrate(ctx))
	got, err := st.Emails.GetEmail(ctx, team, queued)
	require.NoError(t, err)
	require.Equal(t, []Recipient{
		{Address: "a@x.test", Kind: "to", Domain: "x.test", Status: "delivered"},
		{Address: `b"q,@x.test`, Kind: "cc", Domain: "x.test", Status: "bounced"},
	}, got.Recipients)
	history := func(id uuid.UUID) []string {
		evs, err := st.Emails.Events(ctx, id)
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

// migratedWithTeam returns a store on a new, migrated database with one team.
func migratedWithTeam(t *testing.T) (*Store, uuid.UUID) {
	t.Helper()
	st := openMigrated(t)
	team := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(context.Background(), Team{ID: team, Name: "t"}))
	return st, team
}

// email is a queued sandbox email of team.
func email(team uuid.UUID) Email {
	return Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
		FromDomain: "posthaste.test", To: []string{"delivered@posthaste.test"}, LastEvent: EventQueued,
		CreatedAt: time.Now(), Recipients: []Recipient{{Address: "delivered@posthaste.test", Kind: "to",
			Domain: "posthaste.test"}}}
}

// TestEmailRecipientsNamedOnce checks that an email lists each recipient
// address once, as the primary key of the former recipient table did.
func TestEmailRecipientsNamedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, team := migratedWithTeam(t)
	twice := email(team)
	twice.Recipients = append(twice.Recipients, twice.Recipients[0])
	_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{twice}})
	var check *pgconn.PgError
	require.True(t, errors.As(err, &check), "%v", err)
	require.Equal(t, "email_rcpt_shape", check.ConstraintName)
	once := email(team)
	once.Recipients = append(once.Recipients, Recipient{Address: "Delivered@posthaste.test", Kind: "cc",
		Domain: "posthaste.test"})
	_, err = st.Emails.Accept(ctx, Acceptance{Emails: []Email{once}})
	require.NoError(t, err, "addresses are compared as written, as the key did")
}

// TestEmailTeamReference checks that email.team_id keeps the guarantees of
// a foreign key with ON DELETE CASCADE.
func TestEmailTeamReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, team := migratedWithTeam(t)
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, st.pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}

	// A team that does not exist: nothing is written, whatever the others.
	batch := uuid.Must(uuid.NewV7())
	_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{email(team), email(uuid.New())}, BatchID: &batch})
	require.ErrorIs(t, err, ErrNotFound)
	require.Zero(t, count(`SELECT count(*) FROM email`))

	kept := email(team)
	_, err = st.Emails.Accept(ctx, Acceptance{Emails: []Email{kept}})
	require.NoError(t, err)
	require.NoError(t, st.Emails.RecordEvents(ctx, kept.ID, []Event{{Type: EventSent}}))

	var pgErr *pgconn.PgError
	_, err = st.pool.Exec(ctx, `UPDATE email SET team_id = @other WHERE id = @id`,
		pgx.NamedArgs{"other": uuid.New(), "id": kept.ID})
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.Equal(t, "23503", pgErr.Code, "an email cannot change team")
	_, err = st.pool.Exec(ctx, `UPDATE team SET id = @other WHERE id = @id`, pgx.NamedArgs{"other": uuid.New(), "id": team})
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.Equal(t, "23503", pgErr.Code, "a team cannot change id")

	// An acceptance in flight holds the team: its deletion waits for the
	// commit, then takes the new email with the others.
	tx, err := st.pool.Begin(ctx)
	require.NoError(t, err)
	late := email(team)
	_, err = tx.Exec(ctx, `INSERT INTO email (id, team_id, from_addr, from_domain, to_addrs, cc_addrs, bcc_addrs,
			reply_to, subject, last_event, rcpt_addrs, rcpt_kinds, rcpt_domains, rcpt_status)
		VALUES (@id, @team, 'a@posthaste.test', 'posthaste.test', '{}', '{}', '{}', '{}', 's', 'queued', '{}', '{}', '{}', '{}')`,
		pgx.NamedArgs{"id": late.ID, "team": team})
	require.NoError(t, err)
	deleted := startBlocked(t, st, "deleting the team", func() error {
		_, err := st.pool.Exec(ctx, `DELETE FROM team WHERE id = @id`, pgx.NamedArgs{"id": team})
		return err
	})
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-deleted)
	require.Zero(t, count(`SELECT count(*) FROM email`), "deleting a team deletes its emails")
	require.Zero(t, count(`SELECT count(*) FROM email_event`), "and their events")

	// A deletion in flight: the acceptance waits for it, then fails.
	second := uuid.Must(uuid.NewV7())
	require.NoError(t, st.Accounts.CreateTeam(ctx, Team{ID: second, Name: "u"}))
	tx, err = st.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `DELETE FROM team WHERE id = @id`, pgx.NamedArgs{"id": second})
	require.NoError(t, err)
	accepted := startBlocked(t, st, "accepting an email", func() error {
		_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{email(second)}})
		return err
	})
	require.NoError(t, tx.Commit(ctx))
	require.ErrorIs(t, <-accepted, ErrNotFound)
	require.Zero(t, count(`SELECT count(*) FROM email`))
}

// startBlocked runs f, which must come to wait for a lock another
// transaction holds, and returns its outcome once it waits.
func startBlocked(t *testing.T, st *Store, what string, f func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("%s did not wait for the other transaction: %v", what, err)
		case <-time.After(10 * time.Millisecond):
		}
		var waiting bool
		require.NoError(t, st.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
		if waiting {
			return done
		}
		require.True(t, time.Now().Before(deadline), "%s is neither done nor waiting for a lock", what)
	}
}

// TestAcceptanceIsSetBased checks that accepting a hundred emails takes as
// many statements (one round trip) as accepting one: no statement, and so
// no round trip or per-statement overhead, per email.
func TestAcceptanceIsSetBased(t *testing.T) {
	t.Parallel()
	team := uuid.Must(uuid.NewV7())
	accept := func(n int, scheduled bool, claim bool) int {
		a := Acceptance{}
		if n > 1 {
			batch := uuid.Must(uuid.NewV7())
			a.BatchID = &batch
		}
		if claim {
			a.Idempotency = &IdempotencyClaim{TeamID: team, Key: "k", Token: uuid.New()}
		}
		now := time.Now()
		for range n {
			e := Email{ID: uuid.Must(uuid.NewV7()), TeamID: team, From: "onboarding@posthaste.test",
				FromDomain: "posthaste.test", To: []string{"a@x.test", "b@x.test"}, LastEvent: EventQueued,
				CreatedAt: now, Tags: []Tag{{Name: "k", Value: "v"}},
				Recipients: []Recipient{{Address: "a@x.test", Kind: "to", Domain: "x.test"},
					{Address: "b@x.test", Kind: "to", Domain: "x.test"}}}
			if scheduled {
				at := now.Add(time.Hour)
				e.ScheduledAt, e.LastEvent = &at, EventScheduled
			}
			a.Emails = append(a.Emails, e)
		}
		var used int64
		b, err := acceptance(a, false, &used)
		require.NoError(t, err)
		return b.Len()
	}
	for _, c := range []struct{ scheduled, claim bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		require.Equal(t, accept(1, c.scheduled, c.claim), accept(100, c.scheduled, c.claim),
			"scheduled %v, idempotency key %v", c.scheduled, c.claim)
	}
	require.Equal(t, 3, accept(100, false, false), "the email rows, the outbox entry, the quota")
}
