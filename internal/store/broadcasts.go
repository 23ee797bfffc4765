package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Broadcast statuses. A draft is edited; sending it makes it scheduled (a
// time in the future) or queued; the Broadcast workflow makes it sending
// when it hands its first chunk to the send path, paused while the team's
// monthly quota is used up, and sent when every contact was handed over.
// Canceling stops it at any point before sent.
const (
	BroadcastDraft     = "draft"
	BroadcastScheduled = "scheduled"
	BroadcastQueued    = "queued"
	BroadcastSending   = "sending"
	BroadcastPaused    = "paused"
	BroadcastSent      = "sent"
	BroadcastCanceled  = "canceled"
)

// broadcastUnderWay are the statuses of a broadcast that was sent and has
// not finished: cancel applies to them, and the workflow goes on in them.
var broadcastUnderWay = []string{BroadcastScheduled, BroadcastQueued, BroadcastSending, BroadcastPaused}

// Broadcast is one email to every subscribed contact of a segment, as
// written: subject and bodies hold the {{{…}}} placeholders each contact's
// email fills.
type Broadcast struct {
	ID          uuid.UUID
	TeamID      uuid.UUID
	Name        string
	SegmentID   *uuid.UUID
	TopicID     *uuid.UUID
	From        string
	Subject     string
	ReplyTo     []string
	PreviewText string
	HTML        *string
	Text        *string
	// Components is the component document the broadcast was written as
	// in the editor, nil otherwise; HTML and Text are then its rendering.
	Components json.RawMessage
	Status     string
	// StatusReason says why a paused broadcast waits, or why it stopped.
	StatusReason *string
	ScheduledAt  *time.Time
	SentAt       *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// BroadcastStateError is an action a broadcast's status does not allow,
// such as editing one that was sent.
type BroadcastStateError struct {
	Status string
	Action string // "updated", "deleted", "sent", "canceled"
}

func (e *BroadcastStateError) Error() string {
	return fmt.Sprintf("a broadcast that is %s cannot be %s", e.Status, e.Action)
}

const broadcastColumns = `id, team_id, name, segment_id, topic_id, from_addr, subject, reply_to, preview_text,
	html, text_body, components, status, status_reason, scheduled_at, sent_at, created_at, updated_at`

func scanBroadcast(row pgx.Row) (Broadcast, error) {
	var b Broadcast
	err := row.Scan(&b.ID, &b.TeamID, &b.Name, &b.SegmentID, &b.TopicID, &b.From, &b.Subject, &b.ReplyTo,
		&b.PreviewText, &b.HTML, &b.Text, &b.Components, &b.Status, &b.StatusReason, &b.ScheduledAt, &b.SentAt,
		&b.CreatedAt, &b.UpdatedAt)
	return b, mapErr(err)
}

func broadcastArgs(b Broadcast) pgx.NamedArgs {
	replyTo := b.ReplyTo
	if replyTo == nil {
		replyTo = []string{}
	}
	var components any
	if len(b.Components) > 0 {
		components = string(b.Components)
	}
	return pgx.NamedArgs{"id": b.ID, "team": b.TeamID, "name": b.Name, "segment": b.SegmentID,
		"topic": b.TopicID, "from": b.From, "subject": b.Subject, "reply_to": replyTo,
		"preview_text": b.PreviewText, "html": b.HTML, "text": b.Text, "components": components}
}

// checkBroadcastRefs checks that the segment and topic a broadcast names
// are the team's: a *RefError otherwise.
func checkBroadcastRefs(ctx context.Context, q pgx.Tx, b Broadcast) error {
	for _, ref := range []struct {
		what, table string
		id          *uuid.UUID
	}{{"segment", "segment", b.SegmentID}, {"topic", "topic", b.TopicID}} {
		if ref.id == nil {
			continue
		}
		var ok bool
		err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+ref.table+` WHERE team_id = @team AND id = @id)`,
			pgx.NamedArgs{"team": b.TeamID, "id": *ref.id}).Scan(&ok)
		if err != nil {
			return fmt.Errorf("checking %s: %w", ref.what, mapErr(err))
		}
		if !ok {
			return &RefError{What: ref.what, ID: *ref.id}
		}
	}
	return nil
}

// CreateBroadcast stores a new draft and returns it. A segment or topic
// that is not the team's is a *RefError.
func (s *Broadcasts) CreateBroadcast(ctx context.Context, b Broadcast) (Broadcast, error) {
	var got Broadcast
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkBroadcastRefs(ctx, tx, b); err != nil {
			return err
		}
		var err error
		got, err = scanBroadcast(tx.QueryRow(ctx, `INSERT INTO broadcast (id, team_id, name, segment_id, topic_id,
				from_addr, subject, reply_to, preview_text, html, text_body, components)
			VALUES (@id, @team, @name, @segment, @topic, @from, @subject, @reply_to, @preview_text, @html, @text,
				@components::jsonb)
			RETURNING `+broadcastColumns, broadcastArgs(b)))
		return err
	})
	if err != nil {
		return Broadcast{}, fmt.Errorf("creating broadcast: %w", err)
	}
	return got, nil
}

