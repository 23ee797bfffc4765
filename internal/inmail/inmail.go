// Package inmail defines received mail as the inbound MX (package
// mxlisten) hands it on: the route that makes each recipient ours, the
// message with its sender authentication results, and the inbound budget
// of a team. It does no I/O, so that the Router and Acceptor behind the
// listener, and the store that keeps what it accepts, share these types
// without linking the listener.
package inmail

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"time"

	"github.com/emersion/go-msgauth/authres"
	"github.com/google/uuid"
)

// ErrNotOurs is what a Router returns (possibly wrapped) for a recipient
// Posthaste is not responsible for; the listener refuses it at RCPT with
// 550 5.1.1. Any other Router error is a temporary failure (451 4.3.0).
var ErrNotOurs = errors.New("recipient is not ours")

// RouteKind says why a recipient is ours.
type RouteKind string

// Route kinds.
const (
	// RouteReturnPath is the return path (VERP address) of an email we
	// sent: what arrives is a bounce or an auto-reply to it.
	RouteReturnPath RouteKind = "return_path"
	// RouteReceiving is an address at a domain with receiving enabled.
	RouteReceiving RouteKind = "receiving"
	// RouteUnsubscribe is the mailto unsubscribe address of a recipient
	// of an email we sent (RFC 2369 List-Unsubscribe): whatever arrives
	// unsubscribes that recipient.
	RouteUnsubscribe RouteKind = "unsubscribe"
	// RouteDiscard is a recipient we answer for whose mail is dropped
	// unread once accepted: the validly signed return path of an email no
	// longer kept. A late report about it concerns nobody now, and
	// refusing it would only make its sender's MTA report the refusal.
	RouteDiscard RouteKind = "discard"
)

// Route says who is responsible for a recipient.
type Route struct {
	Kind     RouteKind
	TeamID   uuid.UUID
	DomainID uuid.UUID
	EmailID  uuid.UUID // the email of a RouteReturnPath or RouteUnsubscribe; uuid.Nil otherwise
}

// Router routes a recipient address, in the form NormalizeRecipient
// returns (lower-case, ASCII domain). It returns ErrNotOurs for an address
// that is not ours, another error for a temporary failure.
type Router interface {
	Route(ctx context.Context, rcpt string) (Route, error)
}

// Recipient is an accepted recipient.
type Recipient struct {
	Address string // normalized
	Route   Route
}

// Message is a received message, handed to an Acceptor.
type Message struct {
	// ID names the message in its Received header; the Acceptor should
	// keep it as the message's id (a UUIDv7).
	ID uuid.UUID
	// MailFrom is the envelope sender as given; "" for the null reverse
	// path <> of delivery status notifications.
	MailFrom   string
	Recipients []Recipient
	ClientIP   netip.Addr
	Helo       string // the EHLO/HELO name, as given
	TLS        bool   // STARTTLS was used
	ReceivedAt time.Time
	// Data is the message with the listener's Received header prepended,
	// when it is held in memory; nil when it is in Spool instead.
	Data []byte
	// Spool holds a large message (the listener spools any over 1 MiB to
	// a temporary file) as Data would, Size bytes of it. It is readable
	// only during Accept: the file is removed once Accept returns. Use
	// Reader and Len, which cover both.
	Spool io.ReaderAt
	Size  int64
	// Auth holds the SPF, DKIM and DMARC results; AuthHeader is them as an
	// Authentication-Results value (RFC 8601) for the listener's host
	// name (inbound.Config.Hostname).
	Auth       Results
	AuthHeader string
}

// Len is the size of the message (with its Received header).
func (m Message) Len() int64 {
	if m.Spool != nil {
		return m.Size
	}
	return int64(len(m.Data))
}

// Reader reads the message (with its Received header) from its start,
// from Data or from Spool; each call returns a new reader.
func (m Message) Reader() io.Reader {
	if m.Spool != nil {
		return io.NewSectionReader(m.Spool, 0, m.Size)
	}
	return bytes.NewReader(m.Data)
}

// Acceptor commits a received message (to PostgreSQL). Returning nil
// means it is committed: the client is told 250 and the message must not
// be lost. An error makes the client retry later (451) and must leave
// nothing half-accepted.
type Acceptor interface {
	Accept(ctx context.Context, m Message) error
}

// Results are the sender authentication checks of one message. They are
// recorded, never a reason to refuse it.
type Results struct {
	SPF   SPFResult
	DKIM  []DKIMResult // one per DKIM-Signature, in header order; empty when unsigned
	DMARC DMARCResult
}

// SPFResult is the SPF check (RFC 7208) of the client address.
type SPFResult struct {
	// Result is one of RFC 7208 §2.6: none, neutral, pass, fail, softfail,
	// temperror, permerror.
	Result string
	// Domain is the identity checked: the MAIL FROM domain, or the HELO
	// name for the null sender (RFC 7208 §2.4).
	Domain string
	// Scope says which: "mailfrom" or "helo".
	Scope string
}

