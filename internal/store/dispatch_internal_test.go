package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// drainAll claims every due entry, hands the claim to decide and returns
// what was claimed.
func drainAll(t *testing.T, st *Store, decide func(OutboxItem) *OutboxResult) []OutboxItem {
	t.Helper()
	var claimed []OutboxItem
	_, err := st.Webhooks.DrainOutbox(context.Background(), 100, func(_ context.Context, items []OutboxItem) []OutboxResult {
		claimed = items
		var res []OutboxResult
		for _, it := range items {
			if r := decide(it); r != nil {
				res = append(res, *r)
			}
		}
		return res
	})
	require.NoError(t, err)
	return claimed
}

func refs(items []OutboxItem) []uuid.UUID {
	var out []uuid.UUID
	for _, it := range items {
		out = append(out, it.Ref)
	}
	return out
}

func TestDrainOutboxBacksOffPerEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, team := migratedWithTeam(t)
	failing, started, untouched := email(team), email(team), email(team)
	for _, e := range []Email{failing, started, untouched} {
		_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{e}})
		require.NoError(t, err)
	}
	batch := uuid.Must(uuid.NewV7())
	_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{email(team), email(team)}, BatchID: &batch})
	require.NoError(t, err)
	// Entries whose email (or batch) is gone: a deleted team, a bug.
	goneEmail, goneBatch := uuid.New(), uuid.New()
	_, err = st.pool.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref) VALUES ('send_email', @team, @e), ('send_batch', @team, @b)`,
		pgx.NamedArgs{"team": team, "e": goneEmail, "b": goneBatch})
	require.NoError(t, err)

	claimed := drainAll(t, st, func(it OutboxItem) *OutboxResult {
		switch it.Ref {
		case failing.ID:
			return &OutboxResult{ID: it.ID, RetryIn: time.Hour, Error: "starting workflow: unavailable"}
		case started.ID:
			return &OutboxResult{ID: it.ID, Done: true}
		}
		return nil // no result: the entry stays as it was
	})
	require.Equal(t, []uuid.UUID{failing.ID, started.ID, untouched.ID, batch, goneEmail, goneBatch}, refs(claimed),
		"entries that became due together are claimed in id order")
	missing := map[uuid.UUID]bool{}
	for _, it := range claimed {
		missing[it.Ref] = it.Missing
		require.Zero(t, it.Attempts)
	}
	require.Equal(t, map[uuid.UUID]bool{failing.ID: false, started.ID: false, untouched.ID: false, batch: false,
		goneEmail: true, goneBatch: true}, missing)

	var attempts int
	var lastError string
	var waits bool
	require.NoError(t, st.pool.QueryRow(ctx, `SELECT attempts, last_error, next_attempt_at > now() + interval '59 minutes'
		FROM outbox WHERE ref = @ref`, pgx.NamedArgs{"ref": failing.ID}).Scan(&attempts, &lastError, &waits))
	require.Equal(t, 1, attempts)
	require.Equal(t, "starting workflow: unavailable", lastError)
	require.True(t, waits, "the failed entry is due in an hour")

	// The failed entry is not due: the next drain skips it and claims
	// the others; the started one is gone.
	claimed = drainAll(t, st, func(it OutboxItem) *OutboxResult { return &OutboxResult{ID: it.ID, Done: true} })
	require.Equal(t, []uuid.UUID{untouched.ID, batch, goneEmail, goneBatch}, refs(claimed))
	n, err := outboxLen(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the entry waiting for its next attempt is left")

	// Once due again it is claimed with its attempts.
	_, err = st.pool.Exec(ctx, `UPDATE outbox SET next_attempt_at = now() - interval '1 second'`)
	require.NoError(t, err)
	claimed = drainAll(t, st, func(it OutboxItem) *OutboxResult { return &OutboxResult{ID: it.ID, RetryIn: 0} })
	require.Len(t, claimed, 1)
	require.Equal(t, 1, claimed[0].Attempts)
	claimed = drainAll(t, st, func(it OutboxItem) *OutboxResult { return nil })
	require.Len(t, claimed, 1, "a retry after no delay is due at once")
	require.Equal(t, 2, claimed[0].Attempts)
}

func TestFailOutboxWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, team := migratedWithTeam(t)
	batch := uuid.Must(uuid.NewV7())
	done, open := email(team), email(team)
	_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{done, open}, BatchID: &batch})
	require.NoError(t, err)
	require.NoError(t, st.Emails.RecordEvents(ctx, done.ID, []Event{{Type: EventSent},
		{Type: EventDelivered, Recipient: "delivered@posthaste.test"}}))

	n, err := st.Webhooks.FailOutboxWork(ctx, OutboxItem{Kind: OutboxSendBatch, Ref: batch}, "could not start")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the delivered email keeps its outcome")
	got, err := st.Emails.GetEmail(ctx, team, open.ID)
	require.NoError(t, err)
	require.Equal(t, EventFailed, got.LastEvent)
	evs, err := st.Emails.Events(ctx, open.ID)
	require.NoError(t, err)
	require.Equal(t, EventFailed, evs[len(evs)-1].Type)
	require.Equal(t, "could not start", evs[len(evs)-1].Detail["reason"])
	got, err = st.Emails.GetEmail(ctx, team, done.ID)
	require.NoError(t, err)
	require.Equal(t, EventDelivered, got.LastEvent)

	single := email(team)
	_, err = st.Emails.Accept(ctx, Acceptance{Emails: []Email{single}})
	require.NoError(t, err)
	n, err = st.Webhooks.FailOutboxWork(ctx, OutboxItem{Kind: OutboxSendEmail, Ref: single.ID}, "could not start")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = st.Webhooks.FailOutboxWork(ctx, OutboxItem{Kind: OutboxSendEmail, Ref: single.ID}, "could not start")
	require.NoError(t, err)
	require.Zero(t, n, "failing again fails nothing")

	for _, it := range []OutboxItem{{Kind: OutboxSendEmail, Ref: uuid.New()}, {Kind: OutboxSendBatch, Ref: uuid.New()},
		{Kind: OutboxWebhook, Ref: uuid.New()}} {
		n, err = st.Webhooks.FailOutboxWork(ctx, it, "could not start")
		require.NoError(t, err, it.Kind)
		require.Zero(t, n, it.Kind)
	}
}

func TestStalledEmails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, team := migratedWithTeam(t)
	now := time.Now()
	insert := func(created time.Time, scheduled *time.Time, events ...Event) Email {
		e := email(team)
		e.CreatedAt = created
		if scheduled != nil {
			e.ScheduledAt, e.LastEvent = scheduled, EventScheduled
		}
		_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{e}})
		require.NoError(t, err)
		require.NoError(t, st.Emails.RecordEvents(ctx, e.ID, events))
		return e
	}
	sent := Event{Type: EventSent}
	delivered := Event{Type: EventDelivered, Recipient: "delivered@posthaste.test"}
	delayed := Event{Type: EventDeliveryDelayed, Recipient: "delivered@posthaste.test"}
	hourAgo, longAgo := now.Add(-time.Hour), now.Add(-100*time.Hour)
	past, future := now.Add(-30*time.Minute), now.Add(time.Hour)

	sentLongAgo := insert(longAgo, nil, sent)
	delayedLongAgo := insert(longAgo.Add(time.Minute), nil, sent, delayed)
	insert(longAgo, nil, sent, delivered) // has its outcome
	insert(hourAgo, nil, sent)            // within the delivery window
	queuedNoOutbox := insert(hourAgo, nil)
	queuedInOutbox := insert(hourAgo, nil)
	insert(now, nil) // queued a moment ago
	dueScheduled := insert(hourAgo.Add(-time.Hour), &past)
	insert(hourAgo, &future) // not due yet
	batch := uuid.Must(uuid.NewV7())
	batchEmail := email(team)
	batchEmail.CreatedAt = hourAgo
	_, err := st.Emails.Accept(ctx, Acceptance{Emails: []Email{batchEmail}, BatchID: &batch})
	require.NoError(t, err)
	// The dispatcher started every entry but one, and the batch's.
	_, err = st.pool.Exec(ctx, `DELETE FROM outbox WHERE ref <> ALL (@keep)`,
		pgx.NamedArgs{"keep": []uuid.UUID{queuedInOutbox.ID, batch}})
	require.NoError(t, err)

	q := StalledQuery{QueuedBefore: now.Add(-10 * time.Minute), SentBefore: now.Add(-73 * time.Hour), Limit: 10}
	list, err := st.Emails.StalledEmails(ctx, q)
	require.NoError(t, err)
	ids := func(l []StalledEmail) []uuid.UUID {
		var out []uuid.UUID
		for _, e := range l {
			out = append(out, e.ID)
		}
		return out
	}
	require.Equal(t, []uuid.UUID{sentLongAgo.ID, delayedLongAgo.ID, queuedNoOutbox.ID, dueScheduled.ID}, ids(list),
		"oldest due first; a scheduled email is due at its time")
	require.True(t, list[0].Sent)
	require.True(t, list[1].Sent)
	require.False(t, list[2].Sent)
	require.Equal(t, team, list[2].TeamID)
	require.Nil(t, list[2].BatchID)
	require.False(t, list[3].Sent)
	require.WithinDuration(t, past, *list[3].ScheduledAt, time.Millisecond)
	require.WithinDuration(t, past, list[3].Due, time.Millisecond)

	// A batch's email is the batch's to start while its entry waits.
	_, err = st.pool.Exec(ctx, `DELETE FROM outbox WHERE ref = @batch`, pgx.NamedArgs{"batch": batch})
	require.NoError(t, err)
	list, err = st.Emails.StalledEmails(ctx, q)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{sentLongAgo.ID, delayedLongAgo.ID, queuedNoOutbox.ID, batchEmail.ID, dueScheduled.ID},
		ids(list))
	require.Equal(t, &batch, list[3].BatchID)

	// Pages continue after the last email listed.
	q.Limit = 3
	first, err := st.Emails.StalledEmails(ctx, q)
	require.NoError(t, err)
	q.After = &first[2]
	rest, err := st.Emails.StalledEmails(ctx, q)
	require.NoError(t, err)
	require.Equal(t, ids(list), append(ids(first), ids(rest)...))

	// Restarts are counted and never go back.
	require.NoError(t, st.Emails.RecordRestart(ctx, queuedNoOutbox.ID, 2))
	require.NoError(t, st.Emails.RecordRestart(ctx, queuedNoOutbox.ID, 1))
	q.After, q.Limit = nil, 10
	list, err = st.Emails.StalledEmails(ctx, q)
	require.NoError(t, err)
	for _, e := range list {
		if e.ID == queuedNoOutbox.ID {
			require.Equal(t, 2, e.Restarts)
		} else {
			require.Zero(t, e.Restarts)
		}
	}
}

// TestDispatchQueriesUseTheirIndexes checks that the drain and the
// reconciler's listing can read their partial and expression indexes (the
// planner would not pick them on a table this small, so sequential scans
// are turned off).
func TestDispatchQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := migratedWithTeam(t)
	tx, err := st.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	_, err = tx.Exec(ctx, `SET LOCAL enable_seqscan = off`)
	require.NoError(t, err)
	plan := func(sql string, args pgx.NamedArgs) string {
		rows, err := tx.Query(ctx, "EXPLAIN "+sql, args)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(lines, "\n")
	}
	p := plan(claimOutboxSQL, pgx.NamedArgs{"limit": 10, "send_email": OutboxSendEmail, "send_batch": OutboxSendBatch})
	require.Contains(t, p, "outbox_due", p)
	now := time.Now()
	p = plan(stalledEmailsSQL, pgx.NamedArgs{"queued_before": now, "sent_before": now, "limit": 10,
		"after_due": time.Time{}, "after_id": uuid.Nil})
	require.Contains(t, p, "email_open", p)
}
