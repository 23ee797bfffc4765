package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Outbox kinds: what the workflow started for an entry does. The
// migrations' CHECK on outbox.kind lists the same values.
const (
	// OutboxSendEmail starts the SendEmail workflow of one email; Ref is
	// the email id.
	OutboxSendEmail = "send_email"
	// OutboxSendBatch starts the SendBatch workflow of a batch; Ref is the
	// batch id.
	OutboxSendBatch = "send_batch"
	// OutboxWebhook wakes a webhook's delivery; Ref is the webhook id.
	OutboxWebhook = "webhook"
	// OutboxContactImport starts the ContactImport workflow of an import;
	// Ref is the import id.
	OutboxContactImport = "contact_import"
	// OutboxInbound starts the ProcessInbound workflow of a message the
	// inbound MX accepted; Ref is the inbound_message id.
	OutboxInbound = "inbound"
	// OutboxBroadcast starts the Broadcast workflow of a broadcast that was
	// sent; Ref is the broadcast id.
	OutboxBroadcast = "broadcast"
	// OutboxDataRequest starts the DataRequest workflow of a data request;
	// Ref is the request id.
	OutboxDataRequest = "data_request"
	// OutboxAutomationRun starts the AutomationRun workflow of a run that
	// an event send started; Ref is the run id.
	OutboxAutomationRun = "automation_run"
	// OutboxAutomationWake wakes the AutomationRun workflow of a run (an
	// event it may wait for was sent, or it was cancelled); Ref is the run
	// id.
	OutboxAutomationWake = "automation_wake"
)

// OutboxItem is accepted work whose workflow has not been started yet.
type OutboxItem struct {
	ID          int64
	Kind        string
	TeamID      uuid.UUID
	Ref         uuid.UUID
	ScheduledAt *time.Time
	// IdempotencyKey is the key of the accepting request, if any; it is
	// part of the workflow ID.
	IdempotencyKey *string
	CreatedAt      time.Time
	// Attempts counts the starts of the entry that failed so far.
	Attempts int
	// Missing: the email (send_email) or every email of the batch
	// (send_batch) no longer exists, so there is nothing to start.
	Missing bool
}

// OutboxResult is what became of a claimed outbox entry.
type OutboxResult struct {
	ID int64
	// Done deletes the entry: its workflow started, or it was ended.
	Done bool
	// Otherwise the start failed: the entry's attempts grow by one and it
	// is due again RetryIn from now, with Error kept as its last_error.
	RetryIn time.Duration
	Error   string
}

// claimOutboxSQL claims the due entries (through the index outbox_due)
// and finds out whether their emails still exist.
const claimOutboxSQL = `SELECT o.id, o.kind, o.team_id, o.ref, o.scheduled_at, o.idempotency_key,
		o.created_at, o.attempts, CASE o.kind
			WHEN @send_email THEN NOT EXISTS (SELECT 1 FROM email e WHERE e.id = o.ref)
			WHEN @send_batch THEN NOT EXISTS (SELECT 1 FROM email e WHERE e.batch_id = o.ref)
			WHEN @contact_import THEN NOT EXISTS (SELECT 1 FROM contact_import i WHERE i.id = o.ref)
			WHEN @broadcast THEN NOT EXISTS (SELECT 1 FROM broadcast b WHERE b.id = o.ref)
			WHEN @data_request THEN NOT EXISTS (SELECT 1 FROM data_request d WHERE d.id = o.ref)
			WHEN @automation_run THEN NOT EXISTS (SELECT 1 FROM automation_run r WHERE r.id = o.ref)
			ELSE false END
	FROM outbox o WHERE o.next_attempt_at <= now()
	ORDER BY o.next_attempt_at, o.id LIMIT @limit FOR UPDATE OF o SKIP LOCKED`

