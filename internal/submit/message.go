package submit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/mime"
	"github.com/posthaste/posthaste/internal/store"
)

// EndpointSMTP names SMTP submissions in idempotency records: a key used
// over SMTP and then over the API (or the reverse) is a mismatch.
const EndpointSMTP = "SMTP DATA"

// Message is a message submitted as bytes, with its envelope (SMTP).
type Message struct {
	EnvelopeFrom string   // the MAIL FROM address
	Recipients   []string // the RCPT TO addresses
	Data         []byte   // the message as received
}

// CheckEnvelopeSender checks that the team may use addr as an envelope
// sender (MAIL FROM): by the same rules as the `from` field, under one of
// its verified domains or the sandbox sender. Rejections are *Error.
func (s *Service) CheckEnvelopeSender(ctx context.Context, from Sender, addr string) error {
	a, err := parseEnvelopeSender(addr)
	if err != nil {
		return err
	}
	if err := s.checkPaused(ctx, from.TeamID); err != nil {
		return err
	}
	_, err = s.authorizeSender(ctx, from, a, "MAIL FROM", nil)
	return err
}

func parseEnvelopeSender(addr string) (address.Address, error) {
	if addr == "" {
		return address.Address{}, Errorf(KindForbidden, "MAIL FROM",
			"A sender address is required: the null sender <> cannot submit mail.")
	}
	a, err := address.Parse(addr)
	if err != nil {
		return address.Address{}, Errorf(KindInvalidParameter, "MAIL FROM", "The sender address %q is not valid.", truncate(addr, 100))
	}
	return a, nil
}

// CheckRecipient checks the syntax of an envelope recipient (RCPT TO).
func CheckRecipient(addr string) error {
	if _, err := address.Parse(addr); err != nil {
		return Errorf(KindInvalidParameter, "RCPT TO", "The recipient address %q is not valid.", truncate(addr, 100))
	}
	return nil
}

// SendMessage validates and accepts a message submitted as bytes. It is
// delivered to the envelope recipients as submitted, except that Bcc and
// the instruction fields (Idempotency-Key, Resend-Idempotency-Key,
// X-Posthaste-Tags) are removed and a Message-ID and a Date are added when
// absent. The envelope sender and the From address must both be ones the
// team may send as; the idempotency key comes from the message's
// Idempotency-Key field, with the guarantees of SendWithOptions; tags from
// X-Posthaste-Tags ("name=value, name2=value2"). A message that is not an
// RFC 5322 message is an *Error of KindMalformedMessage.
func (s *Service) SendMessage(ctx context.Context, from Sender, m Message) (SendResult, error) {
	var res SendResult
	if len(m.Data) > MaxMessageSize {
		return res, Errorf(KindTooLarge, "DATA", "The message is larger than %d bytes.", MaxMessageSize)
	}
	parsed, err := mime.ParseSubmission(m.Data)
	if errors.Is(err, mime.ErrTooDeep) {
		return res, Errorf(KindValidation, "DATA", "The message's multipart bodies nest more than %d deep.", mime.MaxNesting)
	}
	if err != nil {
		return res, Errorf(KindMalformedMessage, "DATA", "%s", strings.TrimPrefix(err.Error(), mime.ErrMalformed.Error()+": "))
	}
	var request []any // what the idempotency key's hash covers
	if parsed.IdempotencyKey != nil {
		sum := sha256.Sum256(m.Data)
		rcpts := make([]string, len(m.Recipients))
		for i, r := range m.Recipients {
			rcpts[i] = strings.ToLower(r)
		}
		request = []any{m.EnvelopeFrom, rcpts, sum[:]}
	}
	claim, replayed, err := s.claimOrReplay(ctx, from.TeamID, parsed.IdempotencyKey, EndpointSMTP, request, &res)
	if err != nil || replayed {
		res.Replayed = replayed
		return res, err
	}
	accepted := false
	defer s.finish(ctx, claim, &accepted)
	if err := s.checkPaused(ctx, from.TeamID); err != nil {
		return res, err
	}
	e, env, err := checkMessage(parsed, m)
	if err != nil {
		return res, err
	}
	// The envelope sender, From and the other author fields usually share
	// a domain: it is loaded once (known), and the insights read it too.
	known := senderDomains{}
	if _, err := s.authorizeSender(ctx, from, env, "MAIL FROM", known); err != nil {
		return res, err
	}
	d, err := s.authorize(ctx, from, e, false, known)
	if err != nil {
		return res, err
	}
	if err := s.authorizeAuthors(ctx, from, parsed, known); err != nil {
		return res, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return res, fmt.Errorf("making email id: %w", err)
	}
	res.ID = id
	now := s.now()
	row := messageRow(id, from.TeamID, e, parsed, now)
	row.DomainID = domainID(d)
	if row.MessageID == "" {
		row.MessageID = id.String() + "@" + e.From.Domain
	}
	row.Source = parsed.Bytes(row.MessageID, now)
	if len(row.Source) > MaxMessageSize {
		return res, Errorf(KindTooLarge, "DATA", "The message is larger than %d bytes.", MaxMessageSize)
	}
	if res, err = s.acceptOne(ctx, row, claim.stored(), known); err != nil {
		return res, err
	}
	accepted = true
	return res, nil
}

