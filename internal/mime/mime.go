// Package mime builds the RFC 5322 / MIME (RFC 2045–2049) form of an email
// that Posthaste submits: headers, the text and HTML alternatives, inline
// images and attachments. Messages are written with
// github.com/emersion/go-message and are deterministic: the same Message
// always yields the same bytes, so DKIM signing, size checks and golden tests
// see exactly what is delivered.
//
// Every line of a built message ends in CRLF and is at most 998 octets long
// (RFC 5322 §2.1.1); bodies are 7-bit (quoted-printable text, base64
// attachments), so only UTF-8 addresses, written raw as RFC 6532 allows, can
// make a message 8-bit. NeedsSMTPUTF8 reports when that is the case.
package mime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	stdmime "mime"
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

// Header is a custom header field added after the standard ones. The caller
// validates it (no CR or LF, not a field Build writes itself); Build still
// refuses fields it would otherwise duplicate. Non-ASCII values are written
// as RFC 2047 encoded-words, which suits unstructured fields.
type Header struct {
	Name, Value string
}

// Attachment is a file carried by the message, always base64-encoded.
//
// With ContentID set (and an HTML body) the attachment becomes an inline part
// of a multipart/related entity (RFC 2387) with "Content-Disposition: inline"
// and "Content-ID: <ContentID>", which the HTML references as cid:ContentID
// (RFC 2392). Without an HTML body there is nothing to reference it, so it is
// carried as a regular attachment that keeps its Content-ID.
//
// ContentType defaults to application/octet-stream; composite types
// (multipart/*, message/*) are refused because RFC 2046 §5.1 and §5.2.1 do not
// allow them to be base64-encoded. Filename may be empty or any UTF-8 text.
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
// quoted-printable, attachments base64, non-ASCII filenames RFC 2231 encoded.
//
// Boundaries are derived from a SHA-256 hash of MessageID and the nesting
// level, so Build is deterministic. Uniqueness against the content does not
// depend on the hash: every boundary starts with "=_", which neither
// quoted-printable (it writes "=" as "=3D") nor base64 can produce, following
// RFC 2045 §6.7. The hash keeps boundaries distinct between messages,
// which matters when one message is later attached to another.
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

// NeedsSMTPUTF8 reports whether the local part or domain of an address in the
// header (From, To, Cc, Reply-To) is not ASCII, so that the message may only
// be relayed with the SMTPUTF8 extension (RFC 6531 §3.4, RFC 6532 §3.2).
// Display names, the subject, custom headers and filenames never require it:
// Build encodes them in ASCII.
func NeedsSMTPUTF8(m Message) bool {
	if !isASCII(m.From.Addr) {
		return true
	}
	for _, l := range [][]Address{m.To, m.Cc, m.ReplyTo} {
		for _, a := range l {
			if !isASCII(a.Addr) {
				return true
			}
		}
	}
	return false
}

// reserved reports whether a custom header field would duplicate one Build
// writes itself (RFC 5322 §3.6 allows most of them once) or is Bcc, which
// must never reach the header. Content-* fields are reserved as a group.
func reserved(name string) bool {
	switch k := strings.ToLower(name); k {
	case "from", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id", "mime-version":
		return true
	default:
		return strings.HasPrefix(k, "content-")
	}
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
		list := make([]*mail.Address, len(l.addrs))
		for i, a := range l.addrs {
			if err := checkAddr(a.Addr); err != nil {
				return nil, fmt.Errorf("%s address %q: %w", strings.ToLower(l.key), a.Addr, err)
			}
			list[i] = &mail.Address{Name: validUTF8(a.Name), Address: a.Addr}
		}
		h.SetAddressList(l.key, list)
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
		if c.Name == "" {
			return nil, fmt.Errorf("empty header name")
		}
		if reserved(c.Name) {
			return nil, fmt.Errorf("header %q is reserved", c.Name)
		}
		if strings.ContainsAny(c.Value, "\r\n") {
			return nil, fmt.Errorf("header %s: value contains CR or LF", c.Name)
		}
		var ch message.Header
		ch.SetText(c.Name, validUTF8(c.Value))
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

	var body *node
	switch {
	case text != "" && m.HTML != "":
		body = multipart("alternative", m.MessageID, nil, textPart("plain", text), textPart("html", m.HTML))
	case m.HTML != "":
		body = textPart("html", m.HTML)
	default:
		body = textPart("plain", text)
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

func attachmentPart(a Attachment, html bool) (*node, error) {
	ct := a.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	mediaType, ctParams, err := stdmime.ParseMediaType(ct)
	if err != nil {
		return nil, fmt.Errorf("invalid content type %q: %w", a.ContentType, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") || strings.HasPrefix(mediaType, "message/") {
		return nil, fmt.Errorf("content type %q cannot be base64-encoded", mediaType)
	}
	delete(ctParams, "name")
	params := sortedParams(ctParams)
	var dispParams []param
	if a.Filename != "" {
		name := validUTF8(a.Filename)
		// The name parameter of Content-Type is obsolete but still read by
		// some clients; filename (RFC 2183 §2.3) is the standard one.
		params = append(params, param{"name", name})
		dispParams = []param{{"filename", name}}
	}

	disposition := "attachment"
	if a.ContentID != "" && html {
		disposition = "inline"
	}
	n := &node{
		fields: fieldList{
			{"Content-Type", formatMediaType(mediaType, params)},
			{"Content-Transfer-Encoding", "base64"},
			{"Content-Disposition", formatMediaType(disposition, dispParams)},
		},
		body: a.Content,
	}
	if a.ContentID != "" {
		id := strings.TrimSuffix(strings.TrimPrefix(a.ContentID, "<"), ">")
		for _, r := range id {
			if r <= ' ' || r >= 0x7f || r == '<' || r == '>' {
				return nil, fmt.Errorf("invalid content id %q", a.ContentID)
			}
		}
		if id == "" {
			return nil, fmt.Errorf("invalid content id %q", a.ContentID)
		}
		// RFC 2045 §7 and RFC 2392 §2: Content-ID is a msg-id in brackets.
		n.fields = append(n.fields, field{"Content-ID", "<" + id + ">"})
	}
	return n, nil
}

func multipart(subtype, seed string, params []param, parts ...*node) *node {
	return &node{
		fields: fieldList{{
			"Content-Type",
			formatMediaType("multipart/"+subtype, append(params, param{"boundary", boundary(subtype, seed)})),
		}},
		parts: parts,
	}
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
