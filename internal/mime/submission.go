package mime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	// Registers the common charsets, so that bodies in ISO-8859-1,
	// Windows-1252, Shift_JIS... are decoded for display.
	_ "github.com/emersion/go-message/charset"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
)

// ErrMalformed is wrapped by ParseSubmission's errors: the bytes are not an
// RFC 5322 message Posthaste can send.
var ErrMalformed = errors.New("not a valid RFC 5322 message")

// Header fields a submission client sets to instruct Posthaste. They are
// read by ParseSubmission and never delivered.
const (
	FieldIdempotencyKey       = "Idempotency-Key"
	FieldResendIdempotencyKey = "Resend-Idempotency-Key"
	FieldTags                 = "X-Posthaste-Tags"
)

// maxPartScan bounds how much of a message ParseSubmission decodes to find
// its text and HTML bodies (what the Emails page shows); the message itself
// is kept whole.
const maxPartScan = 8 << 20

// MaxNesting bounds how deep the multipart bodies of a submitted message
// may nest. Each level costs a reader, and reading a part costs a copy per
// level above it, to whoever walks the structure (ParseSubmission, the
// dashboard, the recipients' servers): without a bound, a few hundred
// kilobytes nested thousands deep take seconds and hundreds of megabytes
// to read. Real messages nest fewer than ten deep; Postfix's
// mime_nesting_limit is 100.
const MaxNesting = 50

// ErrTooDeep is wrapped by ParseSubmission's error for a message whose
// multipart bodies nest more than MaxNesting deep.
var ErrTooDeep = fmt.Errorf("multipart bodies nest more than %d deep", MaxNesting)

// Submission is a message received as bytes (over SMTP), parsed only as far
// as Posthaste needs: the addresses and subject it shows and checks, the
// instruction fields, and the text and HTML bodies for display. The message
// is delivered as submitted except for the changes Bytes makes.
type Submission struct {
	From    []Address
	Sender  *Address // the Sender field, if any
	To, Cc  []Address
	Bcc     []Address // read from the Bcc field, which Bytes removes
	ReplyTo []Address
	Subject string // decoded (RFC 2047)
	// ResentFrom and ResentSender are the addresses of every Resent-From
	// and Resent-Sender field (RFC 5322 §3.6.6: a message resent several
	// times has a block of them per resending).
	ResentFrom, ResentSender []Address
	// MessageID is the Message-ID without angle brackets; "" when the
	// message has none (Bytes then adds one).
	MessageID string
	// IdempotencyKey is the value of Idempotency-Key (or
	// Resend-Idempotency-Key); nil when neither field is present.
	IdempotencyKey *string
	// Tags is the raw value of X-Posthaste-Tags ("" when absent).
	Tags string
	// Text and HTML are the first text/plain and text/html parts that are
	// not attachments, decoded; nil when absent or not decodable.
	Text, HTML *string

	header  textproto.Header // without the fields Bytes removes
	hasDate bool
	body    []byte
}

// ParseSubmission reads a submitted message. Line endings are normalized to
// CRLF. The header must be readable and hold exactly one From field with at
// least one mailbox; an address field that cannot be parsed is an error too,
// and so is a field holding an ASCII control character other than tab, by
// the rule Build applies to custom fields (see CheckFieldValue); octets
// above 127 are left alone, since they need not be UTF-8 here.
// The body is not required to be valid MIME: a message whose MIME structure
// cannot be read is still accepted (and delivered as is), only without
// Text and HTML. But as far as it can be read, its multipart bodies must
// not nest more than MaxNesting deep. Errors wrap ErrMalformed, or
// ErrTooDeep.
func ParseSubmission(raw []byte) (*Submission, error) {
	raw = normalizeCRLF(raw)
	br := bufio.NewReader(bytes.NewReader(raw))
	h, err := textproto.ReadHeader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: the header cannot be read", ErrMalformed)
	}
	body, _ := io.ReadAll(br) // reading from memory cannot fail
	if h.Len() == 0 {
		return nil, fmt.Errorf("%w: the message has no header", ErrMalformed)
	}
	for f := h.Fields(); f.Next(); {
		v := f.Value()
		for i := 0; i < len(v); i++ {
			if v[i] < utf8.RuneSelf && isControl(rune(v[i])) {
				return nil, fmt.Errorf("%w: the %s field contains the control character %U", ErrMalformed, f.Key(), v[i])
			}
		}
	}
	s := &Submission{header: h, body: body, hasDate: h.Has("Date")}
	mh := mail.Header{Header: message.Header{Header: h}}
	if n := len(h.Values("From")); n != 1 {
		return nil, fmt.Errorf("%w: the message must have one From field, it has %d", ErrMalformed, n)
	}
	for _, f := range []struct {
		name string
		dst  *[]Address
	}{{"From", &s.From}, {"To", &s.To}, {"Cc", &s.Cc}, {"Bcc", &s.Bcc}, {"Reply-To", &s.ReplyTo}} {
		list, err := mh.AddressList(f.name)
		if err != nil {
			return nil, fmt.Errorf("%w: the %s field cannot be parsed", ErrMalformed, f.name)
		}
		for _, a := range list {
			*f.dst = append(*f.dst, Address{Name: a.Name, Addr: a.Address})
		}
	}
	if len(s.From) == 0 {
		return nil, fmt.Errorf("%w: the From field holds no address", ErrMalformed)
	}
	if h.Has("Sender") {
		list, err := mh.AddressList("Sender")
		if err != nil || len(list) != 1 {
			return nil, fmt.Errorf("%w: the Sender field must hold one address", ErrMalformed)
		}
		s.Sender = &Address{Name: list[0].Name, Addr: list[0].Address}
	}
	for _, f := range []struct {
		name string
		dst  *[]Address
	}{{"Resent-From", &s.ResentFrom}, {"Resent-Sender", &s.ResentSender}} {
		for _, v := range h.Values(f.name) {
			list, err := mail.ParseAddressList(v)
			if err != nil || len(list) == 0 {
				return nil, fmt.Errorf("%w: the %s field cannot be parsed", ErrMalformed, f.name)
			}
			for _, a := range list {
				*f.dst = append(*f.dst, Address{Name: a.Name, Addr: a.Address})
			}
		}
	}
	if s.Subject, err = mh.Subject(); err != nil {
		s.Subject = h.Get("Subject") // undecodable words stay as written
	}
	if id, err := mh.MessageID(); err == nil {
		s.MessageID = id
	}
	for _, name := range []string{FieldIdempotencyKey, FieldResendIdempotencyKey} {
		if h.Has(name) {
			key := strings.TrimSpace(h.Get(name))
			s.IdempotencyKey = &key
			break
		}
	}
	s.Tags = strings.TrimSpace(h.Get(FieldTags))
	for _, name := range []string{"Bcc", FieldIdempotencyKey, FieldResendIdempotencyKey, FieldTags} {
		s.header.Del(name)
	}
	if s.MessageID == "" {
		s.header.Del("Message-Id") // present but unreadable: replaced by Bytes
	}
	if s.Text, s.HTML, err = walk(raw); err != nil {
		return nil, err
	}
	return s, nil
}

