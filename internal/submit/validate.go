package submit

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	stdmime "mime"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/mime"
	"github.com/posthaste/posthaste/internal/store"
)

// Limits of a send request (API.md, "Emails").
const (
	// MaxMessageSize bounds the built message: MIME structure, bodies and
	// base64-encoded attachments.
	MaxMessageSize = 40 << 20
	// MaxAttachments bounds the attachments of one email, given by content
	// or by path.
	MaxAttachments = 100
	// MaxFetchTime bounds fetching all the `path` attachments of one
	// request; each fetch has its own, shorter timeout too.
	MaxFetchTime = 30 * time.Second

	maxRecipients    = 50 // to, cc and bcc together
	maxReplyTo       = 50
	maxTags          = 75
	maxTagLength     = 256
	maxHeadersSize   = 8 << 10
	maxContentIDLen  = 250
	maxScheduleAhead = 30 * 24 * time.Hour
	scheduleSkew     = time.Minute
)

const addressFormat = "The email address needs to follow the `email@example.com` or `Name <email@example.com>` format."

// Header is one custom message header.
type Header struct{ Name, Value string }

// Attachment is a checked attachment with its content in hand. A non-empty
// ContentID makes it an inline part referenced from the HTML as cid:ContentID
// (given without angle brackets); Filename is then optional.
type Attachment struct {
	Filename    string
	ContentType string
	ContentID   string
	Content     []byte
}

// Email is a validated send request.
type Email struct {
	From                 address.Address
	To, Cc, Bcc, ReplyTo []address.Address

	Subject, HTML, Text string
	// GenerateText is true when the request had html but no text: the
	// builder derives the text part from HTML. Text "" with GenerateText
	// false means no text part.
	GenerateText bool

	Headers     []Header // sorted by name
	Attachments []Attachment
	Tags        []Tag
	ScheduledAt *time.Time // UTC; nil to send now
	// TopicID is the topic the email is scoped to; nil for none. Validate
	// checks its form only: the sender checks that the team has it.
	TopicID *uuid.UUID
	// TemplateID is the template the email was rendered from; nil for none.
	TemplateID *uuid.UUID
}

// Row is the email row that accepting e stores, without the sender
// domain (which authorization decides): what the message builder
// (delivery.BuildMessage) reads back when the email is sent.
func (e Email) Row(id, team uuid.UUID, now time.Time) store.Email {
	return toRow(id, team, e, now)
}

// Fetcher fetches an attachment `path`. It returns at most limit bytes of
// body, or an error whose text may be shown to the caller; a body over
// limit is an error matching egress.ErrTooLarge.
type Fetcher interface {
	Fetch(ctx context.Context, url string, limit int64) (body []byte, contentType string, err error)
}

// ValidateOptions are the dependencies of Validate.
type ValidateOptions struct {
	// Now is the reference time for scheduled_at; zero means time.Now().
	Now time.Time
	// Fetch fetches attachments given by path; nil rejects them.
	Fetch Fetcher
	// FetchTime bounds fetching all attachments given by path; 0 means
	// MaxFetchTime.
	FetchTime time.Duration
}