// Broadcast returns one of the team's broadcasts; ErrNotFound when the
// team has none with this id.
func (s *Broadcasts) Broadcast(ctx context.Context, teamID, id uuid.UUID) (Broadcast, error) {
	return scanBroadcast(s.pool.QueryRow(ctx, `SELECT `+broadcastColumns+` FROM broadcast
		WHERE team_id = @team AND id = @id`, pgx.NamedArgs{"team": teamID, "id": id}))
}

// BroadcastByID returns a broadcast whatever its team: workflows address
// broadcasts by id only.
func (s *Broadcasts) BroadcastByID(ctx context.Context, id uuid.UUID) (Broadcast, error) {
	return scanBroadcast(s.pool.QueryRow(ctx, `SELECT `+broadcastColumns+` FROM broadcast WHERE id = @id`,
		pgx.NamedArgs{"id": id}))
}

// ListBroadcasts lists the team's broadcasts, newest first.
func (s *Broadcasts) ListBroadcasts(ctx context.Context, teamID uuid.UUID, p Page) ([]Broadcast, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+broadcastColumns+` FROM broadcast WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanBroadcast)
}

// changeBroadcast runs change on the team's broadcast id, read for update,
// in one transaction, and returns what change returns; what names the
// change in errors ("updating", "sending", …).
func (s *Broadcasts) changeBroadcast(ctx context.Context, teamID, id uuid.UUID, what string,
	change func(tx pgx.Tx, b Broadcast) (Broadcast, error)) (Broadcast, error) {
	var got Broadcast
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		b, err := scanBroadcast(tx.QueryRow(ctx, `SELECT `+broadcastColumns+` FROM broadcast
			WHERE team_id = @team AND id = @id FOR UPDATE`, pgx.NamedArgs{"team": teamID, "id": id}))
		if err != nil {
			return err
		}
		got, err = change(tx, b)
		return err
	})
	if err != nil {
		return Broadcast{}, fmt.Errorf("%s broadcast %s: %w", what, id, err)
	}
	return got, nil
}

// draftOnly refuses a broadcast that is no longer a draft.
func draftOnly(b Broadcast, action string) error {
	if b.Status != BroadcastDraft {
		return &BroadcastStateError{Status: b.Status, Action: action}
	}
	return nil
}

// UpdateBroadcast applies edit to one of the team's drafts and stores the
// result, all in one transaction; an error from edit is returned as it is
// and nothing is written. A broadcast that is no longer a draft is a
// *BroadcastStateError; a segment or topic not the team's a *RefError.
func (s *Broadcasts) UpdateBroadcast(ctx context.Context, teamID, id uuid.UUID, edit func(*Broadcast) error) (Broadcast, error) {
	return s.changeBroadcast(ctx, teamID, id, "updating", func(tx pgx.Tx, b Broadcast) (Broadcast, error) {
		if err := draftOnly(b, "updated"); err != nil {
			return Broadcast{}, err
		}
		if err := edit(&b); err != nil {
			return Broadcast{}, err
		}
		b.ID, b.TeamID = id, teamID
		if err := checkBroadcastRefs(ctx, tx, b); err != nil {
			return Broadcast{}, err
		}
		return scanBroadcast(tx.QueryRow(ctx, `UPDATE broadcast SET name = @name, segment_id = @segment,
				topic_id = @topic, from_addr = @from, subject = @subject, reply_to = @reply_to,
				preview_text = @preview_text, html = @html, text_body = @text, components = @components::jsonb,
				updated_at = now()
			WHERE team_id = @team AND id = @id RETURNING `+broadcastColumns, broadcastArgs(b)))
	})
}

// DeleteBroadcast deletes one of the team's drafts and returns it; a
// broadcast that is no longer a draft is a *BroadcastStateError.
func (s *Broadcasts) DeleteBroadcast(ctx context.Context, teamID, id uuid.UUID) (Broadcast, error) {
	return s.changeBroadcast(ctx, teamID, id, "deleting", func(tx pgx.Tx, b Broadcast) (Broadcast, error) {
		if err := draftOnly(b, "deleted"); err != nil {
			return Broadcast{}, err
		}
		_, err := tx.Exec(ctx, `DELETE FROM broadcast WHERE id = @id`, pgx.NamedArgs{"id": id})
		return b, err
	})
}

// DuplicateBroadcast copies one of the team's broadcasts, whatever its
// status, into a new draft with id newID and name name.
func (s *Broadcasts) DuplicateBroadcast(ctx context.Context, teamID, id, newID uuid.UUID, name string) (Broadcast, error) {
	got, err := scanBroadcast(s.pool.QueryRow(ctx, `INSERT INTO broadcast (id, team_id, name, segment_id, topic_id,
			from_addr, subject, reply_to, preview_text, html, text_body, components)
		SELECT @new, team_id, @name, segment_id, topic_id, from_addr, subject, reply_to, preview_text, html,
			text_body, components
		FROM broadcast WHERE team_id = @team AND id = @id
		RETURNING `+broadcastColumns, pgx.NamedArgs{"team": teamID, "id": id, "new": newID, "name": name}))
	if err != nil {
		return Broadcast{}, fmt.Errorf("duplicating broadcast %s: %w", id, err)
	}
	return got, nil
}

// SendBroadcast sends one of the team's drafts: scheduled for at when at
// is after now, queued otherwise, with the outbox entry that starts its
// Broadcast workflow, in one transaction. check sees the draft under lock
// and may refuse it (its error is returned as it is, nothing written).
// A broadcast that is no longer a draft is a *BroadcastStateError.
func (s *Broadcasts) SendBroadcast(ctx context.Context, teamID, id uuid.UUID, at *time.Time,
	check func(Broadcast) error) (Broadcast, error) {
	return s.changeBroadcast(ctx, teamID, id, "sending", func(tx pgx.Tx, b Broadcast) (Broadcast, error) {
		if err := draftOnly(b, "sent"); err != nil {
			return Broadcast{}, err
		}
		if check != nil {
			if err := check(b); err != nil {
				return Broadcast{}, err
			}
		}
		status := BroadcastQueued
		if at != nil && at.After(time.Now()) {
			status = BroadcastScheduled
		} else {
			at = nil
		}
		got, err := scanBroadcast(tx.QueryRow(ctx, `UPDATE broadcast SET status = @status, scheduled_at = @at,
				status_reason = NULL, updated_at = now()
			WHERE id = @id RETURNING `+broadcastColumns, pgx.NamedArgs{"id": id, "status": status, "at": at}))
		if err != nil {
			return Broadcast{}, err
		}
		_, err = tx.Exec(ctx, `INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @id)`,
			pgx.NamedArgs{"kind": OutboxBroadcast, "team": teamID, "id": id})
		return got, err
	})
}

// CancelBroadcast cancels one of the team's broadcasts that is scheduled
// or under way: no chunk is handed to the send path after this commits
// (HandOffBroadcastChunk locks the same row). Emails already handed over
// go on. Canceling a canceled broadcast returns it as it is; a draft or a
// sent broadcast is a *BroadcastStateError.
func (s *Broadcasts) CancelBroadcast(ctx context.Context, teamID, id uuid.UUID) (Broadcast, error) {
	return s.changeBroadcast(ctx, teamID, id, "canceling", func(tx pgx.Tx, b Broadcast) (Broadcast, error) {
		switch b.Status {
		case BroadcastCanceled:
			return b, nil
		case BroadcastDraft, BroadcastSent:
			return Broadcast{}, &BroadcastStateError{Status: b.Status, Action: "canceled"}
		}
		return scanBroadcast(tx.QueryRow(ctx, `UPDATE broadcast SET status = @status, status_reason = NULL,
				updated_at = now()
			WHERE id = @id RETURNING `+broadcastColumns, pgx.NamedArgs{"id": id, "status": BroadcastCanceled}))
	})
}

// MoveBroadcast moves a broadcast from one of the statuses from to status
// to with reason (nil clears it); sent also sets sent_at. It returns the
// status the broadcast has afterwards, moved or not (a canceled broadcast
// stays canceled).
func (s *Broadcasts) MoveBroadcast(ctx context.Context, id uuid.UUID, from []string, to string, reason *string) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, `WITH moved AS (
			UPDATE broadcast SET status = @to, status_reason = @reason, updated_at = now(),
				sent_at = CASE WHEN @to = 'sent' THEN now() ELSE sent_at END
			WHERE id = @id AND status = ANY(@from) RETURNING status)
		SELECT status FROM moved UNION ALL SELECT status FROM broadcast WHERE id = @id AND NOT EXISTS (SELECT 1 FROM moved)`,
		pgx.NamedArgs{"id": id, "from": from, "to": to, "reason": reason}).Scan(&status)
	if err != nil {
		return "", fmt.Errorf("moving broadcast %s to %s: %w", id, to, mapErr(err))
	}
	return status, nil
}

// ReserveBroadcastPace reserves n emails of the team's broadcast pace at
// perSecond emails a second, shared by all the team's broadcasts and all
// processes, and returns how long to wait before handing them to the send
// path (0: now). Reserving again, say from a retried step, only slows the
// team down by n emails' time.
func (s *Broadcasts) ReserveBroadcastPace(ctx context.Context, teamID uuid.UUID, n int, perSecond float64) (time.Duration, error) {
	if perSecond <= 0 {
		return 0, nil
	}
	d := time.Duration(float64(n) / perSecond * float64(time.Second))
	var waitUS int64
	err := s.pool.QueryRow(ctx, `INSERT INTO broadcast_pace AS p (team_id, next_at)
			VALUES (@team, now() + @d * interval '1 microsecond')
		ON CONFLICT (team_id) DO UPDATE SET next_at = greatest(p.next_at, now()) + @d * interval '1 microsecond'
		RETURNING (extract(epoch FROM next_at - now()) * 1000000)::bigint - @d`,
		pgx.NamedArgs{"team": teamID, "d": d.Microseconds()}).Scan(&waitUS)
	if err != nil {
		return 0, fmt.Errorf("reserving broadcast pace: %w", mapErr(err))
	}
	return max(time.Duration(waitUS)*time.Microsecond, 0), nil
}

// BroadcastCounts are the emails of a broadcast by the state they are in,
// and the contacts that unsubscribed through them.
type BroadcastCounts struct {
	Total           int64 // emails of the broadcast
	Queued          int64 // handed to the send path, not sent yet
	Sent            int64 // left Posthaste: delivered, delayed, bounced, complained included
	Delivered       int64
	DeliveryDelayed int64
	Bounced         int64
	Complained      int64
	Suppressed      int64
	Failed          int64
	Canceled        int64
	Opened          int64
	Clicked         int64
	Unsubscribed    int64
}

// BroadcastCounts counts the emails of one of the team's broadcasts.
func (s *Broadcasts) BroadcastCounts(ctx context.Context, teamID, id uuid.UUID) (BroadcastCounts, error) {
	var c BroadcastCounts
	err := s.pool.QueryRow(ctx, `SELECT count(*),
			count(*) FILTER (WHERE last_event IN ('queued', 'scheduled')),
			count(*) FILTER (WHERE last_event IN ('sent', 'delivered', 'delivery_delayed', 'bounced', 'complained',
				'opened', 'clicked')),
			count(*) FILTER (WHERE last_event IN ('delivered', 'complained', 'opened', 'clicked')),
			count(*) FILTER (WHERE last_event = 'delivery_delayed'),
			count(*) FILTER (WHERE last_event = 'bounced'),
			count(*) FILTER (WHERE last_event = 'complained'),
			count(*) FILTER (WHERE last_event = 'suppressed'),
			count(*) FILTER (WHERE last_event = 'failed'),
			count(*) FILTER (WHERE last_event = 'canceled'),
			count(*) FILTER (WHERE last_event = 'opened'),
			count(*) FILTER (WHERE last_event = 'clicked'),
			(SELECT count(*) FROM broadcast_unsubscribe u WHERE u.broadcast_id = @id)
		FROM email WHERE broadcast_id = @id AND team_id = @team`,
		pgx.NamedArgs{"team": teamID, "id": id}).Scan(&c.Total, &c.Queued, &c.Sent, &c.Delivered,
		&c.DeliveryDelayed, &c.Bounced, &c.Complained, &c.Suppressed, &c.Failed, &c.Canceled, &c.Opened,
		&c.Clicked, &c.Unsubscribed)
	if err != nil {
		return BroadcastCounts{}, fmt.Errorf("counting broadcast %s: %w", id, mapErr(err))
	}
	return c, nil
}

// BroadcastAudience counts the contacts a broadcast to the team's segment
// (and topic, when not nil) would go to now: the segment's contacts that
// have not unsubscribed and, with a topic, are subscribed to it, as the
// chunks select them.
func (s *Broadcasts) BroadcastAudience(ctx context.Context, teamID, segmentID uuid.UUID, topicID *uuid.UUID) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*)
		FROM contact_segment cs JOIN contact c ON c.id = cs.contact_id
		WHERE cs.segment_id = @segment AND cs.team_id = @team AND NOT c.unsubscribed
			AND (@topic::uuid IS NULL OR coalesce(
				(SELECT ct.subscription FROM contact_topic ct WHERE ct.contact_id = c.id AND ct.topic_id = @topic),
				(SELECT t.default_subscription FROM topic t WHERE t.id = @topic AND t.team_id = @team)) = 'opt_in')`,
		pgx.NamedArgs{"team": teamID, "segment": segmentID, "topic": topicID}).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting broadcast audience: %w", mapErr(err))
	}
	return n, nil
}

