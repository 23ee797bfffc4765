// Package received parses an email that a receiving domain received
// (RFC 5322, with MIME: RFC 2045–2049) into the fields Resend's received
// emails show: from, to, cc, reply-to, subject, Message-ID, the text and
// HTML bodies, the header fields and the attachments. Parsing is bounded
// (input size, MIME parts, nesting, header fields), so a hostile message
// costs at most a known amount of work.
package received

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the charsets mail is written in
	"github.com/emersion/go-message/mail"

	"github.com/posthaste/posthaste/internal/mimewalk"
)

// Limits bound a parse; zero fields take their defaults.
type Limits struct {
	// MaxBytes is the largest message parsed (default 50 MiB, above the
	// inbound MX's default size limit); a longer one is an error.
	MaxBytes int
	// MaxParts is the most MIME parts visited (default 200); parts beyond
	// it are left out and the email is marked Truncated.
	MaxParts int
	// MaxDepth is the deepest multipart nesting visited, the top-level
	// entity being depth 0 (default 10).
	MaxDepth int
	// MaxHeaderFields is the most header fields kept (default 500).
	MaxHeaderFields int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 50 << 20
	}
	if l.MaxParts <= 0 {
		l.MaxParts = 200
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 10
	}
	if l.MaxHeaderFields <= 0 {
		l.MaxHeaderFields = 500
	}
	return l
}

// Attachment is a part of the email that is not its text or HTML body.
type Attachment struct {
	Filename           string // "" when the part names none
	ContentType        string // media type without parameters, lower case
	ContentDisposition string // "attachment", "inline" or ""
	ContentID          string // without angle brackets; "" when none
	Content            []byte // decoded (base64, quoted-printable)
}

// Email is a parsed received email.
type Email struct {
	From      string   // as written, e.g. "Ann <ann@example.com>"
	To        []string // as written, one per address
	Cc        []string
	ReplyTo   []string
	Subject   string // decoded (RFC 2047)
	MessageID string // as written, with angle brackets
	// Text and HTML are the first text/plain and text/html parts that are
	// not attachments, decoded to UTF-8; nil when the email has none.
	// Every text field of an Email is valid UTF-8 without NUL: invalid
	// bytes and NULs become U+FFFD.
	Text, HTML *string
	// Headers are the top-level header fields, decoded, the first value
	// of each name (lower-cased names), at most MaxHeaderFields.
	Headers     map[string]string
	Attachments []Attachment
	// Truncated is set when a limit left parts out.
	Truncated bool
}

// ErrTooLarge is returned for a message over Limits.MaxBytes.
var ErrTooLarge = errors.New("message too large to parse")

// Parse parses one message. A malformed part is skipped rather than fail
// the whole email; the error is for input that is not a message at all or
// over the size limit.
func Parse(raw []byte, lim Limits) (Email, error) {
	lim = lim.withDefaults()
	if len(raw) > lim.MaxBytes {
		return Email{}, ErrTooLarge
	}
	ent, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return Email{}, fmt.Errorf("reading message: %w", err)
	}
	h := mail.Header{Header: ent.Header}
	e := Email{Headers: map[string]string{}}
	e.From = addressField(h, "From")
	e.To = addressList(h, "To")
	e.Cc = addressList(h, "Cc")
	e.ReplyTo = addressList(h, "Reply-To")
	if s, err := h.Subject(); err == nil {
		e.Subject = s
	} else {
		e.Subject = h.Get("Subject")
	}
	e.MessageID = strings.TrimSpace(h.Get("Message-Id"))
	fields := h.Fields()
	for n := 0; fields.Next(); n++ {
		if n >= lim.MaxHeaderFields {
			e.Truncated = true
			break
		}
		k := strings.ToLower(fields.Key())
		if _, ok := e.Headers[k]; ok {
			continue
		}
		v, err := fields.Text()
		if err != nil {
			v = fields.Value()
		}
		e.Headers[k] = v
	}
	// A charset conversion writes at most three bytes for each one it
	// reads (U+FFFD for an invalid byte), and decoding base64 or
	// quoted-printable shrinks a body: the bodies of a message under
	// MaxBytes are never cut.
	res := mimewalk.Walk(ent, mimewalk.Limits{MaxParts: lim.MaxParts, MaxDepth: lim.MaxDepth,
		MaxBytes: 3 * int64(lim.MaxBytes)}, e.addPart)
	e.Truncated = e.Truncated || res.Truncated
	e.clean()
	return e, nil
}

