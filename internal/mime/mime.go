// Package mime builds the RFC 5322 / MIME (RFC 2045–2049) form of an email
// that Posthaste submits: headers, the text and HTML alternatives, inline
// images and attachments. Messages are written with
// github.com/emersion/go-message and are deterministic: the same Message
// always yields the same bytes, so DKIM signing, size checks and golden tests
// see exactly what is delivered.
//
// Every line of a built message ends in CRLF and is at most 998 octets long
// (RFC 5322 §2.1.1); bodies are 7-bit (quoted-printable text, base64
// attachments) except attached messages, which go in as they are and may be
// 8-bit (RFC 6152 8BITMIME). In the header only UTF-8 addresses, written raw
// as RFC 6532 allows, are 8-bit.
package mime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
)

// Address is a mailbox. Addr is local@domain; the domain is expected in its
// ASCII (punycode) form, the local part may be UTF-8 (RFC 6531). Name is the
// display name, which may be any UTF-8 text and is empty when absent.
type Address struct {
	Name, Addr string
}

// Header is a custom header field added after the standard ones. Build
// refuses one that CheckField refuses (a reserved name, a line break or
// other control character in the value), so callers validate with the same
// function. Non-ASCII values are written as RFC 2047 encoded-words, which
// suits unstructured fields.
type Header struct {
	Name, Value string
}

// Attachment is a file carried by the message, base64-encoded unless it is
// a message (see below).
//
// With ContentID set (and an HTML body) the attachment becomes an inline part
// of a multipart/related entity (RFC 2387) with "Content-Disposition: inline"
// and "Content-ID: <ContentID>", which the HTML references as cid:ContentID
// (RFC 2392). Without an HTML body there is nothing to reference it, so it is
// carried as a regular attachment that keeps its Content-ID.
//
// ContentType defaults to application/octet-stream. A message/rfc822 or
// message/global attachment (an .eml forward) is attached as the message it
// is, as a mail program does: RFC 2046 §5.2.1 forbids base64 for
// message/rfc822, so its content goes in unencoded (7bit or 8bit, line ends
// made CRLF) when it is a readable message whose lines fit the 998-octet
// limit; other message/* types go in unencoded when they are 7-bit text
// (RFC 2046 §5.2.2 and §5.2.3 allow nothing else for some of them). Content
// that cannot be carried that way is attached base64-encoded as
// application/octet-stream (message/global keeps its type: RFC 6532 §3.5
// allows base64), so it still arrives as the file it was. multipart/* is
// refused (see CheckAttachmentType). Filename may be empty or any UTF-8
// text.
type Attachment struct {
	Filename, ContentType, ContentID string
	Content                          []byte
}

// Message is the input of Build.
//
// From and Date are required (RFC 5322 §3.6). Bcc recipients are not part of
// a Message: they exist only in the SMTP envelope. Text and HTML may both be
// empty, which yields an empty text/plain body. GenerateText derives the text
// alternative from HTML with TextFromHTML when Text is empty; an explicit
// Text always wins.
//
// MessageID is the msg-id without angle brackets ("uuid@example.com"); when
// empty, no Message-ID field is written. It also seeds the multipart
// boundaries (see Build).
type Message struct {
	From            Address
	To, Cc, ReplyTo []Address
	Subject         string
	HTML, Text      string
	GenerateText    bool
	Headers         []Header
	Attachments     []Attachment
	MessageID       string
	Date            time.Time
}