// SegmentContactCounts counts the contacts of each of the team's segments
// that have not unsubscribed; a segment without any is absent.
func (s *Broadcasts) SegmentContactCounts(ctx context.Context, teamID uuid.UUID) (map[uuid.UUID]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT cs.segment_id, count(*)
		FROM contact_segment cs JOIN contact c ON c.id = cs.contact_id
		WHERE cs.team_id = @team AND NOT c.unsubscribed GROUP BY cs.segment_id`, pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, fmt.Errorf("counting segment contacts: %w", mapErr(err))
	}
	out := map[uuid.UUID]int64{}
	var id uuid.UUID
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		out[id] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting segment contacts: %w", mapErr(err))
	}
	return out, nil
}

// BroadcastRecipient is one contact a broadcast went to.
type BroadcastRecipient struct {
	EmailID   uuid.UUID
	ContactID *uuid.UUID
	Email     string
	Status    string // the email's last_event
	CreatedAt time.Time
	// Count is how many times the recipient opened (kind "opened") or
	// clicked (kind "clicked") the email, machine hits left out (see
	// Metrics); 0 for other kinds.
	Count int64
	// ClickedLinks are the links the recipient clicked, most clicked
	// first, for kind "clicked"; nil for other kinds.
	ClickedLinks []LinkClicks
	// BounceType is the bounce's type in lower case (BounceTypes), for
	// kind "bounced"; "" for other kinds.
	BounceType string
}

// LinkClicks counts the human clicks on one link.
type LinkClicks struct {
	URL    string `json:"url"`
	Clicks int64  `json:"clicks"`
	// Unique counts the recipients who clicked it (ClickedLinks only).
	Unique int64 `json:"-"`
}

// BounceTypes are the bounce types of BroadcastRecipient.BounceType and of
// the bounce-type filter of BroadcastRecipients: Resend's bounce.type, in
// lower case.
func BounceTypes() []string { return []string{"permanent", "transient", "undetermined"} }

// humanHit selects the opens and clicks of email_event ev that are not
// flagged a machine's.
const humanHit = `NOT coalesce(ev.detail @> '{"machine": true}', false)`

// bounceTypeSQL is the lower-case bounce type of email e, from its bounced
// event ("undetermined" when that does not say).
const bounceTypeSQL = `(SELECT lower(coalesce(min(ev.detail->>'type'), 'undetermined')) FROM email_event ev
	WHERE ev.email_id = e.id AND ev.type = '` + EventBounced + `')`

// Recipient kinds of BroadcastRecipients: the email states they select.
var broadcastRecipientStates = map[string][]string{
	"sent":       {"sent", "delivered", "delivery_delayed", "bounced", "complained", "opened", "clicked"},
	"delivered":  {"delivered", "complained", "opened", "clicked"},
	"bounced":    {"bounced"},
	"complained": {"complained"},
	"suppressed": {"suppressed"},
	"failed":     {"failed"},
	"opened":     {"opened", "clicked"},
	"clicked":    {"clicked"},
	"queued":     {"queued"},
	"canceled":   {"canceled"},
}

// BroadcastRecipientKinds are the values BroadcastRecipients takes for
// kind: "unsubscribed" and the keys of broadcastRecipientStates.
func BroadcastRecipientKinds() []string {
	return []string{"sent", "delivered", "opened", "clicked", "bounced", "complained", "unsubscribed",
		"suppressed", "failed", "queued", "canceled"}
}

// BroadcastRecipients lists the recipients of one of the team's broadcasts
// of a kind (BroadcastRecipientKinds; "" is every recipient), newest
// email first, optionally only the address email and, for kind "bounced",
// only bounces of bounceType (BounceTypes; "" is any). Rows of kind
// "opened" and "clicked" carry their Count, "clicked" their ClickedLinks,
// "bounced" their BounceType.
func (s *Broadcasts) BroadcastRecipients(ctx context.Context, teamID, id uuid.UUID, kind, email, bounceType string,
	p Page) ([]BroadcastRecipient, bool, error) {
	args := pgx.NamedArgs{"team": teamID, "broadcast": id}
	filter := ""
	if email != "" {
		args["email"] = NormalizeAddress(email)
		filter = ` AND rcpt_addrs[1] = @email`
	}
	// What the kind adds to each row: a count, the clicked links as JSON, a
	// bounce type.
	count, links, bounce := `0::bigint`, `NULL::jsonb`, `''`
	switch kind {
	case "opened", "clicked":
		count = `(SELECT count(*) FROM email_event ev WHERE ev.email_id = e.id AND ev.type = '` + kind + `'
			AND ` + humanHit + `)`
	case "bounced":
		bounce = bounceTypeSQL
	}
	if kind == "clicked" {
		links = `(SELECT coalesce(jsonb_agg(jsonb_build_object('url', l.url, 'clicks', l.n)
				ORDER BY l.n DESC, l.url), '[]'::jsonb)
			FROM (SELECT ev.detail->>'link' AS url, count(*) AS n FROM email_event ev
				WHERE ev.email_id = e.id AND ev.type = '` + EventClicked + `' AND ` + humanHit + `
					AND ev.detail->>'link' IS NOT NULL
				GROUP BY 1) l)`
	}
	scan := func(row pgx.Row) (BroadcastRecipient, error) {
		var r BroadcastRecipient
		err := row.Scan(&r.EmailID, &r.ContactID, &r.Email, &r.Status, &r.CreatedAt, &r.Count, &r.ClickedLinks,
			&r.BounceType)
		return r, mapErr(err)
	}
	if kind == "unsubscribed" {
		return listPage(ctx, s.Store, p, `SELECT id, contact_id, email, status, created_at, 0::bigint, NULL::jsonb, ''
			FROM (
				SELECT e.id, e.contact_id, u.email, e.last_event AS status, u.created_at, e.team_id, e.rcpt_addrs
				FROM broadcast_unsubscribe u JOIN email e ON e.id = u.email_id
				WHERE u.broadcast_id = @broadcast) r WHERE team_id = @team`+filter, args, scan)
	}
	if kind != "" {
		states, ok := broadcastRecipientStates[kind]
		if !ok {
			return nil, false, fmt.Errorf("unknown recipient kind %q", kind)
		}
		args["states"] = states
		filter += ` AND last_event = ANY(@states)`
	}
	if bounceType != "" {
		args["bounce_type"] = bounceType
		filter += ` AND ` + bounceTypeSQL + ` = @bounce_type`
	}
	return listPage(ctx, s.Store, p, `SELECT id, contact_id, rcpt_addrs[1], last_event, created_at, `+count+`, `+
		links+`, `+bounce+` FROM email e
		WHERE team_id = @team AND broadcast_id = @broadcast`+filter, args, scan)
}

// BroadcastClickedLinks counts the human clicks on each link of one of the
// team's broadcasts' emails: every click, and the recipients who clicked
// (Unique). Most clicked first, then by URL.
func (s *Broadcasts) BroadcastClickedLinks(ctx context.Context, teamID, id uuid.UUID) ([]LinkClicks, error) {
	rows, err := s.pool.Query(ctx, `SELECT ev.detail->>'link', count(*),
			count(DISTINCT (ev.email_id, coalesce(ev.recipient, '')))
		FROM email e JOIN email_event ev ON ev.email_id = e.id
		WHERE e.team_id = @team AND e.broadcast_id = @broadcast AND ev.type = '`+EventClicked+`'
			AND `+humanHit+` AND ev.detail->>'link' IS NOT NULL
		GROUP BY 1 ORDER BY 2 DESC, 1`, pgx.NamedArgs{"team": teamID, "broadcast": id})
	if err != nil {
		return nil, fmt.Errorf("counting clicked links of %s: %w", id, mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LinkClicks, error) {
		var l LinkClicks
		err := r.Scan(&l.URL, &l.Clicks, &l.Unique)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("counting clicked links of %s: %w", id, mapErr(err))
	}
	return out, nil
}

// RecordBroadcastUnsubscribe notes that the recipient of a broadcast's
// email unsubscribed through one of its links; noting it again changes
// nothing. An email that is not the team's broadcast's is ignored.
func (s *Audience) RecordBroadcastUnsubscribe(ctx context.Context, teamID, broadcastID, emailID uuid.UUID, email string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO broadcast_unsubscribe (broadcast_id, email_id, email)
		SELECT @broadcast, id, @email FROM email WHERE id = @email_id AND team_id = @team AND broadcast_id = @broadcast
		ON CONFLICT DO NOTHING`,
		pgx.NamedArgs{"team": teamID, "broadcast": broadcastID, "email_id": emailID, "email": NormalizeAddress(email)})
	if err != nil {
		return fmt.Errorf("recording unsubscribe from broadcast %s: %w", broadcastID, mapErr(err))
	}
	return nil
}