// Validate checks r and returns the Email to build. Rejections are *Error
// naming the field; other errors (the context ending while an attachment is
// fetched) are returned wrapped. Cheap checks all run before any fetch.
func (r SendRequest) Validate(ctx context.Context, opts ValidateOptions) (Email, error) {
	var e Email
	var err error

	if r.Template != nil {
		// Service.applyTemplate renders templates before validation; a
		// request still holding one was not rendered.
		return Email{}, Errorf(KindValidation, "template", "Invalid `template` field. Templates are not supported here.")
	}
	if strings.TrimSpace(r.From) == "" {
		return Email{}, Errorf(KindMissingField, "from", "Missing `from` field.")
	}
	if e.From, err = address.Parse(r.From); err != nil {
		return Email{}, Errorf(KindInvalidParameter, "from", "Invalid `from` field. %s", addressFormat)
	}

	if len(r.To) == 0 {
		return Email{}, Errorf(KindMissingField, "to", "Missing `to` field.")
	}
	if n := len(r.To) + len(r.Cc) + len(r.Bcc); n > maxRecipients {
		return Email{}, Errorf(KindValidation, "to",
			"Invalid `to` field. `to`, `cc` and `bcc` together may hold at most %d addresses; this request has %d.", maxRecipients, n)
	}
	if len(r.ReplyTo) > maxReplyTo {
		return Email{}, Errorf(KindValidation, "reply_to", "Invalid `reply_to` field. At most %d addresses are allowed.", maxReplyTo)
	}
	for _, f := range []struct {
		name string
		in   AddressList
		out  *[]address.Address
	}{
		{"to", r.To, &e.To},
		{"cc", r.Cc, &e.Cc},
		{"bcc", r.Bcc, &e.Bcc},
		{"reply_to", r.ReplyTo, &e.ReplyTo},
	} {
		if *f.out, err = parseAddressField(f.name, f.in); err != nil {
			return Email{}, err
		}
	}

	if r.Subject == nil || *r.Subject == "" {
		return Email{}, Errorf(KindMissingField, "subject", "Missing `subject` field.")
	}
	if err := checkHeaderText("subject", *r.Subject); err != nil {
		return Email{}, err
	}
	e.Subject = *r.Subject

	if (r.HTML == nil || *r.HTML == "") && (r.Text == nil || *r.Text == "") {
		return Email{}, Errorf(KindMissingField, "html", "Missing `html` or `text` field.")
	}
	for _, b := range []struct {
		name string
		in   *string
		out  *string
	}{{"html", r.HTML, &e.HTML}, {"text", r.Text, &e.Text}} {
		if b.in == nil {
			continue
		}
		if !utf8.ValidString(*b.in) {
			return Email{}, Errorf(KindValidation, b.name, "Invalid `%s` field. It must be valid UTF-8.", b.name)
		}
		*b.out = *b.in
	}
	e.GenerateText = r.Text == nil && e.HTML != ""

	if e.Headers, err = checkHeaders(r.Headers); err != nil {
		return Email{}, err
	}
	if e.Tags, err = checkTags(r.Tags); err != nil {
		return Email{}, err
	}
	if e.ScheduledAt, err = checkScheduledAt(r.ScheduledAt, opts.Now); err != nil {
		return Email{}, err
	}
	if r.TopicID != nil && *r.TopicID != "" {
		id, err := uuid.Parse(*r.TopicID)
		if err != nil {
			return Email{}, Errorf(KindValidation, "topic_id", "Invalid `topic_id` field. Expected the id of a topic.")
		}
		e.TopicID = &id
	}
	e.TemplateID = r.TemplateID
	if err := checkAttachments(ctx, r.Attachments, &e, opts.Fetch, cmp.Or(opts.FetchTime, MaxFetchTime)); err != nil {
		return Email{}, err
	}
	return e, nil
}

// parseAddressField parses every address of a field and drops repeats of
// the same address (compared case-insensitively), keeping the first.
func parseAddressField(field string, list AddressList) ([]address.Address, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]address.Address, 0, len(list))
	seen := make(map[string]bool, len(list))
	for _, s := range list {
		a, err := address.Parse(s)
		if err != nil {
			return nil, Errorf(KindValidation, field, "Invalid `%s` field. %q is not a valid address (%s). %s",
				field, truncate(s, 100), err, addressFormat)
		}
		key := strings.ToLower(a.Addr())
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, a)
	}
	return out, nil
}

// checkHeaderText rejects text that cannot be put in a header field:
// invalid UTF-8, line breaks (header injection) and other control characters.
func checkHeaderText(field, s string) error {
	switch {
	case !utf8.ValidString(s):
		return Errorf(KindValidation, field, "Invalid `%s` field. It must be valid UTF-8.", field)
	case strings.ContainsAny(s, "\r\n"):
		return Errorf(KindValidation, field, "Invalid `%s` field. It must not contain line breaks.", field)
	case hasControl(s):
		return Errorf(KindValidation, field, "Invalid `%s` field. It must not contain control characters.", field)
	}
	return nil
}

// headerField names the send-object field that sets the header field named
// lower (lower-case), if there is one.
func headerField(lower string) string {
	switch lower {
	case "from", "to", "cc", "bcc", "subject":
		return lower
	case "reply-to":
		return "reply_to"
	case "sender":
		return "from"
	}
	return ""
}

