package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Receiving capabilities of a domain (Resend's capabilities.receiving).
const (
	ReceivingEnabled  = "enabled"
	ReceivingDisabled = "disabled"
)

// EventReceived is the webhook event of a received email.
const EventReceived = "email.received"

// ReceivingDomain finds the domain named host (lower case, no trailing
// dot) with receiving enabled that is verified (its owner proved control
// of it through DNS; an unverified domain of that name could be anyone's).
// When several teams verified the same name, the one verified last wins:
// it proved control most recently. ErrNotFound when there is none.
func (s *Received) ReceivingDomain(ctx context.Context, host string) (teamID, domainID uuid.UUID, err error) {
	err = s.pool.QueryRow(ctx, `SELECT team_id, id FROM domain
		WHERE name = @name AND receiving = @enabled AND deleted_at IS NULL AND status IN (@verified, @temp)
		ORDER BY verified_at DESC NULLS LAST, id DESC LIMIT 1`,
		pgx.NamedArgs{"name": host, "enabled": ReceivingEnabled, "verified": DomainVerified,
			"temp": DomainTemporaryFailure}).Scan(&teamID, &domainID)
	return teamID, domainID, mapErr(err)
}

// ReceivedAttachment is an attachment of a received email.
type ReceivedAttachment struct {
	ID                 uuid.UUID
	EmailID            uuid.UUID
	Filename           string
	ContentType        string
	ContentDisposition string
	ContentID          string
	Size               int
	Content            []byte // only loaded by ReceivedAttachmentContent
}

// ReceivedEmail is an email a receiving domain received.
type ReceivedEmail struct {
	ID          uuid.UUID
	TeamID      uuid.UUID
	DomainID    uuid.UUID
	InboundID   uuid.UUID
	From        string
	To          []string
	Cc          []string
	Bcc         []string
	ReplyTo     []string
	ReceivedFor []string
	Subject     string
	MessageID   string
	Text, HTML  *string
	Headers     map[string]string
	Attachments []ReceivedAttachment
	CreatedAt   time.Time
}

// ReceivedPayload is the data of an email.received event: Resend's
// metadata only (no bodies, no attachment contents).
func ReceivedPayload(e ReceivedEmail) map[string]any {
	atts := make([]map[string]any, 0, len(e.Attachments))
	for _, a := range e.Attachments {
		atts = append(atts, map[string]any{"id": a.ID, "filename": nullString(a.Filename),
			"content_type": a.ContentType, "content_disposition": nullString(a.ContentDisposition),
			"content_id": nullString(a.ContentID)})
	}
	return map[string]any{"email_id": e.ID, "created_at": e.CreatedAt.UTC().Format(webhookTime),
		"from": e.From, "to": e.To, "cc": e.Cc, "bcc": e.Bcc, "received_for": e.ReceivedFor,
		"message_id": e.MessageID, "subject": e.Subject, "attachments": atts}
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// InsertReceivedEmail stores a received email with its attachments and
// records its email.received event for the team's subscribed endpoints,
// in one transaction. e.ID and the attachments' ids are set by the
// caller. The email is stored once per inbound message and domain:
// inserted reports false, and nothing is written, when it already is (a
// retried step), and id is then the stored one's.
func (s *Received) InsertReceivedEmail(ctx context.Context, e ReceivedEmail) (id uuid.UUID, inserted bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		headers := e.Headers
		if headers == nil {
			headers = map[string]string{}
		}
		text, html := e.Text, e.HTML
		textSealed, err := s.sealText(ctx, e.TeamID, text, adReceivedText(e.ID))
		if err != nil {
			return fmt.Errorf("sealing text of received email %s: %w", e.ID, err)
		}
		htmlSealed, err := s.sealText(ctx, e.TeamID, html, adReceivedHTML(e.ID))
		if err != nil {
			return fmt.Errorf("sealing html of received email %s: %w", e.ID, err)
		}
		if s.sealer != nil {
			text, html = nil, nil
		}
		err = tx.QueryRow(ctx, `INSERT INTO received_email (id, team_id, domain_id, inbound_id, from_addr, to_addrs,
				cc, bcc, reply_to, received_for, subject, message_id, text_body, html_body, headers, created_at,
				text_sealed, html_sealed)
			VALUES (@id, @team, @domain, @inbound, @from, @to, @cc, @bcc, @reply_to, @for, @subject, @mid,
				@text, @html, @headers, @at, @text_sealed, @html_sealed)
			ON CONFLICT (inbound_id, domain_id) DO NOTHING RETURNING id`,
			pgx.NamedArgs{"id": e.ID, "team": e.TeamID, "domain": e.DomainID, "inbound": e.InboundID, "from": e.From,
				"to": nonNil(e.To), "cc": nonNil(e.Cc), "bcc": nonNil(e.Bcc), "reply_to": nonNil(e.ReplyTo),
				"for": nonNil(e.ReceivedFor), "subject": e.Subject, "mid": e.MessageID, "text": text,
				"html": html, "headers": headers, "at": e.CreatedAt,
				"text_sealed": textSealed, "html_sealed": htmlSealed}).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			err = tx.QueryRow(ctx, `SELECT id FROM received_email WHERE inbound_id = @inbound AND domain_id = @domain`,
				pgx.NamedArgs{"inbound": e.InboundID, "domain": e.DomainID}).Scan(&id)
			if err != nil {
				return fmt.Errorf("loading received email of %s: %w", e.InboundID, mapErr(err))
			}
			return nil // stored by an earlier try: nothing is written
		}
		if err != nil {
			return fmt.Errorf("inserting received email of %s: %w", e.InboundID, mapErr(err))
		}
		b := &pgx.Batch{}
		for i, a := range e.Attachments {
			content, sealed, err := s.sealBytes(ctx, e.TeamID, a.Content, adReceivedAtt(a.ID))
			if err != nil {
				return fmt.Errorf("sealing attachment %d of received email %s: %w", i, e.ID, err)
			}
			b.Queue(`INSERT INTO received_attachment (id, received_email_id, team_id, position, filename, content_type,
					content_disposition, content_id, size, content, sealed)
				VALUES (@id, @email, @team, @pos, @filename, @ct, @disp, @cid, @size, @content, @sealed)`,
				pgx.NamedArgs{"id": a.ID, "email": e.ID, "team": e.TeamID, "pos": i, "filename": nullString(a.Filename),
					"ct": a.ContentType, "disp": nullString(a.ContentDisposition), "cid": nullString(a.ContentID),
					"size": len(a.Content), "content": content, "sealed": sealed})
		}
		payload := map[string]any{"type": EventReceived, "created_at": time.Now().UTC().Format(webhookTime),
			"data": ReceivedPayload(e)}
		b.Queue(`WITH wh AS (
				INSERT INTO webhook_message (id, team_id, webhook_id, type, order_key, payload, status, next_attempt_at, created_at)
				SELECT gen_random_uuid(), team_id, id, @type, @key, @payload, 'pending', now(), now() FROM webhook
				WHERE team_id = @team AND status = 'enabled' AND @type = ANY (events)
				RETURNING webhook_id, team_id
			)
			INSERT INTO outbox (kind, team_id, ref) SELECT DISTINCT '`+OutboxWebhook+`', team_id, webhook_id FROM wh
			WHERE NOT EXISTS (`+pendingWakeSQL+`)`,
			pgx.NamedArgs{"team": e.TeamID, "type": EventReceived, "key": e.ID.String(), "payload": payload})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("inserting attachments of received email %s: %w", e.ID, mapErr(err))
		}
		inserted = true
		return nil
	})
	if err != nil {
		return uuid.Nil, false, err
	}
	return id, inserted, nil
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

