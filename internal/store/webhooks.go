package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/posthaste/posthaste/internal/audit"
)

// Webhook endpoint states.
const (
	WebhookEnabled  = "enabled"
	WebhookDisabled = "disabled"
)

// Webhook message states, as API.md names them: pending (not attempted
// yet), attempting (failed, retry scheduled), success, failed (gave up).
const (
	MessagePending    = "pending"
	MessageAttempting = "attempting"
	MessageSuccess    = "success"
	MessageFailed     = "failed"
)

// Webhook is a team's endpoint.
type Webhook struct {
	ID       uuid.UUID
	TeamID   uuid.UUID
	Endpoint string
	Events   []string
	Status   string
	// Secret is the sealed signing key; PreviousSecret (may be nil) still
	// signs until PreviousSecretUntil.
	Secret              []byte
	PreviousSecret      []byte
	PreviousSecretUntil *time.Time
	FailingSince        *time.Time
	DisabledReason      string
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// WebhookMessage is one event for one endpoint.
type WebhookMessage struct {
	ID            uuid.UUID
	TeamID        uuid.UUID
	WebhookID     uuid.UUID
	Type          string
	OrderKey      string
	Payload       []byte // the JSON body, as sent
	Status        string
	Attempts      int
	NextAttemptAt *time.Time
	CreatedAt     time.Time
}

// WebhookAttempt is one POST of a message.
type WebhookAttempt struct {
	ID             uuid.UUID
	MessageID      uuid.UUID
	AttemptedAt    time.Time
	ResponseStatus *int // nil when no response arrived
	ResponseBody   string
	DurationMS     int
	Error          string
}

// webhookTime formats timestamps in payloads: RFC 3339, UTC, microseconds.
const webhookTime = "2006-01-02T15:04:05.000000Z"

// emailWebhooksCTE continues a WITH clause that has a CTE named ins whose
// email_id column lists the emails the event was recorded for, once each:
// for every one of them it inserts a message with the email's payload for
// every enabled endpoint of the email's team subscribed to @wtype, and an
// outbox entry per endpoint. The data names the email's broadcast
// (broadcast_id) and template (template_id) when it has them, and its
// custom headers ([{name, value}]) when it has any, as Resend's does. Arguments:
// @wtype (nil for events without a webhook type), @at, @at_text, @extra
// (jsonb merged into data).
const emailWebhooksCTE = `, wh AS (
	INSERT INTO webhook_message (id, team_id, webhook_id, type, order_key, payload, status, next_attempt_at, created_at)
	SELECT gen_random_uuid(), w.team_id, w.id, @wtype::text, e.id::text,
		jsonb_build_object('type', @wtype::text, 'created_at', @at_text::text, 'data',
			jsonb_build_object('email_id', e.id, 'from', e.from_addr, 'to', to_jsonb(e.to_addrs),
				'subject', e.subject, 'message_id', coalesce(e.message_id, e.id::text || '@' || e.from_domain),
				'created_at', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
				'tags', (SELECT coalesce(jsonb_object_agg(t->>'name', t->>'value'), '{}'::jsonb)
					FROM jsonb_array_elements(e.tags) t))
				|| jsonb_strip_nulls(jsonb_build_object('broadcast_id', e.broadcast_id, 'template_id', e.template_id,
					'headers', nullif(e.headers, '[]'::jsonb)))
				|| @extra::jsonb),
		'pending', @at, @at
	FROM ins JOIN email e ON e.id = ins.email_id JOIN webhook w ON w.team_id = e.team_id
	WHERE w.status = 'enabled' AND @wtype::text = ANY (w.events)
	RETURNING webhook_id, team_id
), wake AS (
	INSERT INTO outbox (kind, team_id, ref) SELECT DISTINCT '` + OutboxWebhook + `', team_id, webhook_id FROM wh
	WHERE NOT EXISTS (` + pendingWakeSQL + `)
)`

// pendingWakeSQL finds a wake-up of the endpoint wh.webhook_id that no
// drain holds yet, and locks it until the calling transaction commits: that
// entry's signal will then be sent after this message is visible, so no
// second entry is needed. An entry a drain holds is skipped, since its
// signal may already be gone.
const pendingWakeSQL = `SELECT 1 FROM outbox o WHERE o.kind = '` + OutboxWebhook + `' AND o.ref = wh.webhook_id
	FOR UPDATE SKIP LOCKED`

// EmailWebhookType is the webhook event type of an email event, or "" for
// events that have none (queued, canceled).
func EmailWebhookType(eventType string) string {
	switch eventType {
	case EventSent, EventDelivered, EventDeliveryDelayed, EventBounced, EventComplained, EventFailed,
		EventScheduled, EventSuppressed, EventOpened, EventClicked:
		return "email." + eventType
	}
	return ""
}

// webhookArgs adds the arguments of emailWebhooksCTE for ev.
func webhookArgs(args pgx.NamedArgs, ev Event, at time.Time) {
	var wtype *string
	if t := EmailWebhookType(ev.Type); t != "" {
		wtype = &t
	}
	args["wtype"] = wtype
	args["at"] = at
	args["at_text"] = at.UTC().Format(webhookTime)
	args["extra"] = webhookExtra(ev)
}

// webhookExtra is what an event adds to the data of its payload (API.md):
// bounce, failed, click; the recipient the event is about, when it names one.
func webhookExtra(ev Event) map[string]any {
	extra := map[string]any{}
	str := func(k string) string { s, _ := ev.Detail[k].(string); return s }
	switch ev.Type {
	case EventBounced:
		extra["bounce"] = BounceOf(ev.Detail)
	case EventFailed:
		reason := str("reason")
		if reason == "" {
			reason = str("message")
		}
		extra["failed"] = map[string]any{"reason": reason}
	case EventSuppressed:
		extra["suppressed"] = suppressedOf(ev.Detail)
	case "clicked":
		extra["click"] = map[string]any{"link": str("link"), "timestamp": str("timestamp"),
			"ipAddress": str("ipAddress"), "userAgent": str("userAgent")}
	}
	if ev.Recipient != "" {
		extra["recipient"] = ev.Recipient
	}
	return extra
}

// suppressedOf is the `suppressed` object of an email.suppressed payload,
// Resend's: type OnAccountSuppressionList (the team's list), the reason
// the address is on it (previous_bounce, previous_complaint, or
// Posthaste's manual for an entry added by hand), message and
// diagnosticCode (empty: no server was asked). Events without the list's
// reason (the sandbox's suppressed@ address) are previous_bounce.
func suppressedOf(detail map[string]any) map[string]any {
	reason := "previous_bounce"
	switch detail["suppression"] {
	case SuppressionComplaint:
		reason = "previous_complaint"
	case SuppressionManual:
		reason = SuppressionManual
	}
	msg, _ := detail["reason"].(string)
	return map[string]any{"type": "OnAccountSuppressionList", "reason": reason, "message": msg,
		"diagnosticCode": []string{}}
}

// emitEvent writes, with the change the caller's transaction tx makes,
// an event that is not about an email (domain.created, contact.updated,
// ...) for every enabled endpoint of the team subscribed to its type, with
// an outbox entry per endpoint, and notifies OutboxChannel, so that the
// dispatchers wake when tx commits. (An endpoint that already has a
// waiting entry gets no second one; a drain that skipped that entry while
// tx held it is woken by the notification.) Messages with the same
// orderKey are delivered in the order they were written. It returns how
// many messages it inserted.
func emitEvent(ctx context.Context, tx pgx.Tx, teamID uuid.UUID, typ, orderKey string, data map[string]any) (int, error) {
	now := time.Now()
	payload := map[string]any{"type": typ, "created_at": now.UTC().Format(webhookTime), "data": data}
	var n int
	err := tx.QueryRow(ctx, `WITH wh AS (
			INSERT INTO webhook_message (id, team_id, webhook_id, type, order_key, payload, status, next_attempt_at, created_at)
			SELECT gen_random_uuid(), team_id, id, @type, @key, @payload, 'pending', @at, @at FROM webhook
			WHERE team_id = @team AND status = 'enabled' AND @type = ANY (events)
			RETURNING webhook_id, team_id
		), wake AS (
			INSERT INTO outbox (kind, team_id, ref) SELECT DISTINCT '`+OutboxWebhook+`', team_id, webhook_id FROM wh
			WHERE NOT EXISTS (`+pendingWakeSQL+`)
		) SELECT count(*) FROM wh`,
		pgx.NamedArgs{"team": teamID, "type": typ, "key": orderKey, "payload": payload, "at": now}).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("emitting %s: %w", typ, mapErr(err))
	}
	if n > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_notify('`+OutboxChannel+`', '')`); err != nil {
			return 0, fmt.Errorf("emitting %s: %w", typ, mapErr(err))
		}
	}
	return n, nil
}

// emitEvents writes, in the change's transaction tx, one event of each of
// types, in that order (see emitEvent); data returns the data of a type.
func emitEvents(ctx context.Context, tx pgx.Tx, teamID uuid.UUID, orderKey string,
	data func(typ string) map[string]any, types []string) error {
	for _, typ := range types {
		if _, err := emitEvent(ctx, tx, teamID, typ, orderKey, data(typ)); err != nil {
			return err
		}
	}
	return nil
}

const webhookColumns = `id, team_id, endpoint, events, status, secret, previous_secret, previous_secret_until,
	failing_since, coalesce(disabled_reason, ''), created_at, updated_at`

func scanWebhook(row pgx.Row) (Webhook, error) {
	var w Webhook
	err := row.Scan(&w.ID, &w.TeamID, &w.Endpoint, &w.Events, &w.Status, &w.Secret, &w.PreviousSecret,
		&w.PreviousSecretUntil, &w.FailingSince, &w.DisabledReason, &w.CreatedAt, &w.UpdatedAt)
	return w, mapErr(err)
}

// MaxWebhooksPerTeam bounds a team's endpoints, enabled or not: every
// email event is fanned out to each of them.
const MaxWebhooksPerTeam = 20

// ErrLimitReached matches a *LimitError with errors.Is.
var ErrLimitReached = errors.New("limit reached")

// LimitError means a team already has as many of something as it may
// have; nothing was written.
type LimitError struct {
	What string // what is counted, plural: "webhook endpoints"
	Max  int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the team already has %d %s, the most allowed", e.Max, e.What)
}

// Is makes errors.Is(err, ErrLimitReached) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimitReached }

// CreateWebhook inserts an endpoint; a *LimitError when the team already
// has MaxWebhooksPerTeam. The team's row is locked while its endpoints are
// counted, so concurrent creations cannot pass the limit together.
func (s *Webhooks) CreateWebhook(ctx context.Context, w Webhook) error {
	return s.CreateWebhookBy(ctx, w, audit.Entry{})
}

// CreateWebhookBy is CreateWebhook that also appends by, the audit entry
// of the creation, in its transaction.
func (s *Webhooks) CreateWebhookBy(ctx context.Context, w Webhook, by audit.Entry) error {
	return s.audited(ctx, by, func(tx pgx.Tx) error {
		// The count runs in a statement of its own: under READ COMMITTED it
		// sees the endpoints committed by whoever held the lock before. NO KEY
		// UPDATE does not hold up the foreign-key checks of other inserts
		// (emails) that reference the team.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM team WHERE id = @team FOR NO KEY UPDATE`,
			pgx.NamedArgs{"team": w.TeamID}); err != nil {
			return fmt.Errorf("creating webhook: %w", mapErr(err))
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM webhook WHERE team_id = @team`,
			pgx.NamedArgs{"team": w.TeamID}).Scan(&n); err != nil {
			return fmt.Errorf("creating webhook: %w", mapErr(err))
		}
		if n >= MaxWebhooksPerTeam {
			return &LimitError{What: "webhook endpoints", Max: MaxWebhooksPerTeam}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook (id, team_id, endpoint, events, status, secret)
			VALUES (@id, @team, @endpoint, @events, @status, @secret)`,
			pgx.NamedArgs{"id": w.ID, "team": w.TeamID, "endpoint": w.Endpoint, "events": w.Events,
				"status": w.Status, "secret": w.Secret}); err != nil {
			return fmt.Errorf("creating webhook: %w", mapErr(err))
		}
		return nil
	})
}