// checkHeaders checks custom headers by the rules the message builder
// applies (mime.ValidFieldName, mime.ReservedField, mime.CheckFieldValue)
// and returns them sorted by name.
func checkHeaders(in map[string]string) ([]Header, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]Header, 0, len(in))
	size := 0
	for name, value := range in {
		if !mime.ValidFieldName(name) {
			return nil, Errorf(KindValidation, "headers",
				"Invalid `headers` field. %q is not a valid header name: use printable ASCII characters other than `:` and space.", truncate(name, 100))
		}
		if mime.ReservedField(name) {
			if field := headerField(strings.ToLower(name)); field != "" {
				return nil, Errorf(KindValidation, "headers",
					"Invalid `headers` field. Use the `%s` field instead of a `%s` header.", field, name)
			}
			if mime.TraceField(name) {
				return nil, Errorf(KindValidation, "headers",
					"Invalid `headers` field. `%s` is added by the mail servers a message passes through, not by its sender.", name)
			}
			return nil, Errorf(KindValidation, "headers",
				"Invalid `headers` field. Posthaste sets the `%s` header itself.", name)
		}
		if err := mime.CheckFieldValue(value); err != nil {
			return nil, Errorf(KindValidation, "headers",
				"Invalid `headers` field. The value of `%s` must be valid UTF-8 without line breaks or control characters.", name)
		}
		size += len(name) + len(": ") + len(value) + len("\r\n")
		out = append(out, Header{Name: name, Value: value})
	}
	if size > maxHeadersSize {
		return nil, Errorf(KindValidation, "headers",
			"Invalid `headers` field. Custom headers may take at most %d bytes; these take %d.", maxHeadersSize, size)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func tooManyTags(n int) error {
	return Errorf(KindValidation, "tags", "Invalid `tags` field. At most %d tags are allowed; this request has %d.", maxTags, n)
}

func checkTags(in []Tag) ([]Tag, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > maxTags {
		return nil, tooManyTags(len(in))
	}
	out := make([]Tag, len(in))
	for i, t := range in {
		for _, f := range []struct{ name, value string }{{"name", t.Name}, {"value", t.Value}} {
			field := fmt.Sprintf("tags[%d].%s", i, f.name)
			if f.value == "" {
				return nil, Errorf(KindMissingField, field, "Missing `%s` field.", field)
			}
			if len(f.value) > maxTagLength || !isTagText(f.value) {
				return nil, Errorf(KindValidation, field,
					"Invalid `%s` field. Tags may only contain ASCII letters, numbers, underscores and dashes, at most %d characters.", field, maxTagLength)
			}
		}
		out[i] = t
	}
	return out, nil
}

func isTagText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkScheduledAt(in *string, now time.Time) (*time.Time, error) {
	if in == nil || strings.TrimSpace(*in) == "" {
		return nil, nil
	}
	if now.IsZero() {
		now = time.Now()
	}
	t, err := ParseScheduledAt("scheduled_at", *in, now)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

func parseTimestamp(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	// RFC 3339 §5.6 allows lower-case t and z and a space as separator.
	if len(s) > 10 && (s[10] == 't' || s[10] == ' ') {
		s = s[:10] + "T" + s[11:]
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	// ISO 8601 profiles, all with an explicit zone: RFC 3339 (fractional
	// seconds optional), and the forms without seconds or with a
	// colon-less offset.
	for _, layout := range []string{
		time.RFC3339Nano,
		"2006-01-02T15:04:05.999999999Z0700",
		"2006-01-02T15:04Z07:00",
		"2006-01-02T15:04Z0700",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

func tooManyAttachments(n int) error {
	return Errorf(KindValidation, "attachments",
		"Invalid `attachments` field. An email may have at most %d attachments; this request has %d.", MaxAttachments, n)
}

// checkAttachments checks the attachments, then fetches those given by
// path, in order, within fetchTime. Each fetch may return only as many
// bytes as the message still has room for, so that what a request holds
// stays within about MaxMessageSize however many paths it gives.
func checkAttachments(ctx context.Context, in []AttachmentRequest, e *Email, fetch Fetcher, fetchTime time.Duration) error {
	if len(in) > MaxAttachments {
		return tooManyAttachments(len(in))
	}
	if len(in) > 0 {
		e.Attachments = make([]Attachment, len(in))
	}
	// First pass: everything that needs no network.
	for i, a := range in {
		field := fmt.Sprintf("attachments[%d]", i)
		out := &e.Attachments[i]
		hasContent, hasPath := len(a.Content) > 0, a.Path != ""
		switch {
		case !hasContent && !hasPath:
			return Errorf(KindInvalidAttachment, field, "Invalid `%s` field. An attachment needs `content` or `path`.", field)
		case hasContent && hasPath:
			return Errorf(KindInvalidAttachment, field, "Invalid `%s` field. An attachment takes `content` or `path`, not both.", field)
		}
		out.Filename = a.Filename
		if hasPath {
			u, err := url.Parse(a.Path)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return Errorf(KindInvalidAttachment, field+".path", "Invalid `%s.path` field. It must be an http or https URL.", field)
			}
			if fetch == nil {
				return Errorf(KindInvalidAttachment, field+".path", "Invalid `%s.path` field. Attachments by URL are not accepted here; send `content` instead.", field)
			}
			if out.Filename == "" {
				if base := path.Base(u.Path); base != "/" && base != "." {
					out.Filename = base
				}
			}
		} else {
			out.Content = a.Content
		}
		if err := checkAttachmentText(field+".filename", out.Filename); err != nil {
			return err
		}
		cid, err := checkContentID(field, a.ContentID)
		if err != nil {
			return err
		}
		out.ContentID = cid
		if out.Filename == "" && cid == "" {
			return Errorf(KindInvalidAttachment, field+".filename", "Missing `%s.filename` field. Attachments that are not inline need a filename.", field)
		}
		if a.ContentType != "" {
			if out.ContentType, err = normalizeMediaType(a.ContentType); err != nil {
				return Errorf(KindInvalidAttachment, field+".content_type", "Invalid `%s.content_type` field. Expected a media type such as `application/pdf`.", field)
			}
			if err := mime.CheckAttachmentType(out.ContentType); err != nil {
				return Errorf(KindInvalidAttachment, field+".content_type",
					"Invalid `%s.content_type` field. %s is MIME structure, not the type of a file: give the file's own type, or application/octet-stream.",
					field, truncate(out.ContentType, 100))
			}
		} else if out.Filename != "" {
			out.ContentType = fileType(out.Filename)
		}
	}
	if err := checkSize(e); err != nil {
		return err
	}
	// Second pass: fetch attachments given by path, in order, stopping as
	// soon as the message would be too large.
	fctx, cancel := context.WithTimeout(ctx, fetchTime)
	defer cancel()
	for i, a := range in {
		out := &e.Attachments[i]
		if a.Path != "" {
			field := fmt.Sprintf("attachments[%d].path", i)
			room := decodedRoom(MaxMessageSize - estimateSize(e))
			body, ctype, err := fetch.Fetch(fctx, a.Path, max(room, 1))
			switch {
			case err == nil:
			case ctx.Err() != nil:
				return fmt.Errorf("fetching attachment %d: %w", i, ctx.Err())
			case fctx.Err() != nil:
				return Errorf(KindInvalidAttachment, field,
					"Invalid `%s` field. Fetching the attachments of one email may take at most %s in all; this one took longer.",
					field, fetchTime)
			case errors.Is(err, egress.ErrTooLarge):
				return Errorf(KindTooLarge, "attachments",
					"The email is too large: `%s` is larger than the %.1f MB left of the %d MB limit. Send fewer or smaller attachments.",
					field, float64(room)/(1<<20), MaxMessageSize>>20)
			default:
				return Errorf(KindInvalidAttachment, field, "Invalid `%s` field. Fetching it failed: %s.", field, err)
			}
			out.Content = body
			if out.ContentType == "" {
				// Better than nothing when the name has no known extension.
				if ct, err := normalizeMediaType(ctype); err == nil && mime.CheckAttachmentType(ct) == nil {
					out.ContentType = ct
				}
			}
			if err := checkSize(e); err != nil {
				return err
			}
		}
		if out.ContentType == "" {
			out.ContentType = "application/octet-stream"
		}
	}
	return nil
}

func checkAttachmentText(field, s string) error {
	if s == "" {
		return nil
	}
	if !utf8.ValidString(s) || hasControl(s) || strings.ContainsAny(s, "\t") {
		return Errorf(KindInvalidAttachment, field, "Invalid `%s` field. It must be valid UTF-8 without control characters.", field)
	}
	return nil
}

// checkContentID returns the content ID without surrounding angle brackets.
// RFC 2392 content IDs are msg-ids; any printable ASCII without spaces,
// quotes, backslashes or angle brackets is accepted.
func checkContentID(field, cid string) (string, error) {
	if strings.HasPrefix(cid, "<") && strings.HasSuffix(cid, ">") && len(cid) >= 2 {
		cid = cid[1 : len(cid)-1]
	}
	if len(cid) > maxContentIDLen {
		return "", Errorf(KindInvalidAttachment, field+".content_id", "Invalid `%s.content_id` field. It may have at most %d characters.", field, maxContentIDLen)
	}
	for i := 0; i < len(cid); i++ {
		if c := cid[i]; c < 33 || c > 126 || strings.IndexByte(`<>"\`, c) >= 0 {
			return "", Errorf(KindInvalidAttachment, field+".content_id",
				"Invalid `%s.content_id` field. Use printable ASCII without spaces, quotes, backslashes or angle brackets.", field)
		}
	}
	return cid, nil
}

// fileType is the content type of a file named name by its extension, or
// "" when unknown. The system's table (mime.types) names a few multipart
// types (.vpm, .bmed), which no attachment can have (mime.CheckAttachmentType):
// those files are unknown too.
func fileType(name string) string {
	if name == "" {
		return ""
	}
	ct := stdmime.TypeByExtension(path.Ext(name))
	if ct == "" || mime.CheckAttachmentType(ct) != nil {
		return ""
	}
	return ct
}

// normalizeMediaType parses a Content-Type value and formats it canonically.
func normalizeMediaType(s string) (string, error) {
	mt, params, err := stdmime.ParseMediaType(s)
	if err != nil {
		return "", err
	}
	if !strings.Contains(mt, "/") {
		return "", fmt.Errorf("media type %q has no subtype", mt)
	}
	out := stdmime.FormatMediaType(mt, params)
	if out == "" {
		return "", fmt.Errorf("media type %q cannot be formatted", mt)
	}
	return out, nil
}

func checkSize(e *Email) error {
	if n := estimateSize(e); n > MaxMessageSize {
		return Errorf(KindTooLarge, "attachments",
			"The email is too large: it would be about %.1f MB once built, over the %d MB limit. Send fewer or smaller attachments.",
			float64(n)/(1<<20), MaxMessageSize>>20)
	}
	return nil
}

// estimateSize estimates the built message from above: bodies and
// attachments base64-encoded in 76-character lines (RFC 2045 §6.8), plus
// generous room for headers and MIME structure.
func estimateSize(e *Email) int64 {
	const (
		topHeaders   = 4096 // Date, Message-ID, MIME-Version, DKIM-Signature, boundaries
		partOverhead = 512
	)
	n := int64(topHeaders) + encodedLen(len(e.Subject))
	for _, list := range [][]address.Address{{e.From}, e.To, e.Cc, e.Bcc, e.ReplyTo} {
		for _, a := range list {
			n += encodedLen(len(a.Name)) + int64(len(a.Local)+len(a.Domain)) + 8
		}
	}
	for _, h := range e.Headers {
		n += int64(len(h.Name)) + encodedLen(len(h.Value)) + 4
	}
	for _, body := range []string{e.HTML, e.Text} {
		if body != "" {
			n += partOverhead + encodedLen(len(body))
		}
	}
	if e.GenerateText {
		n += partOverhead + encodedLen(len(e.HTML))
	}
	for _, a := range e.Attachments {
		n += partOverhead + 2*int64(len(a.Filename)) + int64(len(a.ContentType)+len(a.ContentID)) + attachmentLen(a)
	}
	return n
}

// attachmentLen bounds the encoded size of an attachment's content: base64,
// or for an attached message (carried unencoded, see mime.Attachment) the
// content with every line end made CRLF, whichever is larger.
func attachmentLen(a Attachment) int64 {
	n := encodedLen(len(a.Content))
	if strings.HasPrefix(a.ContentType, "message/") {
		raw := int64(len(a.Content) + bytes.Count(a.Content, []byte("\n")) + bytes.Count(a.Content, []byte("\r")))
		n = max(n, raw)
	}
	return n
}

// decodedRoom is the largest content that fits in room bytes once
// base64-encoded by encodedLen, 0 when none does.
func decodedRoom(room int64) int64 {
	if room <= 0 {
		return 0
	}
	lines, rest := room/78, room%78 // 76 characters and CRLF per line
	chars := lines * 76
	if rest > 2 {
		chars += rest - 2 // a last, shorter line
	}
	return chars / 4 * 3
}

// encodedLen is the size of n bytes in base64 with CRLF after every 76
// characters.
func encodedLen(n int) int64 {
	b64 := int64(n+2) / 3 * 4
	return b64 + (b64+75)/76*2
}

// truncate shortens s to at most n bytes (on a rune boundary) for messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// hasControl reports whether s contains a control character other than tab.
func hasControl(s string) bool {
	for _, r := range s {
		if r != '\t' && unicode.IsControl(r) {
			return true
		}
	}
	return false
}