// BroadcastContact is a contact a chunk hands a broadcast to, with what
// rendering its email needs.
type BroadcastContact struct {
	ID         uuid.UUID
	Email      string
	FirstName  string
	LastName   string
	Properties map[string]any
}

// RenderedBroadcast is one contact's email of a broadcast, its
// placeholders filled.
type RenderedBroadcast struct {
	Subject    string
	HTML, Text *string
}

// BroadcastChunk asks HandOffBroadcastChunk for the chunk Seq of a
// broadcast: up to Size contacts of its segment after After (nil: from
// the first), in id order.
type BroadcastChunk struct {
	BroadcastID uuid.UUID
	Seq         int
	After       *uuid.UUID
	Size        int
	// FromDomain and DomainID are the sender's domain as the caller
	// authorised it (DomainID nil for the sandbox).
	FromDomain string
	DomainID   *uuid.UUID
	// Now dates the emails.
	Now time.Time
	// Insights, when set, computes the deliverability insights of each
	// sendable email once it is rendered (submit.EmailInsights, which the
	// store cannot import); nil stores none.
	Insights func(Email) []Insight
}

// BroadcastChunkResult is what a chunk did. Exactly one of Canceled,
// Paused and Done may be set; otherwise the chunk was handed over and the
// next one starts after Last.
type BroadcastChunkResult struct {
	// Canceled: the broadcast was canceled (or deleted); nothing was done.
	Canceled bool
	// Paused: the team's monthly quota is used up; the broadcast is now
	// paused with Reason and nothing else was done.
	Paused bool
	Reason string
	// Done: no contact is left after the cursor.
	Done bool
	// Last is the cursor after this chunk; BatchID the batch its emails
	// were accepted as (nil when none was sendable).
	Last    *uuid.UUID
	BatchID *uuid.UUID
	// Emails handed to the send path, Failed recorded failed (rendering
	// or the sandbox's rules).
	Emails, Failed int
}