// GetWebhook returns a team's endpoint; ErrNotFound for other teams'.
func (s *Webhooks) GetWebhook(ctx context.Context, teamID, id uuid.UUID) (Webhook, error) {
	return scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhook
		WHERE id = @id AND team_id = @team`, pgx.NamedArgs{"id": id, "team": teamID}))
}

// WebhookByID returns an endpoint whatever its team: deliveries address
// endpoints by id.
func (s *Webhooks) WebhookByID(ctx context.Context, id uuid.UUID) (Webhook, error) {
	return scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhook WHERE id = @id`,
		pgx.NamedArgs{"id": id}))
}

// ListWebhooks lists a team's endpoints, newest first.
func (s *Webhooks) ListWebhooks(ctx context.Context, teamID uuid.UUID, p Page) ([]Webhook, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+webhookColumns+` FROM webhook WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanWebhook)
}

// WebhookUpdate holds what PATCH may change; nil fields stay.
type WebhookUpdate struct {
	Endpoint *string
	Events   []string // nil keeps them
	Status   *string
}

// UpdateWebhook changes an endpoint. Enabling it clears its failure record.
func (s *Webhooks) UpdateWebhook(ctx context.Context, teamID, id uuid.UUID, u WebhookUpdate, by audit.Entry) error {
	return s.webhookChange(ctx, by, func(tx pgx.Tx) (pgconn.CommandTag, error) {
		return tx.Exec(ctx, `UPDATE webhook SET
			endpoint = coalesce(@endpoint, endpoint),
			events = coalesce(@events, events),
			failing_since = CASE WHEN @status::text = 'enabled' THEN NULL ELSE failing_since END,
			disabled_reason = CASE WHEN @status::text = 'enabled' THEN NULL
				WHEN @status::text = 'disabled' AND status = 'enabled' THEN 'Disabled by a team member.'
				ELSE disabled_reason END,
			status = coalesce(@status, status),
			updated_at = now()
		WHERE id = @id AND team_id = @team`,
			pgx.NamedArgs{"id": id, "team": teamID, "endpoint": u.Endpoint, "events": u.Events, "status": u.Status})
	}, "updating webhook %s", id)
}

// DeleteWebhook deletes an endpoint with its messages and attempts.
func (s *Webhooks) DeleteWebhook(ctx context.Context, teamID, id uuid.UUID, by audit.Entry) error {
	return s.webhookChange(ctx, by, func(tx pgx.Tx) (pgconn.CommandTag, error) {
		return tx.Exec(ctx, `DELETE FROM webhook WHERE id = @id AND team_id = @team`,
			pgx.NamedArgs{"id": id, "team": teamID})
	}, "deleting webhook %s", id)
}

// RotateWebhookSecret makes secret (sealed) the endpoint's secret; the
// current one keeps signing until until.
func (s *Webhooks) RotateWebhookSecret(ctx context.Context, teamID, id uuid.UUID, secret []byte, until time.Time, by audit.Entry) error {
	return s.webhookChange(ctx, by, func(tx pgx.Tx) (pgconn.CommandTag, error) {
		return tx.Exec(ctx, `UPDATE webhook SET previous_secret = secret, previous_secret_until = @until,
			secret = @secret, updated_at = now()
		WHERE id = @id AND team_id = @team`,
			pgx.NamedArgs{"id": id, "team": teamID, "secret": secret, "until": until})
	}, "rotating secret of webhook %s", id)
}

// webhookChange runs exec, a statement on one endpoint, in a transaction
// that also appends by, the audit entry of the change (none when zero).
// ErrNotFound when the statement changed no row; other errors are wrapped
// as what, id.
func (s *Webhooks) webhookChange(ctx context.Context, by audit.Entry, exec func(pgx.Tx) (pgconn.CommandTag, error),
	what string, id uuid.UUID) error {
	var found bool
	err := s.audited(ctx, by, func(tx pgx.Tx) error {
		tag, err := exec(tx)
		if err != nil {
			return fmt.Errorf(what+": %w", id, mapErr(err))
		}
		if found = tag.RowsAffected() > 0; !found {
			return ErrNotFound
		}
		return nil
	})
	if !found && errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// DisableWebhook disables an enabled endpoint for reason and fails its
// undelivered messages (they can be replayed once it is enabled again).
// It reports whether this call disabled it.
func (s *Webhooks) DisableWebhook(ctx context.Context, id uuid.UUID, reason string) (bool, error) {
	disabled := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE webhook SET status = 'disabled', disabled_reason = @reason, updated_at = now()
			WHERE id = @id AND status = 'enabled'`, pgx.NamedArgs{"id": id, "reason": reason})
		if err != nil {
			return fmt.Errorf("disabling webhook %s: %w", id, mapErr(err))
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_message SET status = 'failed', next_attempt_at = NULL, updated_at = now()
			WHERE webhook_id = @id AND status IN ('pending', 'attempting')`, pgx.NamedArgs{"id": id}); err != nil {
			return fmt.Errorf("failing messages of webhook %s: %w", id, mapErr(err))
		}
		disabled = tag.RowsAffected() > 0
		return nil
	})
	if err != nil {
		return false, err
	}
	return disabled, nil
}

const messageColumns = `id, team_id, webhook_id, type, order_key, payload::text, status, attempts,
	next_attempt_at, created_at`

func scanMessage(row pgx.Row) (WebhookMessage, error) {
	var m WebhookMessage
	var payload string
	err := row.Scan(&m.ID, &m.TeamID, &m.WebhookID, &m.Type, &m.OrderKey, &payload, &m.Status, &m.Attempts,
		&m.NextAttemptAt, &m.CreatedAt)
	m.Payload = []byte(payload)
	return m, mapErr(err)
}

// DueMessages returns the messages of an endpoint whose turn has come, in
// the order they must be delivered: for up to groups order keys whose
// first undelivered message is due at now (the oldest first), that message
// and the undelivered ones after it, at most limit in all. Keys whose first
// message waits for a retry are left out, so they cannot crowd out the
// others.
func (s *Webhooks) DueMessages(ctx context.Context, webhookID uuid.UUID, now time.Time, groups, limit int) ([]WebhookMessage, error) {
	rows, err := s.pool.Query(ctx, `WITH heads AS (
			SELECT DISTINCT ON (order_key) order_key, seq, next_attempt_at FROM webhook_message
			WHERE webhook_id = @id AND status IN ('pending', 'attempting') ORDER BY order_key, seq
		), due AS (
			SELECT order_key FROM heads WHERE next_attempt_at IS NULL OR next_attempt_at <= @now
			ORDER BY seq LIMIT @groups
		)
		SELECT `+messageColumns+` FROM webhook_message JOIN due USING (order_key)
		WHERE webhook_id = @id AND status IN ('pending', 'attempting') ORDER BY seq LIMIT @limit`,
		pgx.NamedArgs{"id": webhookID, "now": now, "groups": groups, "limit": limit})
	if err != nil {
		return nil, mapErr(err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookMessage, error) { return scanMessage(r) })
	if err != nil {
		return nil, fmt.Errorf("reading webhook messages: %w", mapErr(err))
	}
	return ms, nil
}

// NextWebhookAttempt is the earliest time a message of the endpoint is
// due, counting only the first undelivered message of each order key (the
// others wait for it); nil when nothing is left to deliver.
func (s *Webhooks) NextWebhookAttempt(ctx context.Context, webhookID uuid.UUID) (*time.Time, error) {
	var t *time.Time
	err := s.pool.QueryRow(ctx, `SELECT min(next_attempt_at) FROM (
			SELECT DISTINCT ON (order_key) next_attempt_at FROM webhook_message
			WHERE webhook_id = @id AND status IN ('pending', 'attempting') ORDER BY order_key, seq) h`,
		pgx.NamedArgs{"id": webhookID}).Scan(&t)
	return t, mapErr(err)
}

// AttemptOutcome is an attempt and what it did to its message.
type AttemptOutcome struct {
	Attempt   WebhookAttempt
	WebhookID uuid.UUID
	TeamID    uuid.UUID
	Status    string     // the message's new status
	NextAt    *time.Time // its next attempt, when Status is attempting
	Succeeded bool       // the endpoint answered 2xx
}

// RecordWebhookAttempt stores an attempt, moves its message and keeps the
// endpoint's failure record: cleared by a success, started by the first
// failure. It returns since when the endpoint has been failing (nil after
// a success).
func (s *Webhooks) RecordWebhookAttempt(ctx context.Context, o AttemptOutcome) (*time.Time, error) {
	a := o.Attempt
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO webhook_attempt (id, message_id, team_id, attempted_at, response_status, response_body,
			duration_ms, error) VALUES (@id, @msg, @team, @at, @status, @body, @ms, @err)`,
		pgx.NamedArgs{"id": a.ID, "msg": a.MessageID, "team": o.TeamID, "at": a.AttemptedAt,
			"status": a.ResponseStatus, "body": a.ResponseBody, "ms": a.DurationMS, "err": a.Error})
	// A message failed meanwhile (its endpoint was disabled) stays failed.
	b.Queue(`UPDATE webhook_message SET status = @status, attempts = attempts + 1, next_attempt_at = @next,
			updated_at = now() WHERE id = @msg AND status IN ('pending', 'attempting')`,
		pgx.NamedArgs{"msg": a.MessageID, "status": o.Status, "next": o.NextAt})
	var since *time.Time
	b.Queue(`UPDATE webhook SET failing_since = CASE WHEN @ok::boolean THEN NULL
			ELSE coalesce(failing_since, @at) END WHERE id = @id RETURNING failing_since`,
		pgx.NamedArgs{"id": o.WebhookID, "ok": o.Succeeded, "at": a.AttemptedAt}).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&since)
			if err == pgx.ErrNoRows {
				return nil // deleted meanwhile
			}
			return err
		})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("recording webhook attempt: %w", mapErr(err))
	}
	return since, nil
}