// Bytes returns the message to deliver: the submitted one without Bcc and
// the instruction fields, with a Message-ID (<messageID>, when the message
// had none) and a Date (date, when it had none) added on top.
func (s *Submission) Bytes(messageID string, date time.Time) []byte {
	h := s.header.Copy()
	// AddRaw writes the new field above the others, spelled as given.
	if !s.hasDate {
		h.AddRaw([]byte("Date: " + date.Format(time.RFC1123Z) + "\r\n"))
	}
	if s.MessageID == "" {
		h.AddRaw([]byte("Message-ID: <" + messageID + ">\r\n"))
	}
	var b bytes.Buffer
	b.Grow(len(s.body) + 1024)
	_ = textproto.WriteHeader(&b, h) // writing to memory cannot fail
	b.Write(s.body)
	return b.Bytes()
}

// walk reads the MIME structure of raw as far as it can be read: an error
// wrapping ErrTooDeep when it nests more than MaxNesting deep, else the
// first inline text/plain and text/html parts (of messages up to
// maxPartScan).
func walk(raw []byte) (text, html *string, err error) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, nil, nil
	}
	collect := len(raw) <= maxPartScan
	err = e.Walk(func(path []int, part *message.Entity, err error) error {
		// Walk makes a reader for a multipart part after this returns:
		// refusing here keeps at most MaxNesting of them.
		if len(path) > MaxNesting {
			return ErrTooDeep
		}
		if err != nil && !message.IsUnknownCharset(err) {
			return err
		}
		if !collect {
			return nil
		}
		if disp, _, _ := part.Header.ContentDisposition(); disp == "attachment" {
			return nil
		}
		t, _, _ := part.Header.ContentType()
		if t == "" {
			t = "text/plain"
		}
		var dst **string
		switch {
		case t == "text/plain" && text == nil:
			dst = &text
		case t == "text/html" && html == nil:
			dst = &html
		default:
			return nil
		}
		b, err := io.ReadAll(io.LimitReader(part.Body, maxPartScan))
		if err != nil {
			return nil // a body that does not decode is not shown
		}
		str := strings.ToValidUTF8(string(b), "\uFFFD")
		*dst = &str
		return nil
	})
	if errors.Is(err, ErrTooDeep) {
		return nil, nil, err
	}
	// Any other error: the structure cannot be read past it, and the
	// message is delivered as it is.
	if !collect {
		return nil, nil, nil
	}
	return text, html, nil
}

// normalizeCRLF turns bare LF and bare CR line ends into CRLF.
func normalizeCRLF(b []byte) []byte {
	if !bytes.ContainsAny(b, "\r\n") || (bytes.Count(b, []byte("\r\n")) == bytes.Count(b, []byte("\n")) &&
		bytes.Count(b, []byte("\r")) == bytes.Count(b, []byte("\n"))) {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/32)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '\r':
			out = append(out, '\r', '\n')
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
		case '\n':
			out = append(out, '\r', '\n')
		default:
			out = append(out, c)
		}
	}
	return out
}