// Build returns the message in RFC 5322 form with CRLF line endings.
//
// The MIME structure has only the levels the content needs: text/plain or
// text/html alone; multipart/alternative (text first, RFC 2046 §5.1.4) when
// both exist; multipart/related (RFC 2387) around that when there are inline
// parts; multipart/mixed at the top when there are regular attachments.
//
// Header fields are written in the order From, To, Cc, Reply-To, Subject,
// Date, Message-ID, MIME-Version, the custom headers, then the content fields.
// Display names and the subject are RFC 2047 encoded when not ASCII; UTF-8
// addresses are written raw (RFC 6532 §3.2). Text parts are UTF-8 and
// quoted-printable, attachments base64 (attached messages unencoded, see
// Attachment), non-ASCII filenames RFC 2231 encoded.
//
// Boundaries are derived from a SHA-256 hash of MessageID and the nesting
// level, so Build is deterministic. Uniqueness against the content does not
// depend on the hash: every boundary starts with "=_", which neither
// quoted-printable (it writes "=" as "=3D") nor base64 can produce, following
// RFC 2045 §6.7. An attached message, which goes in unencoded, may hold any
// line: a boundary it spells out is replaced by one derived from a counter
// too. The hash keeps boundaries distinct between messages, which matters
// when one message is later attached to another.
//
// An error always means the Message is invalid; it names the offending field.
func Build(m Message) ([]byte, error) {
	top, err := topFields(m)
	if err != nil {
		return nil, err
	}
	root, err := structure(m)
	if err != nil {
		return nil, err
	}

	var buf bytes.Buffer
	buf.Grow(root.size() + 1024)
	h, err := append(top, root.fields...).header()
	if err != nil {
		return nil, err
	}
	w, err := message.CreateWriter(&buf, h)
	if err != nil {
		return nil, fmt.Errorf("writing header: %w", err)
	}
	if err := root.writeBody(w); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if !bytes.HasSuffix(out, []byte("\r\n")) {
		// A single-part body ends without a line break; RFC 5322 §2.1 lines
		// end in CRLF, and SMTP DATA needs one before its final dot.
		out = append(out, '\r', '\n')
	}
	return out, nil
}

func topFields(m Message) (fieldList, error) {
	if m.From.Addr == "" {
		return nil, fmt.Errorf("missing from address")
	}
	if m.Date.IsZero() {
		return nil, fmt.Errorf("missing date")
	}

	var h mail.Header
	for _, l := range []struct {
		key   string
		addrs []Address
	}{
		{"From", []Address{m.From}},
		{"To", m.To},
		{"Cc", m.Cc},
		{"Reply-To", m.ReplyTo},
	} {
		list := make([]string, len(l.addrs))
		for i, a := range l.addrs {
			if err := checkAddr(a.Addr); err != nil {
				return nil, fmt.Errorf("%s address %q: %w", strings.ToLower(l.key), a.Addr, err)
			}
			list[i] = formatAddress(mail.Address{Name: validUTF8(a.Name), Address: a.Addr})
		}
		if len(list) > 0 {
			h.Set(l.key, strings.Join(list, ", "))
		}
	}
	h.SetSubject(validUTF8(m.Subject))
	// RFC 5322 §3.3 date-time, in the zone of m.Date.
	h.SetDate(m.Date)
	if m.MessageID != "" {
		h.SetMessageID(m.MessageID)
		// RFC 5322 §3.6.4: msg-id is id-left "@" id-right; go-message's own
		// parser decides, so that what is written can be read back.
		if id, err := h.MessageID(); err != nil || id != m.MessageID {
			return nil, fmt.Errorf("invalid message id %q", m.MessageID)
		}
	}

	var fl fieldList
	for _, k := range []string{"From", "To", "Cc", "Reply-To", "Subject", "Date"} {
		if h.Has(k) && h.Get(k) != "" {
			fl = append(fl, field{k, h.Get(k)})
		}
	}
	if m.MessageID != "" {
		fl = append(fl, field{"Message-ID", h.Get("Message-Id")})
	}
	fl = append(fl, field{"MIME-Version", "1.0"})

	for _, c := range m.Headers {
		if err := CheckField(c.Name, c.Value); err != nil {
			return nil, err
		}
		var ch message.Header
		ch.SetText(c.Name, c.Value)
		fl = append(fl, field{c.Name, ch.Get(c.Name)})
	}
	return fl, nil
}

// checkAddr accepts local@domain where the local part has no control
// characters (net/mail quotes it when it is not a dot-atom) and the domain is
// a dot-atom or an address literal (RFC 5322 §3.4.1), ASCII or UTF-8
// (RFC 6532 §3.2).
func checkAddr(addr string) error {
	if !utf8.ValidString(addr) {
		return fmt.Errorf("not UTF-8")
	}
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 {
		return fmt.Errorf("not local@domain")
	}
	local, domain := addr[:at], addr[at+1:]
	for _, r := range local {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("control character in local part")
		}
	}
	if strings.HasPrefix(domain, "[") && strings.HasSuffix(domain, "]") {
		domain = domain[1 : len(domain)-1]
	}
	for _, r := range domain {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`()<>[]:;@\,"`, r) {
			return fmt.Errorf("invalid character %q in domain", r)
		}
	}
	return nil
}

