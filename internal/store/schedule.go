package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StateError means an email is not in a state that allows the change
// (rescheduling or canceling an email that is not scheduled any more).
type StateError struct {
	LastEvent string
}

func (e *StateError) Error() string { return "email is " + e.LastEvent }

// EmailRef is what identifies the workflow that sends an email.
type EmailRef struct {
	ID             uuid.UUID
	TeamID         uuid.UUID
	BatchID        *uuid.UUID
	IdempotencyKey *string
	// Restarts counts the times the reconciler restarted the email's
	// workflow; after the first, the email has a SendEmail workflow of
	// its own, whatever its batch.
	Restarts int
	// Started is false while the outbox entry that starts the workflow is
	// still waiting.
	Started bool
}

// SendClaim is the outcome of ClaimForSending.
type SendClaim struct {
	// Claimed: this call moved the email to `sent`; it is now this
	// workflow's to send.
	Claimed     bool
	LastEvent   string     // the state after the call
	ScheduledAt *time.Time // the current scheduled time
}

// claimSendingSQL is the WITH clause that claims the emails matching
// which (a condition on email.id) for sending, as ClaimForSending and
// ClaimManyForSending do: a queued or due email moves to `sent`, its
// recipients without an outcome too, its Message-ID is fixed, and the
// event and its webhooks (emailWebhooksCTE, args of webhookArgs) are
// written. The claimed ids are in the CTE claim.
func claimSendingSQL(which string) string {
	return `WITH claim AS (
			UPDATE email SET last_event = 'sent', updated_at = @now, rcpt_status = coalesce((SELECT array_agg(CASE WHEN st = ANY (` + finalStatesArray + `) THEN st ELSE 'sent' END
					ORDER BY n) FROM unnest(rcpt_status) WITH ORDINALITY r(st, n)), rcpt_status),
				message_id = coalesce(message_id, id::text || '@' || from_domain)
			WHERE ` + which + ` AND (last_event = 'queued'
				OR (last_event = 'scheduled' AND (scheduled_at IS NULL OR scheduled_at <= @due)))
			RETURNING id
		), ins AS (
			INSERT INTO email_event (email_id, type, created_at) SELECT id, 'sent', @now FROM claim
			ON CONFLICT DO NOTHING
			RETURNING email_id
		)` + emailWebhooksCTE
}

// ClaimForSending is the point of no return of a send: one conditional
// UPDATE moves a queued email, or a scheduled one whose time has come
// (within skew of now), to `sent`, recording the event and the recipients'
// state. A concurrent cancel or reschedule holds the row lock and is
// decided before it: the UPDATE re-checks the row it waited for. The claim
// also reports the state afterwards, so a caller that did not claim knows
// whether the email was canceled, moved later or already claimed (a retry).
func (s *Emails) ClaimForSending(ctx context.Context, id uuid.UUID, now time.Time, skew time.Duration) (SendClaim, error) {
	b := &pgx.Batch{}
	var c SendClaim
	args := pgx.NamedArgs{"id": id, "now": now, "due": now.Add(skew)}
	webhookArgs(args, Event{Type: EventSent}, now)
	// Recipients with an outcome (an erasure canceled one before the
	// claim) keep it. The claim also fixes the Message-ID (the one the build step writes,
	// <email id>@<sender domain>), so the email.sent webhook carries it.
	b.Queue(claimSendingSQL(`id = @id`)+`
		SELECT count(*) > 0 FROM claim`, args).QueryRow(func(r pgx.Row) error { return r.Scan(&c.Claimed) })
	b.Queue(`SELECT last_event, scheduled_at FROM email WHERE id = @id`, args).
		QueryRow(func(r pgx.Row) error { return r.Scan(&c.LastEvent, &c.ScheduledAt) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return SendClaim{}, fmt.Errorf("claiming email %s for sending: %w", id, mapErr(err))
	}
	return c, nil
}

// RescheduleEmail moves a scheduled email to a new time. It fails with
// ErrNotFound for unknown emails and *StateError for emails that are not
// scheduled. In the same transaction it updates a waiting outbox entry
// (waiting for the dispatcher if it is starting that entry right now, so
// a workflow starts either with the new time or before this call decides);
// when the workflow has started, wake is called before the commit, with
// the email's row lock held: a workflow woken early that tries to claim
// the email waits for the commit and sees the new time.
func (s *Emails) RescheduleEmail(ctx context.Context, teamID, id uuid.UUID, at time.Time,
	wake func(context.Context, EmailRef) error) error {
	// wake's error is the caller's, not the database's: it is returned as
	// wake returned it, not mapped.
	var wakeErr error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		ref := EmailRef{ID: id, TeamID: teamID}
		err := tx.QueryRow(ctx, `UPDATE email SET scheduled_at = @at, updated_at = now()
			WHERE id = @id AND team_id = @team AND last_event = 'scheduled'
			RETURNING batch_id, idempotency_key, restarts`, pgx.NamedArgs{"id": id, "team": teamID, "at": at}).
			Scan(&ref.BatchID, &ref.IdempotencyKey, &ref.Restarts)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.emailStateError(ctx, tx, teamID, id)
		}
		if err != nil {
			return fmt.Errorf("rescheduling email %s: %w", id, mapErr(err))
		}
		outboxRef := id
		if ref.BatchID != nil {
			outboxRef = *ref.BatchID
		}
		tag, err := tx.Exec(ctx, `UPDATE outbox SET scheduled_at = CASE WHEN kind = @kind THEN @at ELSE scheduled_at END
			WHERE ref = @ref`, pgx.NamedArgs{"ref": outboxRef, "at": at, "kind": OutboxSendEmail})
		if err != nil {
			return fmt.Errorf("rescheduling outbox entry of %s: %w", id, mapErr(err))
		}
		ref.Started = tag.RowsAffected() == 0
		if ref.Started {
			if wakeErr = wake(ctx, ref); wakeErr != nil {
				return wakeErr
			}
		}
		return nil
	})
	if wakeErr != nil {
		return wakeErr
	}
	return err
}

