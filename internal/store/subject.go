package store

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Subject is one email address in one team: the person a data request is
// about. Every query of this file filters by TeamID and finds the address
// case-insensitively, as a whole address (bob@x.test does not match
// jimbob@x.test nor bob@x.test.org), also where it is percent-encoded in a
// request path (bob%40x.test).
type Subject struct {
	TeamID  uuid.UUID
	Address string
}

// ErasedPlaceholder replaces an erased address where a row that also
// concerns others is kept. An email's recipients stay distinct: when an
// email already lists the placeholder among them (a second person erased
// from it), the next erased recipient i (from 1) becomes
// erased+i@erased.invalid instead.
const ErasedPlaceholder = "erased@erased.invalid"

// pattern is the PostgreSQL regular expression (ARE, applied
// case-insensitively) matching the subject's address.
func (sub Subject) pattern() string {
	q := regexp.QuoteMeta(strings.ToLower(sub.Address))
	q = strings.Replace(q, "@", "(?:@|%40)", 1)
	return `(?<![a-z0-9._%+-])` + q + `(?![a-z0-9_-]|\.[a-z0-9])`
}

func (sub Subject) args(extra pgx.NamedArgs) pgx.NamedArgs {
	a := pgx.NamedArgs{"team": sub.TeamID, "re": sub.pattern(), "addr": strings.ToLower(sub.Address),
		"ph": ErasedPlaceholder}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// Conditions naming the subject, by table (aliases as in the queries).
const (
	emailNames = `array_to_string(e.rcpt_addrs || e.to_addrs || e.cc_addrs || e.bcc_addrs || e.reply_to
		|| ARRAY[e.from_addr], E'\n') ~* @re`
	receivedNames = `array_to_string(r.to_addrs || r.cc || r.bcc || r.reply_to || r.received_for
		|| ARRAY[r.from_addr], E'\n') ~* @re`
	inboundNames = `(m.mail_from ~* @re OR m.recipients::text ~* @re
		OR NOT m.sealed AND lower(encode(m.raw, 'escape')) ~* @re
		OR NOT m.sealed AND m.raw_chunks IS NOT NULL AND lower(encode((SELECT string_agg(c.data, ''::bytea ORDER BY c.seq)
			FROM inbound_message_chunk c WHERE c.inbound_id = m.id), 'escape')) ~* @re)`
	requestLogNames = `(l.path ~* @re OR l.request_body ~* @re OR l.response_body ~* @re)`
	webhookNames    = `w.payload::text ~* @re`
)

// SubjectEmailIDs returns up to limit ids, ascending after after, of the
// team's emails the address is a recipient, sender or reply-to address of.
func (s *Privacy) SubjectEmailIDs(ctx context.Context, sub Subject, after uuid.UUID, limit int) ([]uuid.UUID, error) {
	return s.subjectIDs(ctx, `SELECT e.id FROM email e WHERE e.team_id = @team AND e.id > @after AND `+
		emailNames+` ORDER BY e.id LIMIT @limit`, sub, after, limit)
}

// SubjectReceivedIDs returns up to limit ids, ascending after after, of the
// team's received emails from, to or naming the address.
func (s *Privacy) SubjectReceivedIDs(ctx context.Context, sub Subject, after uuid.UUID, limit int) ([]uuid.UUID, error) {
	return s.subjectIDs(ctx, `SELECT r.id FROM received_email r WHERE r.team_id = @team AND r.id > @after AND `+
		receivedNames+` ORDER BY r.id LIMIT @limit`, sub, after, limit)
}

func (s *Privacy) subjectIDs(ctx context.Context, q string, sub Subject, after uuid.UUID, limit int) ([]uuid.UUID, error) {
	rows, err := s.pool.Query(ctx, q, sub.args(pgx.NamedArgs{"after": after, "limit": limit}))
	if err != nil {
		return nil, fmt.Errorf("finding rows naming the subject: %w", mapErr(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("finding rows naming the subject: %w", mapErr(err))
	}
	return ids, nil
}

// SubjectFile is a stored file of an export: an attachment or a message.
type SubjectFile struct {
	Name        string
	ContentType string
	Content     []byte
}

// SubjectEmail is one email as an export holds it.
type SubjectEmail struct {
	// Row is the email row with its events (JSON).
	Row json.RawMessage
	// Message is the message as sent (the SMTP source, else the built
	// message); nil when none was stored.
	Message     []byte
	Attachments []SubjectFile
}

// SubjectEmailExport loads the team's email id for an export, with its
// sealed content opened.
func (s *Privacy) SubjectEmailExport(ctx context.Context, teamID, id uuid.UUID) (SubjectEmail, error) {
	var (
		out                    SubjectEmail
		html, text             *string
		htmlSealed, textSealed []byte
		src, msg               []byte
		srcSealed, msgSealed   *bool
	)
	args := pgx.NamedArgs{"team": teamID, "id": id}
	err := s.pool.QueryRow(ctx, `SELECT to_jsonb(e) - 'html' - 'text_body' - 'html_sealed' - 'text_sealed'
			|| jsonb_build_object('events',
			(SELECT coalesce(jsonb_agg(to_jsonb(v) - 'email_id' ORDER BY v.id), '[]') FROM email_event v
			 WHERE v.email_id = e.id)),
			e.html, e.html_sealed, e.text_body, e.text_sealed, src.data, src.sealed, m.data, m.sealed
		FROM email e LEFT JOIN email_source src ON src.email_id = e.id LEFT JOIN email_message m ON m.email_id = e.id
		WHERE e.team_id = @team AND e.id = @id`, args).
		Scan(&out.Row, &html, &htmlSealed, &text, &textSealed, &src, &srcSealed, &msg, &msgSealed)
	if err != nil {
		return out, fmt.Errorf("loading email %s for export: %w", id, mapErr(err))
	}
	if html, err = s.openText(ctx, teamID, html, htmlSealed, adEmailHTML(id)); err != nil {
		return out, fmt.Errorf("html of email %s: %w", id, err)
	}
	if text, err = s.openText(ctx, teamID, text, textSealed, adEmailText(id)); err != nil {
		return out, fmt.Errorf("text of email %s: %w", id, err)
	}
	if out.Row, err = withFields(out.Row, map[string]any{"html": html, "text_body": text}); err != nil {
		return out, fmt.Errorf("email %s: %w", id, err)
	}
	switch {
	case src != nil:
		out.Message, err = s.openBytes(ctx, teamID, src, *srcSealed, adSource(id))
	case msg != nil:
		out.Message, err = s.openBytes(ctx, teamID, msg, *msgSealed, adMessage(id))
	}
	if err != nil {
		return out, fmt.Errorf("message of email %s: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT a.position, a.filename, a.content_type, a.content, a.sealed
		FROM attachment a JOIN email e ON e.id = a.email_id
		WHERE e.team_id = @team AND a.email_id = @id ORDER BY a.position`, args)
	if err != nil {
		return out, fmt.Errorf("loading attachments of %s for export: %w", id, mapErr(err))
	}
	type att struct {
		pos         int
		name, ctype string
		content     []byte
		sealed      bool
	}
	atts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (att, error) {
		var a att
		return a, r.Scan(&a.pos, &a.name, &a.ctype, &a.content, &a.sealed)
	})
	if err != nil {
		return out, fmt.Errorf("loading attachments of %s for export: %w", id, mapErr(err))
	}
	for _, a := range atts {
		content, err := s.openBytes(ctx, teamID, a.content, a.sealed, adAttachment(id, a.pos))
		if err != nil {
			return out, fmt.Errorf("attachment %d of email %s: %w", a.pos, id, err)
		}
		out.Attachments = append(out.Attachments, SubjectFile{Name: fmt.Sprintf("%d-%s", a.pos, a.name),
			ContentType: a.ctype, Content: content})
	}
	return out, nil
}

// withFields returns the JSON object row with fields set.
func withFields(row json.RawMessage, fields map[string]any) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(row, &m); err != nil {
		return nil, fmt.Errorf("reading row: %w", err)
	}
	for k, v := range fields {
		m[k] = v
	}
	return json.Marshal(m)
}

// SubjectReceivedExport loads the team's received email id for an export:
// its row, raw message and attachments, opened.
func (s *Privacy) SubjectReceivedExport(ctx context.Context, teamID, id uuid.UUID) (SubjectEmail, error) {
	var (
		out                    SubjectEmail
		html, text             *string
		htmlSealed, textSealed []byte
		inboundID              *uuid.UUID
		rawSealed              *bool
		raw                    inboundRaw
	)
	args := pgx.NamedArgs{"team": teamID, "id": id}
	err := s.pool.QueryRow(ctx, `SELECT to_jsonb(r) - 'html_body' - 'text_body' - 'html_sealed' - 'text_sealed',
			r.html_body, r.html_sealed, r.text_body, r.text_sealed, m.id, m.raw, m.sealed, m.raw_chunks,
			coalesce(m.size, 0)
		FROM received_email r LEFT JOIN inbound_message m ON m.id = r.inbound_id
		WHERE r.team_id = @team AND r.id = @id`, args).
		Scan(&out.Row, &html, &htmlSealed, &text, &textSealed, &inboundID, &raw.raw, &rawSealed, &raw.chunks,
			&raw.size)
	if err != nil {
		return out, fmt.Errorf("loading received email %s for export: %w", id, mapErr(err))
	}
	if html, err = s.openText(ctx, teamID, html, htmlSealed, adReceivedHTML(id)); err != nil {
		return out, fmt.Errorf("html of received email %s: %w", id, err)
	}
	if text, err = s.openText(ctx, teamID, text, textSealed, adReceivedText(id)); err != nil {
		return out, fmt.Errorf("text of received email %s: %w", id, err)
	}
	if out.Row, err = withFields(out.Row, map[string]any{"html_body": html, "text_body": text}); err != nil {
		return out, fmt.Errorf("received email %s: %w", id, err)
	}
	if inboundID != nil {
		raw.sealed = *rawSealed
		if out.Message, err = s.Received.openInboundRaw(ctx, teamID, *inboundID, raw); err != nil {
			return out, fmt.Errorf("raw message of received email %s: %w", id, err)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT a.id, a.position, coalesce(a.filename, 'attachment'), a.content_type,
			a.content, a.sealed
		FROM received_attachment a WHERE a.team_id = @team AND a.received_email_id = @id ORDER BY a.position`, args)
	if err != nil {
		return out, fmt.Errorf("loading attachments of received email %s: %w", id, mapErr(err))
	}
	type att struct {
		id          uuid.UUID
		pos         int
		name, ctype string
		content     []byte
		sealed      bool
	}
	atts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (att, error) {
		var a att
		return a, r.Scan(&a.id, &a.pos, &a.name, &a.ctype, &a.content, &a.sealed)
	})
	if err != nil {
		return out, fmt.Errorf("loading attachments of received email %s: %w", id, mapErr(err))
	}
	for _, a := range atts {
		content, err := s.openBytes(ctx, teamID, a.content, a.sealed, adReceivedAtt(a.id))
		if err != nil {
			return out, fmt.Errorf("attachment %s of received email %s: %w", a.id, id, err)
		}
		out.Attachments = append(out.Attachments, SubjectFile{Name: fmt.Sprintf("%d-%s", a.pos, a.name),
			ContentType: a.ctype, Content: content})
	}
	return out, nil
}

// SubjectContacts returns the team's contacts with the address (one per
// team today), each with its topic subscriptions and segments, as JSON.
func (s *Privacy) SubjectContacts(ctx context.Context, sub Subject) ([]json.RawMessage, error) {
	return s.subjectJSON(ctx, `SELECT to_jsonb(c) || jsonb_build_object(
			'topics', (SELECT coalesce(jsonb_agg(jsonb_build_object('topic_id', t.topic_id, 'topic', p.name,
				'subscription', t.subscription) ORDER BY p.name), '[]')
				FROM contact_topic t JOIN topic p ON p.team_id = t.team_id AND p.id = t.topic_id
				WHERE t.team_id = c.team_id AND t.contact_id = c.id),
			'segments', (SELECT coalesce(jsonb_agg(jsonb_build_object('segment_id', g.segment_id, 'segment', p.name)
				ORDER BY p.name), '[]')
				FROM contact_segment g JOIN segment p ON p.team_id = g.team_id AND p.id = g.segment_id
				WHERE g.team_id = c.team_id AND g.contact_id = c.id))
		FROM contact c WHERE c.team_id = @team AND lower(c.email) = @addr ORDER BY c.id`, sub, nil)
}

// SubjectSuppressions returns the team's suppression entries of the
// address as JSON.
func (s *Privacy) SubjectSuppressions(ctx context.Context, sub Subject) ([]json.RawMessage, error) {
	return s.subjectJSON(ctx, `SELECT to_jsonb(x) FROM suppression x
		WHERE x.team_id = @team AND x.email = @addr ORDER BY x.id`, sub, nil)
}

// SubjectRequestLogs returns up to limit of the team's request-log
// entries naming the address, ascending by id after after, as JSON.
func (s *Privacy) SubjectRequestLogs(ctx context.Context, sub Subject, after uuid.UUID, limit int) ([]json.RawMessage, uuid.UUID, error) {
	return s.subjectPage(ctx, `SELECT l.id, to_jsonb(l) FROM request_log l
		WHERE l.team_id = @team AND l.id > @after AND `+requestLogNames+` ORDER BY l.id LIMIT @limit`,
		sub, after, limit)
}

// SubjectWebhookMessages returns up to limit of the team's webhook
// messages (events sent to its endpoints) naming the address, with their
// delivery attempts, ascending by id after after, as JSON.
func (s *Privacy) SubjectWebhookMessages(ctx context.Context, sub Subject, after uuid.UUID, limit int) ([]json.RawMessage, uuid.UUID, error) {
	return s.subjectPage(ctx, `SELECT w.id, to_jsonb(w) || jsonb_build_object('attempts',
			(SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.attempted_at), '[]') FROM webhook_attempt t
			 WHERE t.team_id = w.team_id AND t.message_id = w.id))
		FROM webhook_message w
		WHERE w.team_id = @team AND w.id > @after AND `+webhookNames+` ORDER BY w.id LIMIT @limit`,
		sub, after, limit)
}

func (s *Privacy) subjectJSON(ctx context.Context, q string, sub Subject, extra pgx.NamedArgs) ([]json.RawMessage, error) {
	rows, err := s.pool.Query(ctx, q, sub.args(extra))
	if err != nil {
		return nil, fmt.Errorf("loading rows naming the subject: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[json.RawMessage])
	if err != nil {
		return nil, fmt.Errorf("loading rows naming the subject: %w", mapErr(err))
	}
	return out, nil
}

func (s *Privacy) subjectPage(ctx context.Context, q string, sub Subject, after uuid.UUID, limit int) ([]json.RawMessage, uuid.UUID, error) {
	rows, err := s.pool.Query(ctx, q, sub.args(pgx.NamedArgs{"after": after, "limit": limit}))
	if err != nil {
		return nil, after, fmt.Errorf("loading rows naming the subject: %w", mapErr(err))
	}
	defer rows.Close()
	var out []json.RawMessage
	last := after
	for rows.Next() {
		var row json.RawMessage
		if err := rows.Scan(&last, &row); err != nil {
			return nil, after, fmt.Errorf("loading rows naming the subject: %w", mapErr(err))
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, after, fmt.Errorf("loading rows naming the subject: %w", mapErr(err))
	}
	return out, last, nil
}
