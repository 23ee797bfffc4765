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

// Email states, the values of Email.LastEvent and Recipient.Status.
const (
	EventScheduled       = "scheduled"
	EventQueued          = "queued"
	EventSent            = "sent"
	EventDelivered       = "delivered"
	EventDeliveryDelayed = "delivery_delayed"
	EventBounced         = "bounced"
	EventComplained      = "complained"
	EventFailed          = "failed"
	EventCanceled        = "canceled"
	EventSuppressed      = "suppressed"
	// EventOpened and EventClicked are engagement: a delivered recipient
	// opened the email or clicked one of its links (open and click
	// tracking). They may repeat in the history; the recipient's state
	// only moves forward, delivered → opened → clicked.
	EventOpened  = "opened"
	EventClicked = "clicked"
)

// Header is a custom message header.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Tag is a name/value label on an email.
type Tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Recipient is one address of an email with its own delivery state.
type Recipient struct {
	Address string
	Kind    string // to, cc, bcc
	Domain  string // ASCII (punycode) domain
	Status  string
}

// Attachment is a file carried by an email.
type Attachment struct {
	Filename    string
	ContentType string
	ContentID   string
	Content     []byte
	// Position is the attachment's place among the email's attachments
	// as accepted, set when read: it stays when an erasure deletes
	// another one (see dropSealedAttachments), so it names the attachment
	// for good. Inserts ignore it and number the attachments in order.
	Position int

	sealed bool // Content is sealed (as stored, before openEmail)
}

// Email is an accepted email.
type Email struct {
	ID             uuid.UUID
	TeamID         uuid.UUID
	From           string // display form, "Name <a@b>"
	FromDomain     string
	DomainID       *uuid.UUID // the verified domain it is sent under; nil for the sandbox
	To, Cc, Bcc    []string
	ReplyTo        []string
	Subject        string
	HTML           *string
	Text           *string
	GenerateText   bool
	Headers        []Header
	Tags           []Tag
	ScheduledAt    *time.Time
	LastEvent      string
	MessageID      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	BatchID        *uuid.UUID   // the batch that accepted it, if any
	IdempotencyKey *string      // the key of the request that accepted it, if any
	Recipients     []Recipient  // in submission order
	Attachments    []Attachment // filled by EmailForSending (when asked for) and on insert
	// Source is the message as submitted over SMTP, delivered instead of
	// one built from the fields above; nil for API emails. Filled by
	// EmailForSending and on insert.
	Source []byte
	// TopicID is the team's topic the email was sent with (`topic_id`):
	// recipients it may not reach are suppressed at send time
	// (TopicBlocked). nil when none, or when the topic was deleted since.
	TopicID *uuid.UUID
	// TemplateID is the team's template the email was rendered from
	// (migration 00045), named by its webhook events; nil for none. Not
	// read back by the email's getters.
	TemplateID *uuid.UUID
	// BroadcastID and ContactID name the broadcast an email belongs to and
	// the contact it went to; nil for other emails. A contact gets a
	// broadcast at most once (the email_broadcast_contact index).
	BroadcastID *uuid.UUID
	ContactID   *uuid.UUID
	// Insights are the deliverability findings computed when the email
	// was accepted (migration 00025); empty in lists.
	Insights []Insight

	// The sealed bodies and whether Source is sealed, as stored (see
	// sealEmails and openEmail).
	htmlSealed, textSealed []byte
	sourceSealed           bool
}