// CancelEmail cancels a scheduled email: its state, its recipients' and a
// `canceled` event, in one transaction. The outbox entry of an email whose
// workflow has not started is deleted with it (no workflow is needed any
// more); if the dispatcher is starting it right now, the delete waits for
// that and the email's workflow counts as started. It fails with
// ErrNotFound for unknown emails and *StateError for emails that are not
// scheduled. Started tells the caller whether a workflow may be waiting.
func (s *Emails) CancelEmail(ctx context.Context, teamID, id uuid.UUID) (EmailRef, error) {
	ref := EmailRef{ID: id, TeamID: teamID}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `WITH c AS (
				UPDATE email SET last_event = 'canceled', updated_at = now(), rcpt_status = `+allRecipients("'canceled'::text")+`
				WHERE id = @id AND team_id = @team AND last_event = 'scheduled'
				RETURNING id, batch_id, idempotency_key, restarts
			), ev AS (
				INSERT INTO email_event (email_id, type) SELECT id, 'canceled' FROM c ON CONFLICT DO NOTHING
			)
			SELECT batch_id, idempotency_key, restarts FROM c`, pgx.NamedArgs{"id": id, "team": teamID}).
			Scan(&ref.BatchID, &ref.IdempotencyKey, &ref.Restarts)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.emailStateError(ctx, tx, teamID, id)
		}
		if err != nil {
			return fmt.Errorf("canceling email %s: %w", id, mapErr(err))
		}
		var tag pgconn.CommandTag
		if ref.BatchID == nil {
			tag, err = tx.Exec(ctx, `DELETE FROM outbox WHERE kind = @kind AND ref = @id`,
				pgx.NamedArgs{"id": id, "kind": OutboxSendEmail})
		} else {
			// The batch's other emails still need their workflow; wait for a
			// start in progress so Started is exact.
			tag, err = tx.Exec(ctx, `SELECT 1 FROM outbox WHERE ref = @batch FOR UPDATE`, pgx.NamedArgs{"batch": *ref.BatchID})
		}
		if err != nil {
			return fmt.Errorf("canceling outbox entry of %s: %w", id, mapErr(err))
		}
		ref.Started = tag.RowsAffected() == 0
		return nil
	})
	return ref, err
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// emailStateError explains why a scheduled-only change did not apply.
func (s *Emails) emailStateError(ctx context.Context, q querier, teamID, id uuid.UUID) error {
	var state string
	err := q.QueryRow(ctx, `SELECT last_event FROM email WHERE id = @id AND team_id = @team`,
		pgx.NamedArgs{"id": id, "team": teamID}).Scan(&state)
	if err != nil {
		return mapErr(err)
	}
	return &StateError{LastEvent: state}
}

// BatchEmail is one email of a batch with its current scheduled time.
type BatchEmail struct {
	ID          uuid.UUID
	ScheduledAt *time.Time
}

// BatchEmails lists the emails of a batch that have a recipient without
// an outcome (queued, scheduled, or claimed by Prepare and not yet
// delivered: sent, delivery_delayed), in request order; emails whose every
// recipient reached a final state (canceled ones included) are left out.
// The claimed ones matter when the listing runs again: a SendBatch whose
// first workflow task died with its worker (local activities are recorded
// only when the task completes) lists its batch anew after Prepare claimed
// some emails, and only it will ever finish them. Their steps are
// idempotent, so taking them up again sends nothing twice.
func (s *Emails) BatchEmails(ctx context.Context, batchID uuid.UUID) ([]BatchEmail, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, scheduled_at FROM email WHERE batch_id = @batch
		AND rcpt_status && ARRAY['scheduled', 'queued', 'sent', 'delivery_delayed'] ORDER BY id`,
		pgx.NamedArgs{"batch": batchID})
	if err != nil {
		return nil, fmt.Errorf("listing batch %s: %w", batchID, mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchEmail, error) {
		var e BatchEmail
		err := r.Scan(&e.ID, &e.ScheduledAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading batch %s: %w", batchID, mapErr(err))
	}
	return out, nil
}
