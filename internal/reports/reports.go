// Package reports reads the machine-generated mail that comes back to a
// sender's return path and says what it is: a delivery status notification
// (RFC 3464 DSN, multipart/report; report-type=delivery-status, RFC 6522),
// a non-standard bounce (plain text from MAILER-DAEMON with the original
// quoted or attached, as Exim, qmail and older providers send), a feedback
// report (RFC 5965 ARF, multipart/report; report-type=feedback-report, and
// Microsoft's JMRP), an auto-reply (RFC 3834) or none of these.
//
// Parse is pure: it holds no state, reads at most Limits.MaxBytes of its
// input and never panics on malformed mail. Bounce turns a failed DSN
// recipient into Resend's bounce object with the same classification as
// synchronous SMTP failures (mta.ClassifyBounce). ParseVERP and
// RecipientReturnPath read and write the VERP return path
// bounces+<code>@<host> that matches a report to the email and the
// recipient it is about (SignedReturnPath: the per-email form of emails
// sent before, bounces+<email id>[-<signature>]@<host>).
package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the charsets reports are written in
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"

	"github.com/posthaste/posthaste/internal/mimewalk"
)

// Kind is what a message is.
type Kind string

// The kinds of message Parse tells apart.
const (
	// KindUnknown is mail that is none of the others (a person's reply,
	// spam): it says nothing about delivery.
	KindUnknown Kind = "unknown"
	// KindDSN is an RFC 3464 delivery status notification; Report.DSN
	// holds its recipients.
	KindDSN Kind = "dsn"
	// KindBounce is a non-standard bounce: plain text from a mailer
	// daemon, read by heuristics; Report.DSN holds what could be
	// extracted (possibly no recipient at all).
	KindBounce Kind = "bounce"
	// KindFeedback is a complaint or other feedback report (RFC 5965 ARF,
	// Microsoft JMRP); Report.Feedback holds it.
	KindFeedback Kind = "feedback"
	// KindAutoReply is an automatic response (RFC 3834: vacation
	// responders, out-of-office notices): never a bounce.
	KindAutoReply Kind = "auto_reply"
)

// Limits bound the work and memory of one Parse (memory is about
// MaxBytes plus a few hundred KiB). Zero or negative fields take their
// defaults.
type Limits struct {
	// MaxBytes is the most of the input that is read (default 10 MiB). A
	// longer message is read up to MaxBytes only and the report is marked
	// Truncated: the parts that matter (the human text and the
	// machine-readable report) come first in every format, the returned
	// original last.
	MaxBytes int64
	// MaxParts is the most MIME parts visited (default 64).
	MaxParts int
	// MaxDepth is the deepest multipart nesting visited, the top-level
	// entity being depth 0 (default 5).
	MaxDepth int
	// MaxRecipients is the most recipients a DSN or bounce yields
	// (default 100).
	MaxRecipients int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 10 << 20
	}
	if l.MaxParts <= 0 {
		l.MaxParts = 64
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 5
	}
	if l.MaxRecipients <= 0 {
		l.MaxRecipients = 100
	}
	return l
}

// Report is what Parse found in one message.
type Report struct {
	Kind Kind

	// The report's own header: From and To as bare addresses (To of a
	// bounce is the return path it was sent to: the VERP address),
	// Subject decoded, MessageID without angle brackets.
	From      string
	FromName  string
	To        []string
	Subject   string
	MessageID string

	// DSN is set for KindDSN and KindBounce.
	DSN *DSN
	// Feedback is set for KindFeedback.
	Feedback *Feedback
	// AutoReply says why the message is an automatic response (the field
	// or subject that gave it away); set for KindAutoReply.
	AutoReply string

	// Original is what the report carried of the message it is about.
	Original Original

	// Parts is the number of MIME parts visited (at most MaxParts).
	Parts int
	// Truncated is true when a limit cut the parse short: input over
	// MaxBytes, parts over MaxParts or deeper than MaxDepth, recipients
	// over MaxRecipients.
	Truncated bool
}

// Original is what a report carried of the message it is about: the
// header of a message/rfc822 or text/rfc822-headers part (RFC 6522 §4), or
// of the copy a plain-text bounce quotes.
type Original struct {
	// Header is the original's header fields in order (at most a few
	// hundred), raw.
	Header []Field
	// MessageID is the original's Message-ID without angle brackets; for
	// a DSN whose original is absent, Gmail's X-Original-Message-ID.
	MessageID string
	// ReturnPath is the original's Return-Path (its envelope sender, the
	// VERP address), bare; "" when the original is absent or had none.
	ReturnPath string
}

// Get returns the value of the original's first header field named name,
// "" when there is none.
func (o Original) Get(name string) string { return fieldGroup(o.Header).get(name) }