const receivedColumns = `id, team_id, domain_id, inbound_id, from_addr, to_addrs, cc, bcc, reply_to, received_for,
	subject, message_id, text_body, html_body, headers, created_at, text_sealed, html_sealed`

// scanReceived reads a received email; its bodies may still be sealed
// (openReceived opens them).
func scanReceived(row pgx.Row) (receivedRow, error) {
	var r receivedRow
	e := &r.ReceivedEmail
	err := row.Scan(&e.ID, &e.TeamID, &e.DomainID, &e.InboundID, &e.From, &e.To, &e.Cc, &e.Bcc, &e.ReplyTo,
		&e.ReceivedFor, &e.Subject, &e.MessageID, &e.Text, &e.HTML, &e.Headers, &e.CreatedAt,
		&r.textSealed, &r.htmlSealed)
	return r, mapErr(err)
}

// receivedRow is a received email as stored, with its sealed bodies.
type receivedRow struct {
	ReceivedEmail
	textSealed, htmlSealed []byte
}

// openReceived returns the received email of r with its bodies opened.
func (s *Received) openReceived(ctx context.Context, r receivedRow) (ReceivedEmail, error) {
	e := r.ReceivedEmail
	var err error
	if e.Text, err = s.openText(ctx, e.TeamID, e.Text, r.textSealed, adReceivedText(e.ID)); err != nil {
		return ReceivedEmail{}, fmt.Errorf("text of received email %s: %w", e.ID, err)
	}
	if e.HTML, err = s.openText(ctx, e.TeamID, e.HTML, r.htmlSealed, adReceivedHTML(e.ID)); err != nil {
		return ReceivedEmail{}, fmt.Errorf("html of received email %s: %w", e.ID, err)
	}
	return e, nil
}