// HandOffBroadcastChunk hands one chunk of a broadcast to the send path in
// one transaction: it reads the next contacts of the segment (skipping
// contacts that unsubscribed and, with a topic, those not subscribed to
// it), renders each contact's email with render, and accepts the emails
// as one batch (rows, outbox entry, quota) like POST /emails/batch does.
// A contact render refuses gets an email recorded `failed` with the error
// as its reason, and the subject render returned with it, if any (else
// the broadcast's as written). The chunk's row makes the call idempotent: the same Seq
// again returns what the first call did. The broadcast's row is locked
// throughout, so a cancel that committed stops every later chunk. Over the
// monthly quota the chunk is cut to what the quota allows; with nothing
// left the broadcast is paused.
func (s *Broadcasts) HandOffBroadcastChunk(ctx context.Context, in BroadcastChunk,
	render func(Broadcast, BroadcastContact) (RenderedBroadcast, error)) (BroadcastChunkResult, error) {
	res, err := s.handOff(ctx, in, render)
	if errors.Is(err, ErrQuotaExceeded) {
		// Another send took the rest of the quota meanwhile.
		return s.pauseForQuota(ctx, in.BroadcastID)
	}
	if err != nil {
		return BroadcastChunkResult{}, fmt.Errorf("handing off chunk %d of broadcast %s: %w", in.Seq, in.BroadcastID, err)
	}
	return res, nil
}