// ReturnPaths are the addresses a report names as the envelope sender of
// the message it is about, most trusted first: the report's To (where a
// bounce is sent: the return path itself), the original's Return-Path,
// Postfix's X-Postfix-Sender, ARF's Original-Mail-From. The envelope
// recipient of the SMTP transaction that delivered the report, which the
// inbound server knows and Parse does not, comes before all of these.
func (r *Report) ReturnPaths() []string {
	var out []string
	add := func(a string) {
		if a == "" {
			return
		}
		for _, o := range out {
			if strings.EqualFold(o, a) {
				return
			}
		}
		out = append(out, a)
	}
	for _, a := range r.To {
		add(a)
	}
	add(r.Original.ReturnPath)
	if r.DSN != nil {
		add(r.DSN.Sender)
	}
	if r.Feedback != nil {
		add(r.Feedback.OriginalMailFrom)
	}
	return out
}

// VERP returns the first of r's ReturnPaths that is a VERP address.
// Its signature is not verified: call VERP.Verify.
func (r *Report) VERP() (VERP, bool) {
	for _, a := range r.ReturnPaths() {
		if v, ok := ParseVERP(a); ok {
			return v, true
		}
	}
	return VERP{}, false
}

// ErrNotMessage is returned by Parse for input that has no RFC 5322
// header at all.
var ErrNotMessage = errors.New("not a message")

// Parse reads one RFC 5322 message from r and says what it is. It reads at
// most lim.MaxBytes of r (zero fields of lim take their defaults). The
// error is nil for any message, however malformed or unrecognised (that is
// KindUnknown); it is ErrNotMessage for input with no header, or the
// error of r.
func Parse(r io.Reader, lim Limits) (Report, error) {
	lim = lim.withDefaults()
	raw, err := io.ReadAll(io.LimitReader(r, lim.MaxBytes+1))
	if err != nil {
		return Report{}, fmt.Errorf("reading report: %w", err)
	}
	rep := Report{Kind: KindUnknown}
	if int64(len(raw)) > lim.MaxBytes {
		raw = raw[:lim.MaxBytes]
		rep.Truncated = true
	}
	e, hdr, ok := readEntity(raw)
	if !ok {
		return rep, ErrNotMessage
	}
	p := &parser{lim: lim, rep: &rep, top: hdr}
	p.header(e)
	// Each read of a part is bounded (by MaxBytes for the machine-readable
	// reports, maxTextBytes for the text, the HTML and the original's
	// header); the walk's budget bounds them together, at what the reads
	// of a well-formed report take.
	res := mimewalk.Walk(e, mimewalk.Limits{MaxParts: lim.MaxParts, MaxDepth: lim.MaxDepth,
		MaxBytes: lim.MaxBytes + 3*maxTextBytes}, p.part)
	rep.Parts = res.Parts
	rep.Truncated = rep.Truncated || res.Truncated
	p.classify()
	return rep, nil
}

// readEntity splits raw into its header and body and returns the entity.
// The header is read leniently (a malformed line is skipped, not fatal,
// unlike go-message's reader) so that badly written bounces still parse.
func readEntity(raw []byte) (*message.Entity, fieldGroup, bool) {
	head, body := splitHeader(raw)
	groups := parseFieldGroups(head, 1, maxHeaderFields)
	if len(groups) == 0 {
		return nil, nil, false
	}
	hdr := groups[0]
	var h textproto.Header
	// Add puts a field before the ones already there: add in reverse so
	// that Get returns the first field, as in the message.
	for i := len(hdr) - 1; i >= 0; i-- {
		h.Add(hdr[i].Name, hdr[i].Value)
	}
	// New always returns an entity; its error only says that the charset
	// or transfer encoding is unknown, and the body is then read as it is.
	e, _ := message.New(message.Header{Header: h}, bytes.NewReader(body))
	return e, hdr, true
}

// maxHeaderFields bounds the fields kept of one header block.
const maxHeaderFields = 500

// splitHeader splits a message at its first empty line.
func splitHeader(raw []byte) (head, body []byte) {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			return raw, nil
		}
		line := raw[i : i+j]
		if len(bytes.TrimRight(line, "\r")) == 0 {
			return raw[:i], raw[i+j+1:]
		}
		i += j + 1
	}
	return raw, nil
}

// parser collects the parts of one message that matter.
type parser struct {
	lim Limits
	rep *Report
	top fieldGroup // the report's own header

	dsn     []byte // first message/delivery-status body
	arf     []byte // first message/feedback-report body
	text    []byte // first text/plain body that is no attachment
	html    []byte // first text/html body, when there is no text
	hasOrig bool   // Report.Original was read from a part
}

// maxTextBytes bounds the human-readable text read for heuristics.
const maxTextBytes = 256 << 10

