package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The set-based forms of the steps that prepare an email (claim, load,
// save the built message, record events), for the emails of a batch that
// are prepared together (delivery.Sending.PrepareBatch): a few statements
// and one round trip each for the whole batch instead of as many per email.
// Each does for every email what its single-email form does for one.

// ClaimManyForSending is ClaimForSending for several emails in one round
// trip and one transaction: one UPDATE claims those that are queued or
// due (recording `sent` and queueing its webhooks), then the state of
// each is read. The result has a claim for each email that exists; an
// unknown id (an email erased whole) has none.
func (s *Emails) ClaimManyForSending(ctx context.Context, ids []uuid.UUID, now time.Time, skew time.Duration) (map[uuid.UUID]SendClaim, error) {
	out := make(map[uuid.UUID]SendClaim, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := pgx.NamedArgs{"ids": ids, "now": now, "due": now.Add(skew)}
	webhookArgs(args, Event{Type: EventSent}, now)
	claimed := map[uuid.UUID]bool{}
	b := &pgx.Batch{}
	b.Queue(claimSendingSQL(`id = ANY (@ids::uuid[])`)+`
		SELECT id FROM claim`, args).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				return err
			}
			claimed[id] = true
		}
		return rows.Err()
	})
	b.Queue(`SELECT id, last_event, scheduled_at FROM email WHERE id = ANY (@ids::uuid[])`, args).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var c SendClaim
			if err := rows.Scan(&id, &c.LastEvent, &c.ScheduledAt); err != nil {
				return err
			}
			c.Claimed = claimed[id]
			out[id] = c
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("claiming %d emails for sending: %w", len(ids), mapErr(err))
	}
	return out, nil
}

// EmailsForSending is EmailForSending for several emails in one round
// trip: a query each for the emails, their attachments (when asked for),
// sources, stored messages, sender domains and IP pools. The result has
// an EmailToSend for each email that exists. The caller bounds what it
// asks for: every email is held in memory at once, attachments included
// (a batch is at most one request's worth).
func (s *Emails) EmailsForSending(ctx context.Context, ids []uuid.UUID, attachments bool) (map[uuid.UUID]*EmailToSend, error) {
	out := make(map[uuid.UUID]*EmailToSend, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := pgx.NamedArgs{"ids": ids}
	domainIDs := map[uuid.UUID]*uuid.UUID{} // email: its domain
	domains := map[uuid.UUID]*Domain{}
	messageSealed := map[uuid.UUID]bool{}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+emailColumns+` FROM email WHERE id = ANY (@ids::uuid[])`, args).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			e, err := scanEmail(rows)
			if err != nil {
				return err
			}
			if attachments {
				e.Attachments = []Attachment{} // as EmailForSending reads none
			}
			out[e.ID] = &EmailToSend{Email: e}
			domainIDs[e.ID] = e.DomainID
		}
		return rows.Err()
	})
	// Every query below reads only emails the first one found: they run
	// after it, in the same transaction.
	if attachments {
		b.Queue(`SELECT email_id, filename, content_type, content_id, content, sealed, position FROM attachment
			WHERE email_id = ANY (@ids::uuid[]) ORDER BY email_id, position`, args).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id uuid.UUID
				var a Attachment
				if err := rows.Scan(&id, &a.Filename, &a.ContentType, &a.ContentID, &a.Content, &a.sealed, &a.Position); err != nil {
					return fmt.Errorf("reading attachments: %w", err)
				}
				if e := out[id]; e != nil {
					e.Email.Attachments = append(e.Email.Attachments, a)
				}
			}
			return rows.Err()
		})
	}
	b.Queue(`SELECT email_id, data, sealed FROM email_source WHERE email_id = ANY (@ids::uuid[])`, args).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var data []byte
			var sealed bool
			if err := rows.Scan(&id, &data, &sealed); err != nil {
				return fmt.Errorf("reading submitted messages: %w", err)
			}
			if e := out[id]; e != nil {
				e.Email.Source, e.Email.sourceSealed = data, sealed
			}
		}
		return rows.Err()
	})
	b.Queue(`SELECT email_id, data, sealed FROM email_message WHERE email_id = ANY (@ids::uuid[])`, args).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var data []byte
			var sealed bool
			if err := rows.Scan(&id, &data, &sealed); err != nil {
				return fmt.Errorf("reading messages: %w", err)
			}
			if e := out[id]; e != nil {
				e.Message = data
				messageSealed[id] = sealed
			}
		}
		return rows.Err()
	})
	b.Queue(`SELECT `+domainColumns+` FROM domain WHERE id IN (SELECT domain_id FROM email WHERE id = ANY (@ids::uuid[]))`,
		args).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			d, err := scanDomain(rows)
			if err != nil {
				return fmt.Errorf("loading domains: %w", err)
			}
			domains[d.ID] = &d
		}
		return rows.Err()
	})
	b.Queue(`SELECT e.id, (`+sendingIPPoolSQL("e.team_id", "e.domain_id")+`) FROM email e WHERE e.id = ANY (@ids::uuid[])`,
		args).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var pool string
			if err := rows.Scan(&id, &pool); err != nil {
				return fmt.Errorf("choosing IP pools: %w", err)
			}
			if e := out[id]; e != nil {
				e.IPPool = pool
			}
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("loading %d emails for sending: %w", len(ids), mapErr(err))
	}
	for id, e := range out {
		if d := domainIDs[id]; d != nil {
			e.Domain = domains[*d] // nil: removed from the table
		}
		if err := s.openEmail(ctx, &e.Email); err != nil {
			return nil, err
		}
		var err error
		if e.Message, err = s.openBytes(ctx, e.Email.TeamID, e.Message, messageSealed[id], adMessage(id)); err != nil {
			return nil, fmt.Errorf("message of email %s: %w", id, err)
		}
	}
	return out, nil
}