// DrainOutbox claims up to limit due outbox entries that no other process
// holds (FOR UPDATE SKIP LOCKED), in the order they became due, passes
// them to start and applies the results start returns, all in one
// transaction: entries done are deleted, failed ones wait for their next
// attempt. Entries without a result stay as they were. It returns how many
// entries it claimed.
func (s *Webhooks) DrainOutbox(ctx context.Context, limit int,
	start func(context.Context, []OutboxItem) []OutboxResult) (int, error) {
	var items []OutboxItem
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimOutboxSQL,
			pgx.NamedArgs{"limit": limit, "send_email": OutboxSendEmail, "send_batch": OutboxSendBatch,
				"contact_import": OutboxContactImport, "broadcast": OutboxBroadcast,
				"data_request": OutboxDataRequest, "automation_run": OutboxAutomationRun})
		if err != nil {
			return fmt.Errorf("claiming outbox: %w", mapErr(err))
		}
		items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutboxItem, error) {
			var it OutboxItem
			err := r.Scan(&it.ID, &it.Kind, &it.TeamID, &it.Ref, &it.ScheduledAt, &it.IdempotencyKey, &it.CreatedAt,
				&it.Attempts, &it.Missing)
			return it, err
		})
		if err != nil {
			return fmt.Errorf("reading outbox: %w", mapErr(err))
		}
		if len(items) == 0 {
			return nil // nothing claimed, nothing written
		}
		var (
			done    []int64
			retry   []int64
			delays  []int64 // milliseconds
			reasons []string
		)
		for _, r := range start(ctx, items) {
			if r.Done {
				done = append(done, r.ID)
				continue
			}
			retry, delays, reasons = append(retry, r.ID), append(delays, r.RetryIn.Milliseconds()), append(reasons, r.Error)
		}
		if len(done) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = ANY(@ids)`,
				pgx.NamedArgs{"ids": done}); err != nil {
				return fmt.Errorf("deleting started outbox entries: %w", mapErr(err))
			}
		}
		if len(retry) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE outbox o SET attempts = o.attempts + 1,
					next_attempt_at = now() + r.delay * interval '1 millisecond', last_error = r.error
				FROM unnest(@ids::bigint[], @delays::bigint[], @errors::text[]) AS r(id, delay, error)
				WHERE o.id = r.id`,
				pgx.NamedArgs{"ids": retry, "delays": delays, "errors": reasons}); err != nil {
				return fmt.Errorf("postponing outbox entries: %w", mapErr(err))
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(items), nil
}

// FailOutboxWork ends the emails of an outbox entry that can never start
// as `failed` with reason (see FailEmail): the email of a send_email
// entry, every email of a send_batch entry. Emails already gone and
// webhook entries fail nothing. It returns how many recipients it failed.
// The import of a contact_import entry and the request of a data_request
// entry end `failed`, and the broadcast of
// a broadcast entry ends canceled with reason; they count as none.
func (s *Webhooks) FailOutboxWork(ctx context.Context, it OutboxItem, reason string) (int, error) {
	var ids []uuid.UUID
	switch it.Kind {
	case OutboxBroadcast:
		_, err := s.Broadcasts.MoveBroadcast(ctx, it.Ref, broadcastUnderWay, BroadcastCanceled, &reason)
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		return 0, err
	case OutboxDataRequest:
		_, err := s.Privacy.FinishDataRequest(ctx, it.Ref, DataRequestOutcome{Failed: true,
			Reason: "The request could not be started."})
		return 0, err
	case OutboxContactImport:
		_, err := s.Audience.FinishContactImport(ctx, it.Ref, "The import could not be started.")
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		return 0, err
	case OutboxSendEmail:
		ids = []uuid.UUID{it.Ref}
	case OutboxSendBatch:
		rows, err := s.pool.Query(ctx, `SELECT id FROM email WHERE batch_id = @batch ORDER BY id`,
			pgx.NamedArgs{"batch": it.Ref})
		if err != nil {
			return 0, fmt.Errorf("listing batch %s: %w", it.Ref, mapErr(err))
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID]); err != nil {
			return 0, fmt.Errorf("listing batch %s: %w", it.Ref, mapErr(err))
		}
	}
	failed := 0
	for _, id := range ids {
		n, err := s.Emails.FailEmail(ctx, id, reason)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return failed, err
		}
		failed += n
	}
	return failed, nil
}

// OutboxChannel is the notification channel every insert into the outbox
// notifies (a trigger, migration 43). PostgreSQL delivers the notification
// when the inserting transaction commits, to every session listening on
// the channel, whatever process it belongs to.
const OutboxChannel = "posthaste_outbox"

// ListenOutbox listens on OutboxChannel on a connection of its own: LISTEN
// holds one session for as long as it listens, so it needs a direct
// connection to PostgreSQL (or a session-mode pooler; a transaction-mode
// pooler such as PgBouncer's does not pass notifications). It calls
// listening once the LISTEN is in place and woke for every notification,
// until ctx ends (it returns nil) or the connection fails (it returns why).
// Neither callback may block.
func (s *Webhooks) ListenOutbox(ctx context.Context, listening, woke func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("connecting to listen for outbox entries: %w", mapErr(err))
	}
	defer conn.Close(context.Background()) //nolint:errcheck // the session ends either way
	if _, err := conn.Exec(ctx, "LISTEN "+OutboxChannel); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listening for outbox entries: %w", mapErr(err))
	}
	listening()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("waiting for outbox entries: %w", mapErr(err))
		}
		woke()
	}
}