// InsertWebhookMessage stores a message for one endpoint (test events).
func (s *Webhooks) InsertWebhookMessage(ctx context.Context, m WebhookMessage) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_message (id, team_id, webhook_id, type, order_key, payload,
			status, next_attempt_at) VALUES (@id, @team, @webhook, @type, @key, @payload::jsonb, @status, @next)`,
		pgx.NamedArgs{"id": m.ID, "team": m.TeamID, "webhook": m.WebhookID, "type": m.Type, "key": m.OrderKey,
			"payload": string(m.Payload), "status": m.Status, "next": m.NextAttemptAt})
	if err != nil {
		return fmt.Errorf("inserting webhook message: %w", mapErr(err))
	}
	return nil
}

// ListWebhookMessages lists an endpoint's messages, newest first; after
// and before are message ids (exclusive cursors).
func (s *Webhooks) ListWebhookMessages(ctx context.Context, teamID, webhookID uuid.UUID, p Page) ([]WebhookMessage, bool, error) {
	q := `SELECT ` + messageColumns + ` FROM webhook_message WHERE team_id = @team AND webhook_id = @webhook`
	args := pgx.NamedArgs{"team": teamID, "webhook": webhookID, "limit": p.Limit + 1}
	order := " ORDER BY seq DESC"
	switch {
	case p.After != nil:
		q += " AND seq < (SELECT seq FROM webhook_message WHERE id = @cursor)"
		args["cursor"] = *p.After
	case p.Before != nil:
		q += " AND seq > (SELECT seq FROM webhook_message WHERE id = @cursor)"
		args["cursor"] = *p.Before
		order = " ORDER BY seq ASC"
	}
	rows, err := s.pool.Query(ctx, q+order+" LIMIT @limit", args)
	if err != nil {
		return nil, false, mapErr(err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookMessage, error) { return scanMessage(r) })
	if err != nil {
		return nil, false, fmt.Errorf("listing webhook messages: %w", mapErr(err))
	}
	more := len(ms) > p.Limit
	if more {
		ms = ms[:p.Limit]
	}
	if p.Before != nil {
		for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
			ms[i], ms[j] = ms[j], ms[i]
		}
	}
	return ms, more, nil
}

// GetWebhookMessage returns one message of a team's endpoint.
func (s *Webhooks) GetWebhookMessage(ctx context.Context, teamID, webhookID, id uuid.UUID) (WebhookMessage, error) {
	return scanMessage(s.pool.QueryRow(ctx, `SELECT `+messageColumns+` FROM webhook_message
		WHERE id = @id AND webhook_id = @webhook AND team_id = @team`,
		pgx.NamedArgs{"id": id, "webhook": webhookID, "team": teamID}))
}

// WebhookAttempts lists the attempts of a team's message, oldest first.
func (s *Webhooks) WebhookAttempts(ctx context.Context, teamID, messageID uuid.UUID) ([]WebhookAttempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, message_id, attempted_at, response_status, response_body,
			duration_ms, error FROM webhook_attempt WHERE message_id = @id AND team_id = @team
		ORDER BY attempted_at, id`, pgx.NamedArgs{"id": messageID, "team": teamID})
	if err != nil {
		return nil, mapErr(err)
	}
	as, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookAttempt, error) {
		var a WebhookAttempt
		err := r.Scan(&a.ID, &a.MessageID, &a.AttemptedAt, &a.ResponseStatus, &a.ResponseBody, &a.DurationMS, &a.Error)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading webhook attempts: %w", mapErr(err))
	}
	return as, nil
}