// structure returns the entity tree of the body.
func structure(m Message) (*node, error) {
	text := m.Text
	if text == "" && m.GenerateText && m.HTML != "" {
		text = TextFromHTML(m.HTML)
	}

	var inline, attached []*node
	for i, a := range m.Attachments {
		n, err := attachmentPart(a, m.HTML != "")
		if err != nil {
			return nil, fmt.Errorf("attachment %d: %w", i, err)
		}
		if a.ContentID != "" && m.HTML != "" {
			inline = append(inline, n)
		} else {
			attached = append(attached, n)
		}
	}

	var body *node
	switch {
	case text != "" && m.HTML != "":
		body = multipart("alternative", m.MessageID, nil, textPart("plain", text), textPart("html", m.HTML))
	case m.HTML != "":
		body = textPart("html", m.HTML)
	default:
		body = textPart("plain", text)
	}
	if len(inline) > 0 {
		// RFC 2387 §3.1: the type parameter names the root part's type.
		rootType := "text/html"
		if len(body.parts) > 0 {
			rootType = "multipart/alternative"
		}
		body = multipart("related", m.MessageID, []param{{"type", rootType}}, append([]*node{body}, inline...)...)
	}
	if len(attached) > 0 {
		body = multipart("mixed", m.MessageID, nil, append([]*node{body}, attached...)...)
	}
	return body, nil
}

func textPart(subtype, s string) *node {
	return &node{
		fields: fieldList{
			{"Content-Type", formatMediaType("text/"+subtype, []param{{"charset", "utf-8"}})},
			// RFC 2045 §6.7: quoted-printable keeps lines within 76
			// characters and turns every line break into CRLF.
			{"Content-Transfer-Encoding", "quoted-printable"},
		},
		body: []byte(validUTF8(s)),
	}
}

func multipart(subtype, seed string, params []param, parts ...*node) *node {
	n := &node{parts: parts}
	b := boundary(subtype, seed)
	// Unencoded parts (attached messages) may hold any line, even one that
	// spells out the delimiter: derive another boundary until none does
	// (RFC 2046 §5.1.1: the boundary must not appear in the parts).
	for i := 1; n.spells("--" + b); i++ {
		b = boundary(subtype, fmt.Sprintf("%s\x00%d", seed, i))
	}
	n.fields = fieldList{{
		"Content-Type",
		formatMediaType("multipart/"+subtype, append(params, param{"boundary", b})),
	}}
	return n
}

// boundary returns the boundary of the multipart/subtype entity. Subtypes
// differ at every nesting level, so no boundary is a prefix of another
// (RFC 2046 §5.1.1).
func boundary(subtype, seed string) string {
	sum := sha256.Sum256([]byte("posthaste multipart " + subtype + "\x00" + seed))
	return "=_" + hex.EncodeToString(sum[:15])
}

// node is a MIME entity: a leaf with a body or a multipart with parts.
type node struct {
	fields fieldList
	body   []byte
	parts  []*node
	// raw is set on a leaf whose body is written unencoded (7bit or 8bit),
	// so that any text can appear in it.
	raw bool
}

// spells reports whether s occurs in an unencoded body within n.
// Quoted-printable and base64 bodies cannot hold a delimiter: every
// boundary starts with "=_".
func (n *node) spells(s string) bool {
	if n.raw && bytes.Contains(n.body, []byte(s)) {
		return true
	}
	for _, p := range n.parts {
		if p.spells(s) {
			return true
		}
	}
	return false
}

// size estimates the encoded size of the entity, to size the output buffer.
func (n *node) size() int {
	s := 256 + len(n.body)*4/3 + len(n.body)/38
	for _, p := range n.parts {
		s += p.size()
	}
	return s
}

// writeBody writes the body of n to w, whose header has been written.
func (n *node) writeBody(w *message.Writer) error {
	if n.parts == nil {
		if _, err := w.Write(n.body); err != nil {
			return fmt.Errorf("writing body: %w", err)
		}
		return w.Close()
	}
	for _, p := range n.parts {
		h, err := p.fields.header()
		if err != nil {
			return err
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			return fmt.Errorf("creating part: %w", err)
		}
		if err := p.writeBody(pw); err != nil {
			return err
		}
	}
	return w.Close()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// validUTF8 replaces invalid UTF-8, since every text part declares
// charset=utf-8 and encoded-words name utf-8 too.
func validUTF8(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}
