package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/posthaste/posthaste/internal/store"
)

// The fixtures and checks tests need and production does not: they live
// here, not on the store's types. Those that only read or write rows do it
// with plain SQL through a pool of the test's own on the store's database;
// those that need the store's sealing go through its production methods.

// db is the test's own pool on the database of a store Open made, opened
// at first use and closed at the end of the test that opened the store.
type db struct {
	url  string
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

var dbs sync.Map // *store.Store → *db

func track(t testing.TB, st *store.Store, url string) {
	d := &db{url: url}
	dbs.Store(st, d)
	t.Cleanup(func() {
		dbs.Delete(st)
		d.once.Do(func() {}) // never opened: nothing to close
		if d.pool != nil {
			d.pool.Close()
		}
	})
}

// poolOf returns the test's own pool on st's database.
func poolOf(st *store.Store) (*pgxpool.Pool, error) {
	v, ok := dbs.Load(st)
	if !ok {
		return nil, errors.New("storetest: the store was not opened by storetest (New, NewWithURL or Open)")
	}
	d := v.(*db)
	d.once.Do(func() { d.pool, d.err = pgxpool.New(context.Background(), d.url) })
	return d.pool, d.err
}

// InsertEmail durably accepts one email as the API does
// (store.Emails.Accept) and returns the team's usage of the month
// including it.
func InsertEmail(ctx context.Context, st *store.Store, e store.Email) (int64, error) {
	return st.Emails.Accept(ctx, store.Acceptance{Emails: []store.Email{e}})
}

// EmailForBuild loads an email with its bodies, recipients, attachments
// and submitted source, opened, as preparing it for delivery does
// (store.Emails.EmailForSending).
func EmailForBuild(ctx context.Context, st *store.Store, id uuid.UUID) (store.Email, error) {
	e, err := st.Emails.EmailForSending(ctx, id, true)
	return e.Email, err
}

// InboundMessages lists a team's inbound messages, newest first, at most
// limit of them, each read (and opened) by store.Received.InboundByID.
func InboundMessages(ctx context.Context, st *store.Store, teamID uuid.UUID, limit int) ([]store.InboundMessage, error) {
	pool, err := poolOf(st)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT id FROM inbound_message WHERE team_id = $1 ORDER BY id DESC LIMIT $2`,
		teamID, limit)
	if err != nil {
		return nil, fmt.Errorf("listing inbound messages: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("listing inbound messages: %w", err)
	}
	var out []store.InboundMessage
	for _, id := range ids {
		m, err := st.Received.InboundByID(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// OutboxLen counts the outbox entries waiting to be started.
func OutboxLen(ctx context.Context, st *store.Store) (int, error) {
	pool, err := poolOf(st)
	if err != nil {
		return 0, err
	}
	var n int
	err = pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n)
	return n, err
}

// SetInboundBudget sets a team's own inbound budget; zero is the
// default.
func SetInboundBudget(ctx context.Context, st *store.Store, team uuid.UUID, dailyMessages, storageBytes int64) error {
	pool, err := poolOf(st)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `UPDATE team SET inbound_daily_messages = nullif($2::integer, 0),
		inbound_storage_bytes = nullif($3::bigint, 0) WHERE id = $1`, team, dailyMessages, storageBytes)
	if err != nil {
		return fmt.Errorf("setting inbound budget: %w", err)
	}
	return nil
}

// SessionByHash returns a live dashboard session; store.ErrNotFound when
// it is unknown or expired.
func SessionByHash(ctx context.Context, st *store.Store, hash []byte) (store.Session, error) {
	pool, err := poolOf(st)
	if err != nil {
		return store.Session{}, err
	}
	var se store.Session
	err = pool.QueryRow(ctx, `SELECT s.id_hash, s.user_id, s.team_id, s.csrf_token, s.expires_at, s.mfa_pending,
			u.email, t.name
		FROM dashboard_session s JOIN app_user u ON u.id = s.user_id JOIN team t ON t.id = s.team_id
		WHERE s.id_hash = $1 AND s.expires_at > now()`, hash).
		Scan(&se.IDHash, &se.UserID, &se.TeamID, &se.CSRFToken, &se.ExpiresAt, &se.MFAPending, &se.UserEmail,
			&se.TeamName)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, store.ErrNotFound
	}
	return se, err
}

// RequestLogPartitions lists the days that have a request_log partition,
// oldest first.
func RequestLogPartitions(ctx context.Context, st *store.Store) ([]time.Time, error) {
	pool, err := poolOf(st)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'request_log'::regclass ORDER BY c.relname`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var days []time.Time
	for _, n := range names {
		if d, err := time.Parse("20060102", strings.TrimPrefix(n, "request_log_")); err == nil &&
			strings.HasPrefix(n, "request_log_") {
			days = append(days, d)
		}
	}
	return days, nil
}

// SuppressionByEmail finds the team's entry for an address (compared as
// store.NormalizeAddress does), reading the team's list as the API does
// (store.Emails.ListSuppressions); store.ErrNotFound when there is none.
func SuppressionByEmail(ctx context.Context, st *store.Store, teamID uuid.UUID, email string) (store.Suppression, error) {
	email = store.NormalizeAddress(email)
	p := store.Page{Limit: 100}
	for {
		list, more, err := st.Emails.ListSuppressions(ctx, teamID, "", p)
		if err != nil {
			return store.Suppression{}, err
		}
		for _, sp := range list {
			if sp.Email == email {
				return sp, nil
			}
		}
		if !more || len(list) == 0 {
			return store.Suppression{}, store.ErrNotFound
		}
		p.After = &list[len(list)-1].ID
	}
}