// quotaReason is the reason a broadcast paused by the quota shows.
const quotaReason = "The team's monthly email quota is used up. Sending resumes when the quota allows " +
	"(next month, or after a plan change), unless the broadcast is canceled."

func (s *Broadcasts) pauseForQuota(ctx context.Context, id uuid.UUID) (BroadcastChunkResult, error) {
	reason := quotaReason
	status, err := s.MoveBroadcast(ctx, id, []string{BroadcastQueued, BroadcastSending}, BroadcastPaused, &reason)
	if err != nil {
		return BroadcastChunkResult{}, err
	}
	if status == BroadcastCanceled {
		return BroadcastChunkResult{Canceled: true}, nil
	}
	return BroadcastChunkResult{Paused: true, Reason: reason}, nil
}

func (s *Broadcasts) handOff(ctx context.Context, in BroadcastChunk,
	render func(Broadcast, BroadcastContact) (RenderedBroadcast, error)) (BroadcastChunkResult, error) {
	var res BroadcastChunkResult
	pause := false // the quota is used up: pause once the lock is released
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		b, err := scanBroadcast(tx.QueryRow(ctx, `SELECT `+broadcastColumns+` FROM broadcast WHERE id = @id FOR UPDATE`,
			pgx.NamedArgs{"id": in.BroadcastID}))
		if errors.Is(err, ErrNotFound) {
			res = BroadcastChunkResult{Canceled: true}
			return nil
		}
		if err != nil {
			return err
		}
		var done bool
		err = tx.QueryRow(ctx, `SELECT batch_id, last_contact, emails, failed, done FROM broadcast_chunk
			WHERE broadcast_id = @id AND seq = @seq`, pgx.NamedArgs{"id": in.BroadcastID, "seq": in.Seq}).
			Scan(&res.BatchID, &res.Last, &res.Emails, &res.Failed, &done)
		switch {
		case err == nil:
			res.Done = done
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		switch b.Status {
		case BroadcastCanceled:
			res = BroadcastChunkResult{Canceled: true}
			return nil
		case BroadcastQueued, BroadcastSending, BroadcastPaused:
		default:
			return fmt.Errorf("broadcast is %s", b.Status)
		}
		size := in.Size
		var left int64
		err = tx.QueryRow(ctx, `SELECT p.monthly_emails - coalesce((SELECT sum(q.used) FROM quota_usage q
				WHERE q.team_id = t.id AND q.month = @month), 0)
			FROM team t JOIN plan p ON p.name = t.plan WHERE t.id = @team`,
			pgx.NamedArgs{"team": b.TeamID, "month": QuotaMonth(in.Now)}).Scan(&left)
		if err != nil {
			return fmt.Errorf("reading quota: %w", mapErr(err))
		}
		if left <= 0 {
			pause = true // nothing was written
			return nil
		}
		if int64(size) > left {
			size = int(left)
		}
		contacts, err := chunkContacts(ctx, tx, b, in.After, size)
		if err != nil {
			return err
		}
		batch := &pgx.Batch{}
		if len(contacts) == 0 {
			res = BroadcastChunkResult{Done: true, Last: in.After}
		} else {
			res, err = s.queueChunk(ctx, batch, b, in, contacts, render)
			if err != nil {
				return err
			}
		}
		batch.Queue(`INSERT INTO broadcast_chunk (broadcast_id, seq, batch_id, last_contact, emails, failed, suppressed, done)
			VALUES (@id, @seq, @batch, @last, @emails, @failed, 0, @done)`,
			pgx.NamedArgs{"id": b.ID, "seq": in.Seq, "batch": res.BatchID, "last": res.Last, "emails": res.Emails,
				"failed": res.Failed, "done": res.Done})
		if !res.Done {
			batch.Queue(`UPDATE broadcast SET status = 'sending', status_reason = NULL, updated_at = now()
				WHERE id = @id AND status <> 'sending'`, pgx.NamedArgs{"id": b.ID})
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return BroadcastChunkResult{}, err
	}
	if pause {
		return s.pauseForQuota(ctx, in.BroadcastID)
	}
	return res, nil
}

// chunkContacts reads the next size contacts of b's segment after after
// that b may go to.
func chunkContacts(ctx context.Context, tx pgx.Tx, b Broadcast, after *uuid.UUID, size int) ([]BroadcastContact, error) {
	if b.SegmentID == nil {
		return nil, nil // the segment was deleted: nobody is left
	}
	rows, err := tx.Query(ctx, `SELECT c.id, c.email, c.first_name, c.last_name, c.properties
		FROM contact_segment cs JOIN contact c ON c.id = cs.contact_id
		WHERE cs.segment_id = @segment AND cs.team_id = @team AND (@after::uuid IS NULL OR cs.contact_id > @after)
			AND NOT c.unsubscribed
			AND (@topic::uuid IS NULL OR coalesce(
				(SELECT ct.subscription FROM contact_topic ct WHERE ct.contact_id = c.id AND ct.topic_id = @topic),
				(SELECT t.default_subscription FROM topic t WHERE t.id = @topic)) = 'opt_in')
		ORDER BY cs.contact_id LIMIT @size`,
		pgx.NamedArgs{"segment": *b.SegmentID, "team": b.TeamID, "after": after, "topic": b.TopicID, "size": size})
	if err != nil {
		return nil, fmt.Errorf("reading contacts: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BroadcastContact, error) {
		var c BroadcastContact
		err := r.Scan(&c.ID, &c.Email, &c.FirstName, &c.LastName, &c.Properties)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading contacts: %w", mapErr(err))
	}
	return out, nil
}

// queueChunk renders the contacts' emails and queues their acceptance:
// the sendable ones as one batch with its outbox entry and quota, the
// ones render refused recorded failed.
func (s *Broadcasts) queueChunk(ctx context.Context, batch *pgx.Batch, b Broadcast, in BroadcastChunk, contacts []BroadcastContact,
	render func(Broadcast, BroadcastContact) (RenderedBroadcast, error)) (BroadcastChunkResult, error) {
	var sendable, failed []Email
	var reasons []string
	var addrs []string
	for _, c := range contacts {
		id, err := uuid.NewV7()
		if err != nil {
			return BroadcastChunkResult{}, err
		}
		contactID := c.ID
		e := Email{ID: id, TeamID: b.TeamID, From: b.From, FromDomain: in.FromDomain, DomainID: in.DomainID,
			To: []string{c.Email}, Cc: []string{}, Bcc: []string{}, ReplyTo: b.ReplyTo, Subject: b.Subject,
			LastEvent: EventQueued, CreatedAt: in.Now, TopicID: b.TopicID, BroadcastID: &b.ID, ContactID: &contactID,
			Recipients: []Recipient{{Address: c.Email, Kind: "to", Domain: c.Email[strings.LastIndexByte(c.Email, '@')+1:]}}}
		if e.ReplyTo == nil {
			e.ReplyTo = []string{}
		}
		r, err := render(b, c)
		if err != nil {
			if r.Subject != "" {
				// What rendered before the part that failed, or all of it.
				e.Subject, e.HTML, e.Text = r.Subject, r.HTML, r.Text
			}
			failed = append(failed, e)
			reasons = append(reasons, err.Error())
			continue
		}
		e.Subject, e.HTML, e.Text = r.Subject, r.HTML, r.Text
		// HTML without text gets a text part derived from it when built,
		// as an API email does: mail without one scores worse.
		e.GenerateText = e.Text == nil && e.HTML != nil
		if in.Insights != nil {
			e.Insights = in.Insights(e)
		}
		sendable = append(sendable, e)
		addrs = append(addrs, c.Email)
	}
	last := contacts[len(contacts)-1].ID
	res := BroadcastChunkResult{Last: &last, Emails: len(sendable), Failed: len(failed)}
	if len(sendable) > 0 {
		batchID, err := uuid.NewV7()
		if err != nil {
			return BroadcastChunkResult{}, err
		}
		res.BatchID = &batchID
		if sendable, err = s.sealEmails(ctx, sendable); err != nil {
			return BroadcastChunkResult{}, err
		}
		if err := queueEmails(batch, sendable, &batchID, nil); err != nil {
			return BroadcastChunkResult{}, err
		}
		batch.Queue(`INSERT INTO outbox (kind, team_id, ref) VALUES (@kind, @team, @id)`,
			pgx.NamedArgs{"kind": OutboxSendBatch, "id": batchID, "team": b.TeamID})
		// Exactly: a chunk's transaction is not retried.
		batch.Queue(quotaTakeSQL, pgx.NamedArgs{"team": b.TeamID, "month": QuotaMonth(in.Now), "addrs": addrs, "exact": true})
	}
	if len(failed) > 0 {
		var err error
		if failed, err = s.sealEmails(ctx, failed); err != nil {
			return BroadcastChunkResult{}, err
		}
		if err := queueEmails(batch, failed, nil, nil); err != nil {
			return BroadcastChunkResult{}, err
		}
		for i, e := range failed {
			queueEvents(batch, e.ID, []Event{{Type: EventFailed, Recipient: e.Recipients[0].Address,
				Detail: map[string]any{"reason": reasons[i]}, CreatedAt: in.Now}})
		}
	}
	return res, nil
}
