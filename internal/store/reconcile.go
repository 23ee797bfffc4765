package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// StalledEmail is an email with a recipient that has no outcome long after
// it should have one (see StalledEmails).
type StalledEmail struct {
	EmailRef
	// Due is when the email was due to leave: its acceptance, or its
	// scheduled time if later. It orders the list.
	Due         time.Time
	ScheduledAt *time.Time
	// Sent: the email was claimed for sending (a recipient is `sent` or
	// `delivery_delayed`); otherwise it never left the queue (`queued`,
	// or `scheduled` with its time past).
	Sent bool
}

// StalledQuery chooses the emails StalledEmails lists.
type StalledQuery struct {
	// QueuedBefore: emails that never left the queue are listed when they
	// were due before this and have no outbox entry (a workflow start
	// still waiting in the outbox is the dispatcher's to retry).
	QueuedBefore time.Time
	// SentBefore: emails claimed for sending are listed when they were
	// due before this.
	SentBefore time.Time
	// After continues a listing after this email (the last one listed);
	// nil starts from the oldest.
	After *StalledEmail
	Limit int
}

// openStates are the recipient states that are not final, as the SQL
// array literal the index email_open is defined with.
const openStates = `ARRAY['scheduled', 'queued', 'sent', 'delivery_delayed']`

// dueSQL is when an email was due to leave, as the index email_open has it.
const dueSQL = `greatest(e.created_at, e.scheduled_at)`

// stalledEmailsSQL reads the index email_open from the oldest due.
const stalledEmailsSQL = `SELECT e.id, e.team_id, e.batch_id, e.idempotency_key, e.restarts,
		` + dueSQL + `, e.scheduled_at, e.rcpt_status && ARRAY['sent', 'delivery_delayed']
	FROM email e
	WHERE e.rcpt_status && ` + openStates + `
	AND ` + dueSQL + ` < greatest(@queued_before::timestamptz, @sent_before::timestamptz)
	AND (` + dueSQL + `, e.id) > (@after_due::timestamptz, @after_id::uuid)
	AND CASE WHEN e.rcpt_status && ARRAY['sent', 'delivery_delayed']
		THEN ` + dueSQL + ` < @sent_before
		ELSE ` + dueSQL + ` < @queued_before
			AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.ref IN (e.id, e.batch_id)) END
	ORDER BY ` + dueSQL + `, e.id LIMIT @limit`

// StalledEmails lists, oldest due first, up to q.Limit emails of any team
// with a recipient that has no outcome yet and that either never left the
// queue though due before q.QueuedBefore (and have no outbox entry), or
// were claimed for sending and due before q.SentBefore. Whether their
// workflow still runs is for the caller to find out.
func (s *Emails) StalledEmails(ctx context.Context, q StalledQuery) ([]StalledEmail, error) {
	// From the start, the cursor is before every email: the year 1, the nil id.
	args := pgx.NamedArgs{"queued_before": q.QueuedBefore, "sent_before": q.SentBefore, "limit": q.Limit,
		"after_due": time.Time{}, "after_id": uuid.Nil}
	if q.After != nil {
		args["after_due"], args["after_id"] = q.After.Due, q.After.ID
	}
	rows, err := s.pool.Query(ctx, stalledEmailsSQL, args)
	if err != nil {
		return nil, fmt.Errorf("listing stalled emails: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StalledEmail, error) {
		var e StalledEmail
		err := r.Scan(&e.ID, &e.TeamID, &e.BatchID, &e.IdempotencyKey, &e.Restarts, &e.Due, &e.ScheduledAt, &e.Sent)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing stalled emails: %w", mapErr(err))
	}
	return out, nil
}

// RecordRestart notes that the email's workflow was restarted for the
// n-th time. A lower n than the one recorded changes nothing.
func (s *Emails) RecordRestart(ctx context.Context, id uuid.UUID, n int) error {
	_, err := s.pool.Exec(ctx, `UPDATE email SET restarts = @n WHERE id = @id AND restarts < @n`,
		pgx.NamedArgs{"id": id, "n": n})
	if err != nil {
		return fmt.Errorf("recording restart %d of %s: %w", n, id, mapErr(err))
	}
	return nil
}