// DKIMResult is the verification of one DKIM signature (RFC 6376).
type DKIMResult struct {
	// Result is one of RFC 8601 §2.7.1: pass, fail, temperror, permerror.
	Result     string
	Domain     string // d=
	Identifier string // i=
	Reason     string // why it did not pass; "" when it did
}

// DMARCResult is the DMARC evaluation (RFC 7489) of the RFC5322.From domain.
type DMARCResult struct {
	// Result is one of RFC 7489 §11.2: none (no policy), pass, fail,
	// temperror (policy lookup failed), permerror (no single From domain).
	Result string
	// FromDomain is the RFC5322.From domain; "" when there is not one.
	FromDomain string
	// Policy is the policy the domain owner asks for on failure (p=, or
	// sp= when the record is the organizational domain's): none,
	// quarantine, reject; "" without a record. It is recorded, not applied.
	Policy string
	// PolicyDomain is where the record was found.
	PolicyDomain string
	// SPFAligned and DKIMAligned say which mechanism produced an aligned
	// pass (RFC 7489 §3.1).
	SPFAligned, DKIMAligned bool
}

// Header is the value of an Authentication-Results header field (RFC 8601)
// for the results, with authservID (the listener's host name) as the
// authentication service identifier.
func (r Results) Header(authservID string) string {
	var out []authres.Result
	spfRes := &authres.SPFResult{Value: authres.ResultValue(r.SPF.Result)}
	if r.SPF.Scope == "helo" {
		spfRes.Helo = r.SPF.Domain
	} else {
		spfRes.From = r.SPF.Domain
	}
	out = append(out, spfRes)
	if len(r.DKIM) == 0 {
		out = append(out, &authres.DKIMResult{Value: authres.ResultNone})
	}
	for _, d := range r.DKIM {
		out = append(out, &authres.DKIMResult{Value: authres.ResultValue(d.Result), Reason: d.Reason,
			Domain: d.Domain, Identifier: d.Identifier})
	}
	dm := &authres.DMARCResult{Value: authres.ResultValue(r.DMARC.Result), From: r.DMARC.FromDomain}
	if r.DMARC.Policy != "" {
		dm.Reason = "p=" + r.DMARC.Policy
	}
	out = append(out, dm)
	return authres.Format(authservID, out)
}

// ErrOverBudget is what an Acceptor returns (possibly wrapped) when a
// message would take a team over its Budget; the listener answers 452
// 4.2.2, and the client retries later.
var ErrOverBudget = errors.New("team over its inbound budget")

// Usage is what a team's receiving domains received, counted when each
// message was accepted, with the team's own limits.
type Usage struct {
	// Messages is today's count (UTC); Bytes the bytes received in the
	// last 30 days, which retention keeps.
	Messages, Bytes int64
	// MaxMessages and MaxBytes are the team's own limits; zero when it
	// has none (the Budget's apply).
	MaxMessages, MaxBytes int64
}

// UsageReader reads a team's Usage at now.
type UsageReader interface {
	InboundUsage(ctx context.Context, team uuid.UUID, now time.Time) (Usage, error)
}

// Budget is the default inbound budget of a team's receiving domains; a
// zero limit is none. Mail to return paths does not count
// (inbound.Limits.ReturnPath caps it instead).
type Budget struct {
	// DailyMessages caps the messages of one UTC day.
	DailyMessages int64
	// StorageBytes caps the bytes received in the last 30 days.
	StorageBytes int64
	// Usage reads a team's counters; without it the budget is not
	// checked at RCPT (the acceptor still enforces it).
	Usage UsageReader
}

// Limits are the limits that apply to u: the team's own, else b's.
func (b Budget) Limits(u Usage) (messages, bytes int64) {
	messages, bytes = b.DailyMessages, b.StorageBytes
	if u.MaxMessages > 0 {
		messages = u.MaxMessages
	}
	if u.MaxBytes > 0 {
		bytes = u.MaxBytes
	}
	return messages, bytes
}

// Full says whether u leaves no room for another message: at or over a
// limit.
func (b Budget) Full(u Usage) bool {
	m, n := b.Limits(u)
	return (m > 0 && u.Messages >= m) || (n > 0 && u.Bytes >= n)
}

// Over says whether u, which counts a message just taken, is over a
// limit; the acceptor refuses that message.
func (b Budget) Over(u Usage) bool {
	m, n := b.Limits(u)
	return (m > 0 && u.Messages > m) || (n > 0 && u.Bytes > n)
}

// Near says whether u has used at least 80% of a limit (the dashboard
// warns then).
func (b Budget) Near(u Usage) bool {
	m, n := b.Limits(u)
	return (m > 0 && u.Messages*5 >= m*4) || (n > 0 && u.Bytes*5 >= n*4)
}