// ReplayWebhookMessage makes a message of a team's endpoint due again now,
// with a fresh retry schedule and the same id.
func (s *Webhooks) ReplayWebhookMessage(ctx context.Context, teamID, webhookID, id uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_message SET status = 'pending', attempts = 0,
			next_attempt_at = now(), updated_at = now()
		WHERE id = @id AND webhook_id = @webhook AND team_id = @team`,
		pgx.NamedArgs{"id": id, "webhook": webhookID, "team": teamID})
	if err != nil {
		return fmt.Errorf("replaying webhook message %s: %w", id, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// TeamOwners returns the email addresses of a team's owners.
func (s *Webhooks) TeamOwners(ctx context.Context, teamID uuid.UUID) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT u.email FROM membership m JOIN app_user u ON u.id = m.user_id
		WHERE m.team_id = @team AND m.role = 'owner' ORDER BY u.email`, pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reading team owners: %w", mapErr(err))
	}
	return out, nil
}

// SendableDomainTeam returns the team owning a live, sendable domain of
// that name (the operator's domain of POSTHASTE_SYSTEM_FROM).
func (s *Webhooks) SendableDomainTeam(ctx context.Context, name string) (uuid.UUID, error) {
	var team uuid.UUID
	err := s.pool.QueryRow(ctx, `SELECT team_id FROM domain WHERE name = @name AND deleted_at IS NULL
		AND status IN ('verified', 'temporary_failure') ORDER BY verified_at LIMIT 1`,
		pgx.NamedArgs{"name": name}).Scan(&team)
	return team, mapErr(err)
}

// domainPayload is the data of a domain.* webhook event: the domain and,
// as Resend's carry them, its records (Config.DomainRecords).
func (s *Store) domainPayload(d Domain) map[string]any {
	p := map[string]any{"id": d.ID.String(), "name": d.Name, "status": d.Status, "region": d.Region,
		"created_at": d.CreatedAt.UTC().Format(webhookTime)}
	if s.domainRecords != nil {
		p["records"] = s.domainRecords(d)
	}
	return p
}