// attachmentsOf loads the attachments (without content) of the team's
// received emails ids, in order.
func (s *Received) attachmentsOf(ctx context.Context, teamID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID][]ReceivedAttachment, error) {
	out := map[uuid.UUID][]ReceivedAttachment{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, received_email_id, coalesce(filename, ''), content_type,
			coalesce(content_disposition, ''), coalesce(content_id, ''), size
		FROM received_attachment WHERE team_id = @team AND received_email_id = ANY(@ids)
		ORDER BY received_email_id, position`, pgx.NamedArgs{"team": teamID, "ids": ids})
	if err != nil {
		return nil, fmt.Errorf("listing received attachments: %w", mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var a ReceivedAttachment
		if err := rows.Scan(&a.ID, &a.EmailID, &a.Filename, &a.ContentType, &a.ContentDisposition,
			&a.ContentID, &a.Size); err != nil {
			return nil, mapErr(err)
		}
		out[a.EmailID] = append(out[a.EmailID], a)
	}
	return out, mapErr(rows.Err())
}

// GetReceivedEmail returns the team's received email with its attachments
// (without their content). ErrNotFound for unknown and other teams' ones.
func (s *Received) GetReceivedEmail(ctx context.Context, teamID, id uuid.UUID) (ReceivedEmail, error) {
	r, err := scanReceived(s.pool.QueryRow(ctx, `SELECT `+receivedColumns+` FROM received_email
		WHERE id = @id AND team_id = @team`, pgx.NamedArgs{"id": id, "team": teamID}))
	if err != nil {
		return ReceivedEmail{}, err
	}
	e, err := s.openReceived(ctx, r)
	if err != nil {
		return ReceivedEmail{}, err
	}
	atts, err := s.attachmentsOf(ctx, teamID, []uuid.UUID{id})
	if err != nil {
		return ReceivedEmail{}, err
	}
	e.Attachments = atts[id]
	return e, nil
}

// ListReceivedEmails lists the team's received emails, newest first, with
// their attachments (without content).
func (s *Received) ListReceivedEmails(ctx context.Context, teamID uuid.UUID, p Page) ([]ReceivedEmail, bool, error) {
	rs, more, err := listPage(ctx, s.Store, p, `SELECT `+receivedColumns+` FROM received_email WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanReceived)
	if err != nil {
		return nil, false, fmt.Errorf("listing received emails: %w", err)
	}
	es := make([]ReceivedEmail, len(rs))
	ids := make([]uuid.UUID, len(rs))
	for i, r := range rs {
		if es[i], err = s.openReceived(ctx, r); err != nil {
			return nil, false, err
		}
		ids[i] = r.ID
	}
	atts, err := s.attachmentsOf(ctx, teamID, ids)
	if err != nil {
		return nil, false, err
	}
	for i := range es {
		es[i].Attachments = atts[es[i].ID]
	}
	return es, more, nil
}

// ReceivedAttachmentContent returns an attachment of the team's received
// email with its content. ErrNotFound for unknown and other teams' ones.
func (s *Received) ReceivedAttachmentContent(ctx context.Context, teamID, emailID, id uuid.UUID) (ReceivedAttachment, error) {
	var a ReceivedAttachment
	var sealed bool
	err := s.pool.QueryRow(ctx, `SELECT id, received_email_id, coalesce(filename, ''), content_type,
			coalesce(content_disposition, ''), coalesce(content_id, ''), size, content, sealed
		FROM received_attachment WHERE team_id = @team AND received_email_id = @email AND id = @id`,
		pgx.NamedArgs{"team": teamID, "email": emailID, "id": id}).Scan(&a.ID, &a.EmailID, &a.Filename,
		&a.ContentType, &a.ContentDisposition, &a.ContentID, &a.Size, &a.Content, &sealed)
	if err != nil {
		return ReceivedAttachment{}, mapErr(err)
	}
	if a.Content, err = s.openBytes(ctx, teamID, a.Content, sealed, adReceivedAtt(a.ID)); err != nil {
		return ReceivedAttachment{}, fmt.Errorf("received attachment %s: %w", a.ID, err)
	}
	return a, nil
}

// ReceivedRaw returns the raw message of the team's received email, as
// the inbound MX accepted it. ErrNotFound for unknown and other teams'
// ones.
func (s *Received) ReceivedRaw(ctx context.Context, teamID, id uuid.UUID) ([]byte, error) {
	var r inboundRaw
	var inboundID uuid.UUID
	err := s.pool.QueryRow(ctx, `SELECT m.raw, m.raw_chunks, m.size, m.id, m.sealed
		FROM received_email e JOIN inbound_message m ON m.id = e.inbound_id
		WHERE e.id = @id AND e.team_id = @team AND m.team_id = @team`,
		pgx.NamedArgs{"id": id, "team": teamID}).Scan(&r.raw, &r.chunks, &r.size, &inboundID, &r.sealed)
	if err != nil {
		return nil, mapErr(err)
	}
	raw, err := s.openInboundRaw(ctx, teamID, inboundID, r)
	if err != nil {
		return nil, fmt.Errorf("raw message of received email %s: %w", id, err)
	}
	return raw, nil
}