// clean makes every text field valid UTF-8 without NUL characters, which
// PostgreSQL's text and jsonb refuse: mail from strangers may have raw
// 8-bit bytes in any charset, or none declared.
func (e *Email) clean() {
	c := func(s string) string {
		return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	cs := func(ss []string) {
		for i := range ss {
			ss[i] = c(ss[i])
		}
	}
	e.From, e.Subject, e.MessageID = c(e.From), c(e.Subject), c(e.MessageID)
	cs(e.To)
	cs(e.Cc)
	cs(e.ReplyTo)
	for _, p := range []**string{&e.Text, &e.HTML} {
		if *p != nil {
			v := c(**p)
			*p = &v
		}
	}
	h := make(map[string]string, len(e.Headers))
	for k, v := range e.Headers {
		h[c(k)] = c(v)
	}
	e.Headers = h
	for i := range e.Attachments {
		a := &e.Attachments[i]
		a.Filename, a.ContentType, a.ContentID = c(a.Filename), c(a.ContentType), c(a.ContentID)
	}
}

// addPart keeps a part that is not a multipart: as the text or HTML body
// when it is the first of its type that is no attachment, else as an
// attachment.
func (e *Email) addPart(p mimewalk.Part) {
	ent := p.Entity
	mt, params, _ := ent.Header.ContentType()
	mt = strings.ToLower(mt)
	if mt == "" {
		mt = "text/plain"
	}
	disp, dparams, _ := ent.Header.ContentDisposition()
	disp = strings.ToLower(disp)
	filename := dparams["filename"]
	if filename == "" {
		filename = params["name"]
	}
	if filename != "" {
		if d, err := new(mime.WordDecoder).DecodeHeader(filename); err == nil {
			filename = d
		}
	}
	body, _, err := p.Read(0)
	if err != nil && len(body) == 0 {
		return
	}
	isBody := disp != "attachment" && filename == ""
	switch {
	case isBody && mt == "text/plain" && e.Text == nil:
		s := string(body)
		e.Text = &s
		return
	case isBody && mt == "text/html" && e.HTML == nil:
		s := string(body)
		e.HTML = &s
		return
	}
	cid := strings.Trim(strings.TrimSpace(ent.Header.Get("Content-Id")), "<>")
	if disp != "attachment" && disp != "inline" {
		disp = ""
	}
	e.Attachments = append(e.Attachments, Attachment{Filename: filename, ContentType: mt,
		ContentDisposition: disp, ContentID: cid, Content: body})
}

// addressField is the field's addresses as written, joined; the raw value
// when it does not parse.
func addressField(h mail.Header, name string) string {
	l := addressList(h, name)
	return strings.Join(l, ", ")
}

func addressList(h mail.Header, name string) []string {
	if !h.Has(name) {
		return []string{}
	}
	as, err := h.AddressList(name)
	if err != nil {
		v, err := h.Text(name)
		if err != nil {
			v = h.Get(name)
		}
		if v = strings.TrimSpace(v); v == "" {
			return []string{}
		}
		return []string{v}
	}
	out := make([]string, 0, len(as))
	for _, a := range as {
		if a.Name == "" {
			out = append(out, a.Address)
		} else {
			out = append(out, a.Name+" <"+a.Address+">")
		}
	}
	return out
}