func (p *parser) header(e *message.Entity) {
	h := mailHeader(e)
	if list, err := h.AddressList("From"); err == nil && len(list) > 0 {
		p.rep.From, p.rep.FromName = list[0].Address, list[0].Name
	} else {
		p.rep.From = cleanAddress(p.top.get("From"))
	}
	if list, err := h.AddressList("To"); err == nil {
		for _, a := range list {
			p.rep.To = append(p.rep.To, a.Address)
		}
	} else {
		p.rep.To = addressList(p.top.get("To"))
	}
	if s, err := h.Subject(); err == nil {
		p.rep.Subject = s
	} else {
		p.rep.Subject = p.top.get("Subject")
	}
	p.rep.MessageID = cleanMessageID(p.top.get("Message-Id"))
}

// part collects a part that is not a multipart. The part's type decides,
// not the report-type of the multipart/report (RFC 6522 §3): some senders
// get it wrong.
func (p *parser) part(e mimewalk.Part) {
	mt, _, _ := e.Header.ContentType()
	disp, _, _ := e.Header.ContentDisposition()
	switch mt {
	case "message/delivery-status", "message/global-delivery-status": // RFC 3464, RFC 6533
		if p.dsn == nil {
			p.dsn = p.read(e, p.lim.MaxBytes, true)
		}
	case "message/feedback-report": // RFC 5965 §3.1
		if p.arf == nil {
			p.arf = p.read(e, p.lim.MaxBytes, true)
		}
	case "text/rfc822-headers", "message/global-headers", "message/rfc822-headers": // RFC 6522 §4, RFC 6533
		if !p.hasOrig {
			p.setOriginal(p.read(e, maxTextBytes, false), false)
		}
	case "message/rfc822", "message/global", "message/partial":
		if !p.hasOrig {
			// Only the header is wanted: the rest of a long original
			// is no loss.
			p.setOriginal(p.read(e, maxTextBytes, false), true)
		}
	case "text/plain", "":
		if p.text == nil && disp != "attachment" {
			p.text = p.read(e, maxTextBytes, true)
			if p.text == nil {
				p.text = []byte{}
			}
		}
	case "text/html":
		if p.html == nil && disp != "attachment" {
			p.html = p.read(e, maxTextBytes, true)
		}
	}
}

// read reads at most n bytes of a part's body, marking the report
// truncated when there was more and mark is set; a read error keeps what
// was read (a message cut at MaxBytes ends mid-part).
func (p *parser) read(e mimewalk.Part, n int64, mark bool) []byte {
	b, more, _ := e.Read(n)
	p.rep.Truncated = p.rep.Truncated || (more && mark)
	return b
}

// setOriginal records the header of the original message: b is the
// whole message when whole is true (its header ends at the first empty
// line), else a headers part.
func (p *parser) setOriginal(b []byte, whole bool) {
	head := b
	if whole {
		head, _ = splitHeader(b)
	}
	groups := parseFieldGroups(head, 1, maxHeaderFields)
	if len(groups) == 0 {
		return
	}
	p.hasOrig = true
	p.rep.Original = originalOf(groups[0])
}

func originalOf(g fieldGroup) Original {
	return Original{
		Header:     []Field(g),
		MessageID:  cleanMessageID(g.get("Message-Id")),
		ReturnPath: cleanAddress(g.get("Return-Path")),
	}
}

// classify decides the kind from what the walk collected.
func (p *parser) classify() {
	switch {
	case p.dsn != nil:
		p.rep.Kind = KindDSN
		p.rep.DSN = parseDSN(p.dsn, p.lim.MaxRecipients, &p.rep.Truncated)
		if p.rep.Original.MessageID == "" {
			p.rep.Original.MessageID = p.rep.DSN.OriginalMessageID
		}
		return
	case p.arf != nil:
		p.rep.Kind = KindFeedback
		p.rep.Feedback = parseARF(p.arf)
		p.rep.Feedback.addJMRPRecipient(p.top, p.rep.Original)
		return
	}
	if f, ok := jmrp(p.top, p.rep.Original); ok {
		p.rep.Kind = KindFeedback
		p.rep.Feedback = f
		if !p.hasOrig {
			// The "Original" format forwards the complained-of message as
			// it is: its own header is the original's.
			p.rep.Original = originalOf(p.top)
		}
		return
	}
	text := p.text
	if text == nil && p.html != nil {
		text = []byte(htmlToText(string(p.html)))
	}
	if p.isBounce(text) {
		p.rep.Kind = KindBounce
		d, orig := parsePlainBounce(string(text), p.rep, p.lim.MaxRecipients)
		p.rep.DSN = d
		if !p.hasOrig && orig != nil {
			p.rep.Original = originalOf(orig)
		}
		return
	}
	if why, ok := autoReply(p.top, p.rep.Subject); ok {
		p.rep.Kind = KindAutoReply
		p.rep.AutoReply = why
		return
	}
}

// mailHeader gives the address and subject helpers of go-message/mail.
func mailHeader(e *message.Entity) *mail.Header { return &mail.Header{Header: e.Header} }