// BuiltMessage is the message built for an email (SaveMessages).
type BuiltMessage struct {
	EmailID   uuid.UUID
	MessageID string
	Data      []byte
}

// SaveMessages is SaveMessage for several emails of a team in one round
// trip and one transaction: each email keeps the first message stored for
// it. Unlike SaveMessage it does not read the stored messages back.
func (s *Emails) SaveMessages(ctx context.Context, teamID uuid.UUID, msgs []BuiltMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(msgs))
	mids := make([]string, len(msgs))
	data := make([][]byte, len(msgs))
	sealed := make([]bool, len(msgs))
	for i, m := range msgs {
		var err error
		if data[i], sealed[i], err = s.sealBytes(ctx, teamID, m.Data, adMessage(m.EmailID)); err != nil {
			return fmt.Errorf("sealing message of %s: %w", m.EmailID, err)
		}
		ids[i], mids[i] = m.EmailID, m.MessageID
	}
	args := pgx.NamedArgs{"team": teamID, "ids": ids, "mids": mids, "data": data, "sealed": sealed}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO email_message (email_id, data, sealed)
		SELECT m.id, m.data, m.sealed FROM unnest(@ids::uuid[], @data::bytea[], @sealed::boolean[]) m(id, data, sealed)
		WHERE EXISTS (SELECT 1 FROM email WHERE id = m.id AND team_id = @team)
		ON CONFLICT (email_id) DO NOTHING`, args)
	b.Queue(`UPDATE email e SET message_id = m.mid FROM unnest(@ids::uuid[], @mids::text[]) m(id, mid)
		WHERE e.id = m.id AND e.team_id = @team AND e.message_id IS NULL`, args)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("saving %d messages: %w", len(msgs), mapErr(err))
	}
	return nil
}

// EmailEvents are events of one email (RecordManyEvents).
type EmailEvents struct {
	EmailID uuid.UUID
	Events  []Event
}

// RecordManyEvents is RecordEvents for several emails in one round trip
// and one transaction: every event is recorded, with its webhooks, as
// RecordEvents records it, or none is. An email that does not exist any
// more fails the whole call with ErrNotFound (see recordEventSQL), and the
// caller records the others one email at a time.
func (s *Emails) RecordManyEvents(ctx context.Context, events []EmailEvents) error {
	b := &pgx.Batch{}
	for _, e := range events {
		queueEvents(b, e.EmailID, e.Events)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("recording events of %d emails: %w", len(events), mapErr(err))
	}
	return nil
}
