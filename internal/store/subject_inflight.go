package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// InFlightEmails counts, in an erasure's found, the emails still being
// sent to the address whose recipient it canceled.
const InFlightEmails = "emails_in_flight"

// ErasedRecipientReason is the reason of the `canceled` event an erasure
// records for a recipient whose email was still being sent.
const ErasedRecipientReason = "The recipient's data was erased on request."

// InFlightEmail is an email with a recipient that has no outcome yet.
type InFlightEmail struct {
	EmailRef
	ScheduledAt *time.Time
}

// inFlightColumns are the columns scanInFlight reads; Started is true
// when no outbox entry (the email's or its batch's) still waits to start
// the workflow.
const inFlightColumns = `e.id, e.team_id, e.batch_id, e.idempotency_key, e.restarts, e.scheduled_at,
	NOT EXISTS (SELECT 1 FROM outbox o WHERE o.ref IN (e.id, e.batch_id))`

func scanInFlight(rows pgx.Rows) ([]InFlightEmail, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (InFlightEmail, error) {
		var e InFlightEmail
		err := r.Scan(&e.ID, &e.TeamID, &e.BatchID, &e.IdempotencyKey, &e.Restarts, &e.ScheduledAt, &e.Started)
		return e, err
	})
}

// openRecipientOf is true, in a query over email e, when the address
// @addr is a recipient of e without an outcome yet.
const openRecipientOf = `EXISTS (SELECT 1 FROM unnest(e.rcpt_addrs, e.rcpt_status) r(a, st)
	WHERE lower(r.a) = @addr AND r.st = ANY (` + openStates + `))`

// SubjectInFlightEmails returns up to limit of the team's emails in which
// the address is a recipient without an outcome yet: the emails still
// being sent to it, whose workflows' histories name it.
func (s *Privacy) SubjectInFlightEmails(ctx context.Context, sub Subject, limit int) ([]InFlightEmail, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+inFlightColumns+` FROM email e
		WHERE e.team_id = @team AND e.rcpt_status && `+openStates+` AND `+openRecipientOf+`
		ORDER BY e.id LIMIT @limit`, sub.args(pgx.NamedArgs{"limit": limit}))
	if err != nil {
		return nil, fmt.Errorf("finding emails in flight to the subject: %w", mapErr(err))
	}
	out, err := scanInFlight(rows)
	if err != nil {
		return nil, fmt.Errorf("finding emails in flight to the subject: %w", mapErr(err))
	}
	return out, nil
}

// CancelSubjectRecipients ends the address's recipients without an
// outcome in one of the team's emails as `canceled`, with
// ErasedRecipientReason and the erasure's id (requestID) in the event's
// detail, and returns how many it ended. The email's last_event becomes
// `canceled` only when no recipient is left without an outcome: a
// workflow (Prepare) skips a canceled email. Recipients with an outcome keep
// it; a repeated call changes nothing. The events queue no webhook: they
// would only name an address the erasure then replaces.
func (s *Privacy) CancelSubjectRecipients(ctx context.Context, sub Subject, emailID, requestID uuid.UUID) (int, error) {
	args := sub.args(pgx.NamedArgs{"id": emailID, "detail": map[string]any{
		"reason": ErasedRecipientReason, "data_request_id": requestID.String()}})
	var n int
	err := s.pool.QueryRow(ctx, `WITH x AS (
			SELECT e.id, r.a FROM email e, unnest(e.rcpt_addrs, e.rcpt_status) r(a, st)
			WHERE e.id = @id AND e.team_id = @team AND lower(r.a) = @addr AND r.st = ANY (`+openStates+`)
		), ev AS (
			INSERT INTO email_event (email_id, type, recipient, detail)
			SELECT id, '`+EventCanceled+`', a, @detail FROM x
			ON CONFLICT (email_id, type, coalesce(recipient, '')) WHERE type NOT IN ('opened', 'clicked') DO NOTHING
		), u AS (
			UPDATE email e SET last_event = CASE WHEN EXISTS (SELECT 1 FROM unnest(e.rcpt_addrs, e.rcpt_status) r(a, st)
					WHERE lower(r.a) <> @addr AND r.st = ANY (`+openStates+`)) THEN e.last_event
					ELSE '`+EventCanceled+`' END,
				updated_at = now(),
				rcpt_status = (SELECT array_agg(CASE WHEN lower(r.a) = @addr AND r.st = ANY (`+openStates+`)
					THEN '`+EventCanceled+`' ELSE r.st END ORDER BY r.n)
					FROM unnest(e.rcpt_addrs, e.rcpt_status) WITH ORDINALITY r(a, st, n))
			WHERE e.id = @id AND e.team_id = @team AND EXISTS (SELECT 1 FROM x)
		)
		SELECT count(*) FROM x`, args).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("canceling the subject's recipients of email %s: %w", emailID, mapErr(err))
	}
	return n, nil
}

// OpenBatchEmails returns the emails of the team's batch that have a
// recipient without an outcome and are still sent by the batch's workflow
// (never restarted on their own).
func (s *Privacy) OpenBatchEmails(ctx context.Context, teamID, batchID uuid.UUID) ([]InFlightEmail, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+inFlightColumns+` FROM email e
		WHERE e.team_id = @team AND e.batch_id = @batch AND e.restarts = 0 AND e.rcpt_status && `+openStates+`
		ORDER BY e.id`, pgx.NamedArgs{"team": teamID, "batch": batchID})
	if err != nil {
		return nil, fmt.Errorf("listing open emails of batch %s: %w", batchID, mapErr(err))
	}
	out, err := scanInFlight(rows)
	if err != nil {
		return nil, fmt.Errorf("listing open emails of batch %s: %w", batchID, mapErr(err))
	}
	return out, nil
}

// ErasureCanceledEmails returns the team's emails in which the erasure
// requestID canceled a recipient (CancelSubjectRecipients) and that still
// have a recipient without an outcome: those whose workflow it stopped
// and must have restarted.
func (s *Privacy) ErasureCanceledEmails(ctx context.Context, teamID, requestID uuid.UUID) ([]InFlightEmail, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+inFlightColumns+` FROM email e
		WHERE e.team_id = @team AND e.rcpt_status && `+openStates+`
		AND EXISTS (SELECT 1 FROM email_event v WHERE v.email_id = e.id AND v.type = '`+EventCanceled+`'
			AND v.detail->>'data_request_id' = @req)
		ORDER BY e.id`, pgx.NamedArgs{"team": teamID, "req": requestID.String()})
	if err != nil {
		return nil, fmt.Errorf("listing emails the erasure %s stopped: %w", requestID, mapErr(err))
	}
	out, err := scanInFlight(rows)
	if err != nil {
		return nil, fmt.Errorf("listing emails the erasure %s stopped: %w", requestID, mapErr(err))
	}
	return out, nil
}