// Insight is one deliverability finding of an email (internal/insights).
type Insight struct {
	Code     string `json:"code"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

// Event is one entry of an email's history.
type Event struct {
	Type      string
	Recipient string         // "" for events of the whole email
	Detail    map[string]any // optional, e.g. the SMTP reply of a bounce
	CreatedAt time.Time
	// Async marks an outcome reported after the fact, by a delivery
	// status notification to the return path: a `bounced` so marked may
	// follow `delivered` (the receiving server accepted the message, then
	// failed to deliver it).
	Async bool
}

// Acceptance is what one accepting request writes in one transaction.
type Acceptance struct {
	// Emails are inserted in order. With BatchID set they all carry it and
	// one send_batch outbox entry starts them; otherwise there is one
	// email and a send_email entry.
	Emails  []Email
	BatchID *uuid.UUID
	// Idempotency, when set, completes the caller's claim on its key with
	// Response in the same transaction; if the claim is no longer held
	// nothing is written and Accept returns ErrClaimLost.
	Idempotency *IdempotencyClaim
	Response    []byte
}

// Accept writes an Acceptance: the email rows (which hold their
// recipients and, implicitly, their first event) with their attachments,
// the outbox entry and the quota increment
// (every recipient of every email but suppressed ones, see quota_take).
// Without an idempotency claim it is one implicit transaction and one
// round trip; with one it is an explicit transaction (begin, one batch,
// commit) so the claim can be checked before the commit. It returns the
// team's usage of the month including these emails. Over the plan's quota
// nothing is written and the error is a *QuotaExceededError.
func (s *Emails) Accept(ctx context.Context, a Acceptance) (used int64, err error) {
	if a.Emails, err = s.sealEmails(ctx, a.Emails); err != nil {
		return 0, err
	}
	used, err = s.accept(ctx, a, false)
	if errors.Is(err, errQuotaTakeExactly) {
		// Rare: the team neared its limit while this take was on the
		// fast path; nothing was written.
		used, err = s.accept(ctx, a, true)
	}
	return used, err
}

// accept writes a sealed Acceptance once, taking the quota exactly when
// exact is set (see quota_take).
func (s *Emails) accept(ctx context.Context, a Acceptance, exact bool) (used int64, err error) {
	b, err := acceptance(a, exact, &used)
	if err != nil {
		return 0, err
	}
	if a.Idempotency == nil {
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return 0, fmt.Errorf("inserting emails: %w", mapErr(err))
		}
		return used, nil
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, b)
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return fmt.Errorf("completing idempotency key: %w", mapErr(err))
		}
		if tag.RowsAffected() != 1 {
			br.Close()
			return ErrClaimLost
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("inserting emails: %w", mapErr(err))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return used, nil
}

// acceptance queues the statements of an Acceptance, as many for a
// hundred emails as for one; the quota statement scans the team's usage
// into used, exactly when exact is set. With an idempotency claim the
// first statement completes it.
func acceptance(a Acceptance, exact bool, used *int64) (*pgx.Batch, error) {
	if len(a.Emails) == 0 {
		return nil, fmt.Errorf("accepting emails: nothing to accept")
	}
	b := &pgx.Batch{}
	var key *string
	if a.Idempotency != nil {
		key = &a.Idempotency.Key
		b.Queue(`UPDATE idempotency_key SET state = 'completed', response = @response
			WHERE team_id = @team AND key = @key AND token = @token AND state = 'in_flight'`,
			pgx.NamedArgs{"team": a.Idempotency.TeamID, "key": a.Idempotency.Key,
				"token": a.Idempotency.Token, "response": a.Response})
	}
	if err := queueEmails(b, a.Emails, a.BatchID, key); err != nil {
		return nil, err
	}
	first := a.Emails[0]
	if a.BatchID != nil {
		b.Queue(`INSERT INTO outbox (kind, team_id, ref, idempotency_key) VALUES (@kind, @team, @id, @key)`,
			pgx.NamedArgs{"kind": OutboxSendBatch, "id": *a.BatchID, "team": first.TeamID, "key": key})
	} else {
		b.Queue(`INSERT INTO outbox (kind, team_id, ref, scheduled_at, idempotency_key)
			VALUES (@kind, @team, @id, @scheduled_at, @key)`,
			pgx.NamedArgs{"kind": OutboxSendEmail, "id": first.ID, "team": first.TeamID, "scheduled_at": first.ScheduledAt, "key": key})
	}
	var addrs []string
	for _, e := range a.Emails {
		for _, r := range e.Recipients {
			addrs = append(addrs, r.Address)
		}
	}
	// Every recipient counts once, except those on the team's suppression
	// list and the sandbox's suppressed@ addresses: they are never sent to.
	// The quota is taken last: quota_take locks a slot of the team's usage
	// (all of them when exact) until the commit, and acceptances that need
	// the same slot wait for it, so they wait only for the commit and not
	// for the inserts too. Over the quota its error aborts the
	// transaction, inserts included.
	b.Queue(quotaTakeSQL,
		pgx.NamedArgs{"team": first.TeamID, "month": QuotaMonth(first.CreatedAt), "addrs": addrs, "exact": exact}).
		QueryRow(func(row pgx.Row) error { return row.Scan(used) })
	return b, nil
}

// quotaTakeSQL takes the quota of the addresses @addrs of team @team in
// month @month: every address counts once, except those on the team's
// suppression list and the sandbox's suppressed@ addresses, which are
// never sent to. It returns the team's usage of the month. With @exact
// false a small take far from the limit takes one slot of the usage and
// may fail with errQuotaTakeExactly (migration 00038), after which the
// caller retries the transaction with @exact true.
const quotaTakeSQL = `SELECT quota_take(@team, @month, (
	SELECT count(*) FROM unnest(@addrs::text[]) AS a(addr)
	WHERE lower(addr) !~ '^suppressed(\+[^@]*)?@posthaste\.test$'
	AND NOT EXISTS (SELECT 1 FROM suppression s WHERE s.team_id = @team AND s.email = lower(addr))), @exact)`

// queueEmails queues the inserts of emails as set-based statements, each
// column passed as one array, so that a batch of a hundred costs a few
// statements like one email does: the email rows, their attachments and
// the webhooks of scheduled ones. An email is one row: its recipients are
// arrays in it, and its first event is read from it (see Events).
//
// A broadcast's email for a contact that already has one is not inserted
// (see HandOffBroadcastChunk, the only writer of broadcast emails).
func queueEmails(b *pgx.Batch, emails []Email, batchID *uuid.UUID, key *string) error {
	onConflict := ""
	if len(emails) > 0 && emails[0].BroadcastID != nil {
		onConflict = ` ON CONFLICT (broadcast_id, contact_id) WHERE broadcast_id IS NOT NULL DO NOTHING`
	}
	n := len(emails)
	var (
		id, team, domain          = make([]uuid.UUID, n), make([]uuid.UUID, n), make([]*uuid.UUID, n)
		topic                     = make([]*uuid.UUID, n)
		template                  = make([]*uuid.UUID, n)
		broadcast, contact        = make([]*uuid.UUID, n), make([]*uuid.UUID, n)
		from, fromDomain, subject = make([]string, n), make([]string, n), make([]string, n)
		to, cc, bcc, replyTo      = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		html, text                = make([]*string, n), make([]*string, n)
		htmlSealed, textSealed    = make([][]byte, n), make([][]byte, n)
		generateText              = make([]bool, n)
		headers, tags             = make([]string, n), make([]string, n)
		insights                  = make([]string, n)
		scheduledAt               = make([]*time.Time, n)
		lastEvent                 = make([]string, n)
		createdAt                 = make([]time.Time, n)
		messageID                 = make([]*string, n)
		rcptAddr, rcptKind        = make([]string, n), make([]string, n)
		rcptDomain, rcptStatus    = make([]string, n), make([]string, n)
		attEmail                  []uuid.UUID
		attPos                    []int32
		attName, attType, attCID  []string
		attContent                [][]byte
		attSealed                 []bool
	)
	for i, e := range emails {
		id[i], team[i], domain[i], topic[i], template[i] = e.ID, e.TeamID, e.DomainID, e.TopicID, e.TemplateID
		broadcast[i], contact[i] = e.BroadcastID, e.ContactID
		from[i], fromDomain[i], subject[i] = e.From, e.FromDomain, e.Subject
		to[i], cc[i], bcc[i], replyTo[i] = arrayLiteral(e.To), arrayLiteral(e.Cc), arrayLiteral(e.Bcc), arrayLiteral(e.ReplyTo)
		html[i], text[i], generateText[i] = e.HTML, e.Text, e.GenerateText
		htmlSealed[i], textSealed[i] = e.htmlSealed, e.textSealed
		var err error
		if headers[i], err = jsonList(e.Headers); err != nil {
			return fmt.Errorf("encoding headers: %w", err)
		}
		if tags[i], err = jsonList(e.Tags); err != nil {
			return fmt.Errorf("encoding tags: %w", err)
		}
		if insights[i], err = jsonList(e.Insights); err != nil {
			return fmt.Errorf("encoding insights: %w", err)
		}
		scheduledAt[i], lastEvent[i], createdAt[i] = e.ScheduledAt, e.LastEvent, e.CreatedAt
		if e.MessageID != "" {
			messageID[i] = &e.MessageID
		}
		rcptAddr[i], rcptKind[i], rcptDomain[i], rcptStatus[i] = recipientArrays(e)
		for j, a := range e.Attachments {
			attEmail = append(attEmail, e.ID)
			attPos = append(attPos, int32(j))
			attName = append(attName, a.Filename)
			attType = append(attType, a.ContentType)
			attCID = append(attCID, a.ContentID)
			attContent = append(attContent, a.Content)
			attSealed = append(attSealed, a.sealed)
		}
	}
	// Row i of each insert takes element i of every array. One
	// generate_subscripts, rather than an unnest of all the arrays: that
	// would copy every array into a tuplestore of its own, which costs a
	// single email's acceptance about a fifth more.
	b.Queue(`INSERT INTO email (id, team_id, from_addr, from_domain, to_addrs, cc_addrs, bcc_addrs,
			reply_to, subject, html, text_body, generate_text, headers, tags, scheduled_at, last_event,
			created_at, updated_at, batch_id, idempotency_key, domain_id, message_id,
			rcpt_addrs, rcpt_kinds, rcpt_domains, rcpt_status, topic_id, broadcast_id, contact_id, insights,
			html_sealed, text_sealed, template_id)
		SELECT (@id::uuid[])[i], (@team::uuid[])[i], (@from::text[])[i], (@from_domain::text[])[i],
			(@to::text[])[i]::text[], (@cc::text[])[i]::text[], (@bcc::text[])[i]::text[], (@reply_to::text[])[i]::text[],
			(@subject::text[])[i], (@html::text[])[i], (@text::text[])[i], (@generate_text::boolean[])[i],
			(@headers::text[])[i]::jsonb, (@tags::text[])[i]::jsonb, (@scheduled_at::timestamptz[])[i],
			(@last_event::text[])[i], (@created_at::timestamptz[])[i], (@created_at::timestamptz[])[i],
			@batch, @key, (@domain::uuid[])[i], (@message_id::text[])[i],
			(@rcpt_addrs::text[])[i]::text[], (@rcpt_kinds::text[])[i]::text[],
			(@rcpt_domains::text[])[i]::text[], (@rcpt_status::text[])[i]::text[], (@topic::uuid[])[i],
			(@broadcast::uuid[])[i], (@contact::uuid[])[i], (@insights::text[])[i]::jsonb,
			(@html_sealed::bytea[])[i], (@text_sealed::bytea[])[i], (@template::uuid[])[i]
		FROM generate_subscripts(@id::uuid[], 1) AS i`+onConflict,
		pgx.NamedArgs{"id": id, "team": team, "from": from, "from_domain": fromDomain,
			"to": to, "cc": cc, "bcc": bcc, "reply_to": replyTo,
			"subject": subject, "html": html, "text": text, "generate_text": generateText,
			"headers": headers, "tags": tags, "scheduled_at": scheduledAt, "last_event": lastEvent,
			"created_at": createdAt, "domain": domain, "message_id": messageID, "batch": batchID, "key": key,
			"rcpt_addrs": rcptAddr, "rcpt_kinds": rcptKind, "rcpt_domains": rcptDomain, "rcpt_status": rcptStatus,
			"topic": topic, "broadcast": broadcast, "contact": contact, "insights": insights,
			"html_sealed": htmlSealed, "text_sealed": textSealed, "template": template})
	if len(attEmail) > 0 {
		b.Queue(`INSERT INTO attachment (email_id, position, filename, content_type, content_id, content, sealed)
			SELECT (@email::uuid[])[i], (@pos::int[])[i], (@filename::text[])[i], (@ctype::text[])[i],
				(@cid::text[])[i], (@content::bytea[])[i], (@sealed::boolean[])[i]
			FROM generate_subscripts(@email::uuid[], 1) AS i`,
			pgx.NamedArgs{"email": attEmail, "pos": attPos, "filename": attName, "ctype": attType,
				"cid": attCID, "content": attContent, "sealed": attSealed})
	}
	for _, e := range emails {
		if e.Source != nil {
			b.Queue(`INSERT INTO email_source (email_id, data, sealed) VALUES (@id, @data, @sealed)`,
				pgx.NamedArgs{"id": e.ID, "data": e.Source, "sealed": e.sourceSealed})
		}
	}
	queueScheduledWebhooks(b, emails)
	return nil
}

// recipientArrays returns the recipients of e as the array literals of the
// rcpt_* columns; every recipient starts in the email's state.
func recipientArrays(e Email) (addrs, kinds, domains, status string) {
	n := len(e.Recipients)
	a, k, d, st := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, r := range e.Recipients {
		a[i], k[i], d[i], st[i] = r.Address, r.Kind, r.Domain, e.LastEvent
	}
	return arrayLiteral(a), arrayLiteral(k), arrayLiteral(d), arrayLiteral(st)
}

// queueScheduledWebhooks queues the webhooks of the first event of the
// scheduled emails, whose time is the email's creation time: one
// statement per run of emails created at the same time, and a batch is
// one run.
func queueScheduledWebhooks(b *pgx.Batch, emails []Email) {
	for len(emails) > 0 {
		at := emails[0].CreatedAt
		var ids []uuid.UUID
		for len(emails) > 0 && emails[0].CreatedAt.Equal(at) {
			if emails[0].LastEvent == EventScheduled {
				ids = append(ids, emails[0].ID)
			}
			emails = emails[1:]
		}
		if len(ids) > 0 {
			args := pgx.NamedArgs{"ids": ids}
			webhookArgs(args, Event{Type: EventScheduled}, at)
			b.Queue(`WITH ins AS (SELECT unnest(@ids::uuid[]) AS email_id)`+emailWebhooksCTE+` SELECT count(*) FROM wh`, args)
		}
	}
}

// arrayElementEscaper escapes the element of an array literal that goes
// between double quotes.
var arrayElementEscaper = strings.NewReplacer(`"`, `\"`, `\`, `\\`)

// arrayLiteral formats list as a PostgreSQL array literal that a cast to
// text[] reads back element for element: every element double-quoted,
// with its double quotes and backslashes escaped (PostgreSQL manual,
// §8.15.6 Array Input and Output Syntax).
func arrayLiteral(list []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		_, _ = arrayElementEscaper.WriteString(&b, s) // a strings.Builder does not fail
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// jsonList encodes a list as a JSON array, nil as [].
func jsonList[T any](list []T) (string, error) {
	if len(list) == 0 {
		return "[]", nil
	}
	data, err := json.Marshal(list)
	return string(data), err
}

const emailColumns = `id, team_id, from_addr, from_domain, to_addrs, cc_addrs, bcc_addrs, reply_to,
	subject, html, text_body, generate_text, headers, tags, scheduled_at, last_event,
	coalesce(message_id, ''), created_at, updated_at, batch_id, idempotency_key, domain_id,
	rcpt_addrs, rcpt_kinds, rcpt_domains, rcpt_status, topic_id, broadcast_id, contact_id, insights,
	html_sealed, text_sealed`

// emailListColumns leaves the bodies (and insights) out.
const emailListColumns = `id, team_id, from_addr, from_domain, to_addrs, cc_addrs, bcc_addrs, reply_to,
	subject, NULL::text, NULL::text, generate_text, headers, tags, scheduled_at, last_event,
	coalesce(message_id, ''), created_at, updated_at, batch_id, idempotency_key, domain_id,
	rcpt_addrs, rcpt_kinds, rcpt_domains, rcpt_status, topic_id, broadcast_id, contact_id, '[]'::jsonb,
	NULL::bytea, NULL::bytea`

func scanEmail(row pgx.Row) (Email, error) {
	var e Email
	var addrs, kinds, domains, status []string
	err := row.Scan(&e.ID, &e.TeamID, &e.From, &e.FromDomain, &e.To, &e.Cc, &e.Bcc, &e.ReplyTo,
		&e.Subject, &e.HTML, &e.Text, &e.GenerateText, &e.Headers, &e.Tags, &e.ScheduledAt,
		&e.LastEvent, &e.MessageID, &e.CreatedAt, &e.UpdatedAt, &e.BatchID, &e.IdempotencyKey, &e.DomainID,
		&addrs, &kinds, &domains, &status, &e.TopicID, &e.BroadcastID, &e.ContactID, &e.Insights,
		&e.htmlSealed, &e.textSealed)
	if err != nil {
		return Email{}, mapErr(err)
	}
	// The email_rcpt_shape constraint keeps the four arrays equally long.
	e.Recipients = make([]Recipient, len(addrs))
	for i := range addrs {
		e.Recipients[i] = Recipient{Address: addrs[i], Kind: kinds[i], Domain: domains[i], Status: status[i]}
	}
	return e, nil
}

// GetEmail returns a team's email with its recipients. ErrNotFound for
// unknown ids and for other teams' emails.
func (s *Emails) GetEmail(ctx context.Context, teamID, id uuid.UUID) (Email, error) {
	e, err := scanEmail(s.pool.QueryRow(ctx, `SELECT `+emailColumns+` FROM email
		WHERE id = @id AND team_id = @team`, pgx.NamedArgs{"id": id, "team": teamID}))
	return s.openedEmail(ctx, e, err)
}

// openedEmail opens the sealed content of an email just read.
func (s *Emails) openedEmail(ctx context.Context, e Email, err error) (Email, error) {
	if err != nil {
		return Email{}, err
	}
	if err := s.openEmail(ctx, &e); err != nil {
		return Email{}, err
	}
	return e, nil
}

// ListEmails lists a team's emails, newest first, without bodies.
func (s *Emails) ListEmails(ctx context.Context, teamID uuid.UUID, p Page) ([]Email, bool, error) {
	return listPage(ctx, s.Store, p, `SELECT `+emailListColumns+` FROM email WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}, scanEmail)
}

// EmailToSend is what preparing and delivering an email read: the email
// with its bodies, recipients and submitted source (its attachments only
// when asked for), its sender domain (nil for the sandbox sender, or a
// domain since removed from the table), the name of its IP pool ("" for
// the default: the domain's pool, else the team's) and its built message
// (nil until SaveMessage stored it).
type EmailToSend struct {
	Email   Email
	Domain  *Domain
	IPPool  string
	Message []byte
}

// EmailForSending loads an EmailToSend in one round trip. Attachments are
// read only when attachments is set: a delivery of the stored message
// needs none.
func (s *Emails) EmailForSending(ctx context.Context, id uuid.UUID, attachments bool) (EmailToSend, error) {
	var out EmailToSend
	args := pgx.NamedArgs{"id": id}
	b := &pgx.Batch{}
	queueEmail(b, id, &out.Email)
	if attachments {
		queueAttachments(b, id, &out.Email)
	}
	queueSource(b, id, &out.Email)
	var messageSealed bool
	b.Queue(`SELECT data, sealed FROM email_message WHERE email_id = @id`, args).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&out.Message, &messageSealed); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("loading message of %s: %w", id, mapErr(err))
		}
		return nil
	})
	b.Queue(`SELECT `+domainColumns+` FROM domain WHERE id = (SELECT domain_id FROM email WHERE id = @id)`, args).
		QueryRow(func(row pgx.Row) error {
			d, err := scanDomain(row)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("loading domain of email %s: %w", id, err)
			}
			out.Domain = &d
			return nil
		})
	b.Queue(sendingIPPoolSQL(`(SELECT team_id FROM email WHERE id = @id)`, `(SELECT domain_id FROM email WHERE id = @id)`),
		args).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&out.IPPool); err != nil {
			return fmt.Errorf("choosing the IP pool of email %s: %w", id, mapErr(err))
		}
		return nil
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return EmailToSend{}, err
	}
	if err := s.openEmail(ctx, &out.Email); err != nil {
		return EmailToSend{}, err
	}
	var err error
	if out.Message, err = s.openBytes(ctx, out.Email.TeamID, out.Message, messageSealed, adMessage(id)); err != nil {
		return EmailToSend{}, fmt.Errorf("message of email %s: %w", id, err)
	}
	return out, nil
}

// Attachments returns the attachments of an email, in order.
func (s *Emails) Attachments(ctx context.Context, id uuid.UUID) ([]Attachment, error) {
	e := Email{ID: id}
	b := &pgx.Batch{}
	b.Queue(`SELECT team_id FROM email WHERE id = @id`, pgx.NamedArgs{"id": id}).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&e.TeamID); err != nil {
			return fmt.Errorf("loading email %s: %w", id, mapErr(err))
		}
		return nil
	})
	queueAttachments(b, id, &e)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if err := s.openEmail(ctx, &e); err != nil {
		return nil, err
	}
	return e.Attachments, nil
}

// SentContent is what a sent email carried besides its bodies.
type SentContent struct {
	// Attachments are those accepted over the API, in order, with their
	// positions.
	Attachments []Attachment
	// Source is the message as submitted over SMTP; nil for API emails.
	Source []byte
	// HasHTML is set when the email has an HTML body (its attachments
	// with a content id are then inline).
	HasHTML bool
}

// SentContent returns the SentContent of the team's email, opened. An
// erasure that anonymised the email removed the source and the
// attachments that named the address; ErrNotFound when the team has no
// such email (another team's, or one erased whole).
func (s *Emails) SentContent(ctx context.Context, team, id uuid.UUID) (SentContent, error) {
	e := Email{ID: id}
	var out SentContent
	b := &pgx.Batch{}
	b.Queue(`SELECT team_id, html IS NOT NULL OR html_sealed IS NOT NULL FROM email WHERE id = @id AND team_id = @team`,
		pgx.NamedArgs{"id": id, "team": team}).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&e.TeamID, &out.HasHTML); err != nil {
			return fmt.Errorf("loading email %s: %w", id, mapErr(err))
		}
		return nil
	})
	queueAttachments(b, id, &e)
	queueSource(b, id, &e)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return SentContent{}, err
	}
	if err := s.openEmail(ctx, &e); err != nil {
		return SentContent{}, err
	}
	out.Attachments, out.Source = e.Attachments, e.Source
	return out, nil
}

// queueEmail queues the read of the email row into e. It must be queued
// before queueAttachments and queueSource, which fill fields of e.
func queueEmail(b *pgx.Batch, id uuid.UUID, e *Email) {
	b.Queue(`SELECT `+emailColumns+` FROM email WHERE id = @id`, pgx.NamedArgs{"id": id}).QueryRow(func(row pgx.Row) error {
		var err error
		if *e, err = scanEmail(row); err != nil {
			return fmt.Errorf("loading email %s: %w", id, err)
		}
		return nil
	})
}

// queueAttachments queues the read of the email's attachments into e.
func queueAttachments(b *pgx.Batch, id uuid.UUID, e *Email) {
	b.Queue(`SELECT filename, content_type, content_id, content, sealed, position FROM attachment
		WHERE email_id = @id ORDER BY position`, pgx.NamedArgs{"id": id}).Query(func(rows pgx.Rows) error {
		var err error
		e.Attachments, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attachment, error) {
			var a Attachment
			err := r.Scan(&a.Filename, &a.ContentType, &a.ContentID, &a.Content, &a.sealed, &a.Position)
			return a, err
		})
		if err != nil {
			return fmt.Errorf("reading attachments: %w", mapErr(err))
		}
		return nil
	})
}

// queueSource queues the read of the email's submitted source into e.
func queueSource(b *pgx.Batch, id uuid.UUID, e *Email) {
	b.Queue(`SELECT data, sealed FROM email_source WHERE email_id = @id`, pgx.NamedArgs{"id": id}).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&e.Source, &e.sourceSealed); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("reading submitted message: %w", mapErr(err))
		}
		return nil
	})
}

// SaveMessage stores the built message of the team's email once; a
// second call (a retried step) keeps the first message and returns it.
func (s *Emails) SaveMessage(ctx context.Context, teamID, id uuid.UUID, messageID string, data []byte) ([]byte, error) {
	sealedData, sealed, err := s.sealBytes(ctx, teamID, data, adMessage(id))
	if err != nil {
		return nil, fmt.Errorf("sealing message of %s: %w", id, err)
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO email_message (email_id, data, sealed)
		SELECT @id, @data, @sealed WHERE EXISTS (SELECT 1 FROM email WHERE id = @id AND team_id = @team)
		ON CONFLICT (email_id) DO NOTHING`,
		pgx.NamedArgs{"id": id, "team": teamID, "data": sealedData, "sealed": sealed})
	b.Queue(`UPDATE email SET message_id = @mid WHERE id = @id AND team_id = @team AND message_id IS NULL`,
		pgx.NamedArgs{"id": id, "team": teamID, "mid": messageID})
	var stored []byte
	var storedSealed bool
	b.Queue(`SELECT data, sealed FROM email_message WHERE email_id = @id`, pgx.NamedArgs{"id": id}).
		QueryRow(func(row pgx.Row) error { return row.Scan(&stored, &storedSealed) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("saving message of %s: %w", id, mapErr(err))
	}
	if stored, err = s.openBytes(ctx, teamID, stored, storedSealed, adMessage(id)); err != nil {
		return nil, fmt.Errorf("message of %s: %w", id, err)
	}
	return stored, nil
}

// Message returns the built message of an email.
func (s *Emails) Message(ctx context.Context, id uuid.UUID) ([]byte, error) {
	var data []byte
	var sealed bool
	var team uuid.UUID
	err := s.pool.QueryRow(ctx, `SELECT m.data, m.sealed, e.team_id FROM email_message m JOIN email e ON e.id = m.email_id
		WHERE m.email_id = @id`, pgx.NamedArgs{"id": id}).Scan(&data, &sealed, &team)
	if err != nil {
		return nil, mapErr(err)
	}
	if data, err = s.openBytes(ctx, team, data, sealed, adMessage(id)); err != nil {
		return nil, fmt.Errorf("message of %s: %w", id, err)
	}
	return data, nil
}

// recordEventSQL appends one event and, only when it was appended, moves
// the state of the recipient it names (or of every recipient) and the
// email's last_event. Outcome events (guarded) are dropped for a recipient
// that already reached a final state, except one: an asynchronous
// `bounced` (Event.Async: a delivery status notification from a server
// that accepted the message first) after `delivered`. An event that
// happens once per recipient is never appended twice: a retried step is
// harmless.
var recordEventSQL = `
WITH ok AS (
	SELECT 1 WHERE NOT @guarded::boolean OR @rcpt::text IS NULL OR EXISTS (
		SELECT 1 FROM email WHERE id = @id
		AND (rcpt_status[array_position(rcpt_addrs, @rcpt::text)] <> ALL (` + finalStatesArray + `)
			OR (@late::boolean AND rcpt_status[array_position(rcpt_addrs, @rcpt::text)] = '` + EventDelivered + `')))
), ins AS (
	INSERT INTO email_event (email_id, type, recipient, detail, created_at)
	SELECT @id, @type, @rcpt, @detail, @at FROM ok
	ON CONFLICT (email_id, type, coalesce(recipient, '')) WHERE type NOT IN ('opened', 'clicked') DO NOTHING
	RETURNING email_id
)` + emailWebhooksCTE + `
UPDATE email SET last_event = @type, updated_at = greatest(updated_at, @at::timestamptz),
	rcpt_status = CASE
		WHEN NOT @state::boolean THEN rcpt_status
		WHEN @rcpt::text IS NULL THEN ` + allRecipients("@type::text") + `
		ELSE (SELECT array_agg(CASE WHEN a = @rcpt::text AND (NOT @engagement::boolean OR ` + engagementMoves + `)
				THEN @type::text ELSE st END ORDER BY n)
			FROM unnest(rcpt_addrs, rcpt_status) WITH ORDINALITY AS r(a, st, n)) END
WHERE id = @id AND EXISTS (SELECT 1 FROM ins)`

// engagementMoves says, in recordEventSQL, whether an engagement event
// (@type, opened or clicked) moves the recipient state st: only forward
// from delivered, delivered → opened → clicked, so a second open after a
// click leaves the recipient clicked, and a recipient that bounced late or
// complained keeps that state.
const engagementMoves = `(st = '` + EventDelivered + `' OR (st = '` + EventOpened + `' AND @type::text = '` + EventClicked + `'))`

// allRecipients is the rcpt_status of an email (in an UPDATE of it) whose
// recipients are all in the state state, an SQL expression.
func allRecipients(state string) string {
	return `array_fill(` + state + `, ARRAY[cardinality(rcpt_addrs)])`
}

// RecordEvents appends events to an email's history in order, moving the
// state of the recipients they name and the email's last_event (see
// recordEventSQL for the rules that make a repeated call harmless). In the
// same transaction, every event appended gets a webhook message for each
// enabled endpoint of the team subscribed to its type, and an outbox entry
// that wakes the endpoint's delivery: an event is never recorded without
// its webhooks.
func (s *Emails) RecordEvents(ctx context.Context, emailID uuid.UUID, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queueEvents(b, emailID, events)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("recording events of %s: %w", emailID, mapErr(err))
	}
	return nil
}

// queueEvents queues the statements of RecordEvents.
func queueEvents(b *pgx.Batch, emailID uuid.UUID, events []Event) {
	for _, ev := range events {
		var rcpt *string
		if ev.Recipient != "" {
			rcpt = &ev.Recipient
		}
		at := ev.CreatedAt
		if at.IsZero() {
			at = time.Now()
		}
		args := pgx.NamedArgs{"id": emailID, "type": ev.Type, "rcpt": rcpt,
			"detail": ev.Detail, "at": at, "guarded": guarded(ev.Type), "state": recipientState(ev.Type),
			"late": ev.Async && ev.Type == EventBounced, "engagement": engagement(ev.Type)}
		webhookArgs(args, ev, at)
		b.Queue(recordEventSQL, args)
	}
}

// guarded event types are outcomes that a recipient in a final state
// cannot have any more.
func guarded(t string) bool {
	switch t {
	case EventDelivered, EventDeliveryDelayed, EventBounced, EventFailed, EventSuppressed:
		return true
	}
	return false
}

// recipientState event types move the state of the recipient they name
// (engagement ones only forward: engagementMoves).
func recipientState(t string) bool {
	switch t {
	case EventScheduled, EventQueued, EventSent, EventDelivered, EventDeliveryDelayed, EventBounced,
		EventComplained, EventFailed, EventCanceled, EventSuppressed, EventOpened, EventClicked:
		return true
	}
	return false
}

// engagement event types are a delivered recipient's opens and clicks.
func engagement(t string) bool { return t == EventOpened || t == EventClicked }

// firstEventType is the type of an email's first event, its acceptance,
// an SQL expression on the email row: `scheduled` when it was accepted
// with a time to leave (scheduled_at is never cleared afterwards), `queued`
// otherwise. That event is not stored: its time is the email's created_at.
const firstEventType = `CASE WHEN scheduled_at IS NULL THEN 'queued' ELSE 'scheduled' END`

// Events returns an email's history, oldest first: its acceptance, then
// the recorded events.
func (s *Emails) Events(ctx context.Context, emailID uuid.UUID) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT type, recipient, detail, created_at FROM (
			SELECT 0 AS id, `+firstEventType+` AS type, '' AS recipient, NULL::jsonb AS detail, created_at
			FROM email WHERE id = @id
			UNION ALL
			SELECT id, type, coalesce(recipient, ''), detail, created_at FROM email_event WHERE email_id = @id
		) ev ORDER BY id`, pgx.NamedArgs{"id": emailID})
	if err != nil {
		return nil, mapErr(err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var ev Event
		err := r.Scan(&ev.Type, &ev.Recipient, &ev.Detail, &ev.CreatedAt)
		return ev, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", mapErr(err))
	}
	return evs, nil
}