// authorizeAuthors checks the other fields that name who a message is
// from by the rules of From: Sender (RFC 5322 §3.6.2), and every
// Resent-From and Resent-Sender (§3.6.6). Receivers show them as the
// author or the sender ("on behalf of"), and DMARC does not look at
// them, so an unchecked one would let a team sign mail as anyone. known
// caches the domains the message's checks loaded.
func (s *Service) authorizeAuthors(ctx context.Context, from Sender, p *mime.Submission, known senderDomains) error {
	type author struct {
		field string
		addr  mime.Address
	}
	var authors []author
	if p.Sender != nil {
		authors = append(authors, author{"Sender", *p.Sender})
	}
	for _, a := range p.ResentFrom {
		authors = append(authors, author{"Resent-From", a})
	}
	for _, a := range p.ResentSender {
		authors = append(authors, author{"Resent-Sender", a})
	}
	for _, au := range authors {
		a, err := address.Parse(au.addr.Addr)
		if err != nil {
			return Errorf(KindInvalidParameter, au.field, "The %s address %q is not valid.", au.field, truncate(au.addr.Addr, 100))
		}
		if _, err := s.authorizeSender(ctx, from, a, au.field, known); err != nil {
			return err
		}
	}
	return nil
}

// checkMessage validates a parsed submission and its envelope. The Email
// it returns has the From address, the envelope recipients in To (what
// authorize checks: who receives the message) and the tags.
func checkMessage(p *mime.Submission, m Message) (Email, address.Address, error) {
	var e Email
	env, err := parseEnvelopeSender(m.EnvelopeFrom)
	if err != nil {
		return e, env, err
	}
	if len(p.From) != 1 {
		return e, env, Errorf(KindValidation, "From", "The From field must hold exactly one address.")
	}
	if e.From, err = address.Parse(p.From[0].Addr); err != nil {
		return e, env, Errorf(KindInvalidParameter, "From", "The From address %q is not valid.", truncate(p.From[0].Addr, 100))
	}
	e.From.Name = p.From[0].Name
	if len(m.Recipients) == 0 {
		return e, env, Errorf(KindMissingField, "RCPT TO", "The message has no recipients.")
	}
	if len(m.Recipients) > maxRecipients {
		return e, env, Errorf(KindValidation, "RCPT TO", "At most %d recipients are allowed; this message has %d.",
			maxRecipients, len(m.Recipients))
	}
	seen := map[string]bool{}
	for _, r := range m.Recipients {
		a, err := address.Parse(r)
		if err != nil {
			return e, env, CheckRecipient(r)
		}
		if key := strings.ToLower(a.Addr()); !seen[key] {
			seen[key] = true
			e.To = append(e.To, a)
		}
	}
	tags, err := parseTagsField(p.Tags)
	if err != nil {
		return e, env, err
	}
	if e.Tags, err = checkTags(tags); err != nil {
		var re *Error
		if errors.As(err, &re) {
			re.Field, re.Message = mime.FieldTags, "Invalid "+mime.FieldTags+" field. "+tagRule
		}
		return e, env, err
	}
	return e, env, nil
}

const tagRule = "Tags are written name=value, separated by commas; names and values may only contain " +
	"ASCII letters, numbers, underscores and dashes."

// parseTagsField reads "name=value, name2=value2".
func parseTagsField(v string) ([]Tag, error) {
	if v == "" {
		return nil, nil
	}
	var tags []Tag
	for _, part := range strings.Split(v, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, Errorf(KindValidation, mime.FieldTags, "Invalid %s field. %s", mime.FieldTags, tagRule)
		}
		tags = append(tags, Tag{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
	}
	return tags, nil
}

// messageRow is the email row of a submitted message: the addresses and
// subject as its header shows them, the envelope recipients as its
// recipients (kind to or cc when the header names them, bcc otherwise).
func messageRow(id, team uuid.UUID, e Email, p *mime.Submission, now time.Time) store.Email {
	kinds := map[string]string{}
	for _, g := range []struct {
		kind string
		list []mime.Address
	}{{"cc", p.Cc}, {"to", p.To}} {
		for _, a := range g.list {
			kinds[strings.ToLower(a.Addr)] = g.kind
		}
	}
	row := store.Email{
		ID:         id,
		TeamID:     team,
		From:       e.From.String(),
		FromDomain: e.From.Domain,
		To:         headerDisplay(p.To),
		Cc:         headerDisplay(p.Cc),
		Bcc:        []string{},
		ReplyTo:    headerDisplay(p.ReplyTo),
		Subject:    p.Subject,
		HTML:       p.HTML,
		Text:       p.Text,
		Tags:       toStoreTags(e.Tags),
		LastEvent:  store.EventQueued,
		MessageID:  p.MessageID,
		CreatedAt:  now.UTC(),
	}
	for _, a := range e.To { // the envelope recipients
		kind := kinds[strings.ToLower(a.Addr())]
		if kind == "" {
			kind = "bcc"
			row.Bcc = append(row.Bcc, a.Addr())
		}
		row.Recipients = append(row.Recipients, store.Recipient{
			Address: a.Addr(), Kind: kind, Domain: a.Domain, Status: row.LastEvent,
		})
	}
	return row
}

// headerDisplay is the display form of header addresses; an address our
// parser refuses is shown as written.
func headerDisplay(list []mime.Address) []string {
	out := make([]string, 0, len(list))
	for _, m := range list {
		a, err := address.Parse(m.Addr)
		if err != nil {
			out = append(out, m.Addr)
			continue
		}
		a.Name = m.Name
		out = append(out, a.String())
	}
	return out
}
