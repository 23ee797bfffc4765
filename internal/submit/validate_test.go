package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/address"
	"github.com/posthaste/posthaste/internal/egress"
)

var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fakeFetcher serves fixed bodies by URL and records what was asked.
type fakeFetcher struct {
	bodies map[string]fakeBody
	calls  []string
	limits []int64
}

type fakeBody struct {
	body        []byte
	contentType string
	err         error
}

func (f *fakeFetcher) Fetch(_ context.Context, url string, limit int64) ([]byte, string, error) {
	f.calls = append(f.calls, url)
	f.limits = append(f.limits, limit)
	b, ok := f.bodies[url]
	if !ok {
		return nil, "", errors.New("egress: GET " + url + ": unexpected status 404")
	}
	if int64(len(b.body)) > limit {
		return nil, "", fmt.Errorf("egress: GET %s: body is larger than %d bytes: %w", url, limit, egress.ErrTooLarge)
	}
	return b.body, b.contentType, b.err
}

var (
	_ Fetcher = (*fakeFetcher)(nil)
	_ Fetcher = (*egress.Client)(nil) // the production fetcher
)

// minimal returns a valid request to modify.
func minimal() SendRequest {
	return SendRequest{
		From:    "Acme <hello@acme.com>",
		To:      AddressList{"b@x.com"},
		Subject: ptr("Hi"),
		HTML:    ptr("<p>Hi</p>"),
	}
}

func TestValidate(t *testing.T) {
	sched := testNow.Add(24 * time.Hour)
	tests := []struct {
		name  string
		edit  func(r *SendRequest)
		check func(t *testing.T, e Email)
	}{
		{
			name: "minimal html only generates text",
			edit: func(r *SendRequest) {},
			check: func(t *testing.T, e Email) {
				require.Equal(t, address.Address{Name: "Acme", Local: "hello", Domain: "acme.com"}, e.From)
				require.Equal(t, []address.Address{{Local: "b", Domain: "x.com"}}, e.To)
				require.Equal(t, "Hi", e.Subject)
				require.Equal(t, "<p>Hi</p>", e.HTML)
				require.Empty(t, e.Text)
				require.True(t, e.GenerateText)
				require.Nil(t, e.ScheduledAt)
			},
		},
		{
			name: "text only",
			edit: func(r *SendRequest) { r.HTML, r.Text = nil, ptr("plain") },
			check: func(t *testing.T, e Email) {
				require.Equal(t, "plain", e.Text)
				require.Empty(t, e.HTML)
				require.False(t, e.GenerateText)
			},
		},
		{
			name: "empty text disables the text part",
			edit: func(r *SendRequest) { r.Text = ptr("") },
			check: func(t *testing.T, e Email) {
				require.Empty(t, e.Text)
				require.False(t, e.GenerateText)
			},
		},
		{
			name: "both bodies",
			edit: func(r *SendRequest) { r.Text = ptr("t") },
			check: func(t *testing.T, e Email) {
				require.Equal(t, "t", e.Text)
				require.False(t, e.GenerateText)
			},
		},
		{
			name: "duplicates removed within a field, kept across fields, IDN domains",
			edit: func(r *SendRequest) {
				r.To = AddressList{"a@x.com", "Other Name <A@X.COM>", "b@x.com", "jörg@bücher.de"}
				r.Cc = AddressList{"a@x.com", "a@x.com"}
				r.Bcc = AddressList{"z@x.com"}
				r.ReplyTo = AddressList{"r@x.com", "r@x.com"}
			},
			check: func(t *testing.T, e Email) {
				require.Equal(t, []address.Address{{Local: "a", Domain: "x.com"}, {Local: "b", Domain: "x.com"}, {Local: "jörg", Domain: "xn--bcher-kva.de"}}, e.To)
				require.Equal(t, []address.Address{{Local: "a", Domain: "x.com"}}, e.Cc)
				require.Equal(t, []address.Address{{Local: "z", Domain: "x.com"}}, e.Bcc)
				require.Equal(t, []address.Address{{Local: "r", Domain: "x.com"}}, e.ReplyTo)
			},
		},
		{
			name: "50 recipients",
			edit: func(r *SendRequest) {
				r.To = nil
				for i := range 25 {
					r.To = append(r.To, fmt.Sprintf("t%d@x.com", i))
					r.Bcc = append(r.Bcc, fmt.Sprintf("b%d@x.com", i))
				}
			},
			check: func(t *testing.T, e Email) {
				require.Len(t, e.To, 25)
				require.Len(t, e.Bcc, 25)
			},
		},
		{
			name: "headers sorted",
			edit: func(r *SendRequest) {
				r.Headers = map[string]string{"X-B": "2", "List-Unsubscribe": "<https://x.com/u>", "X-A": "1 ünicode", "X-Empty": "",
					"Content-Language": "en"}
			},
			check: func(t *testing.T, e Email) {
				require.Equal(t, []Header{{"Content-Language", "en"}, {"List-Unsubscribe", "<https://x.com/u>"}, {"X-A", "1 ünicode"},
					{"X-B", "2"}, {"X-Empty", ""}}, e.Headers)
			},
		},
		{
			name: "tags",
			edit: func(r *SendRequest) {
				r.Tags = []Tag{{"category", "confirm_email"}, {"A-1", strings.Repeat("v", 256)}}
			},
			check: func(t *testing.T, e Email) {
				require.Equal(t, []Tag{{"category", "confirm_email"}, {"A-1", strings.Repeat("v", 256)}}, e.Tags)
			},
		},
		{
			name: "scheduled_at with offset and fraction",
			edit: func(r *SendRequest) { r.ScheduledAt = ptr("2026-11-23T11:00:00.123+01:00") },
			check: func(t *testing.T, e Email) {
				want := sched.Add(123 * time.Millisecond)
				require.Equal(t, &want, e.ScheduledAt)
				require.Equal(t, time.UTC, e.ScheduledAt.Location())
			},
		},
		{
			name:  "scheduled_at forms",
			edit:  func(r *SendRequest) { r.ScheduledAt = ptr(" 2026-11-23 10:00z ") },
			check: func(t *testing.T, e Email) { require.Equal(t, &sched, e.ScheduledAt) },
		},
		{
			name:  "scheduled_at colon-less offset",
			edit:  func(r *SendRequest) { r.ScheduledAt = ptr("2026-11-23T05:00:00-0500") },
			check: func(t *testing.T, e Email) { require.Equal(t, &sched, e.ScheduledAt) },
		},
		{
			name: "scheduled_at a few seconds ago is now",
			edit: func(r *SendRequest) { r.ScheduledAt = ptr("2026-11-22T09:59:30Z") },
			check: func(t *testing.T, e Email) {
				require.Equal(t, testNow.Add(-30*time.Second), *e.ScheduledAt)
			},
		},
		{
			name:  "scheduled_at exactly 30 days",
			edit:  func(r *SendRequest) { r.ScheduledAt = ptr("2026-12-22T10:00:00Z") },
			check: func(t *testing.T, e Email) { require.Equal(t, testNow.Add(30*24*time.Hour), *e.ScheduledAt) },
		},
		{
			name:  "empty scheduled_at is now",
			edit:  func(r *SendRequest) { r.ScheduledAt = ptr("") },
			check: func(t *testing.T, e Email) { require.Nil(t, e.ScheduledAt) },
		},
		{
			name: "attachments by content",
			edit: func(r *SendRequest) {
				r.Attachments = []AttachmentRequest{
					{Content: Bytes("%PDF"), Filename: "invoice.PDF"},
					{Content: Bytes{1}, Filename: "data.unknownext"},
					{Content: Bytes{2}, Filename: "x", ContentType: "Text/Plain; Charset=UTF-8"},
					{Content: Bytes{3}, ContentID: "<logo>", ContentType: "image/png"},
					{Content: Bytes{4}, ContentID: "logo@acme", Filename: "logo.png"},
					{Content: Bytes("From: a@x.com\r\n\r\nhi"), Filename: "fwd.eml", ContentType: "message/rfc822"},
					// mime.types says multipart/voice-message, which no
					// attachment can be.
					{Content: Bytes{5}, Filename: "voice.vpm"},
				}
			},
			check: func(t *testing.T, e Email) {
				require.Equal(t, []Attachment{
					{Filename: "invoice.PDF", ContentType: "application/pdf", Content: []byte("%PDF")},
					{Filename: "data.unknownext", ContentType: "application/octet-stream", Content: []byte{1}},
					{Filename: "x", ContentType: "text/plain; charset=UTF-8", Content: []byte{2}},
					{ContentID: "logo", ContentType: "image/png", Content: []byte{3}},
					{Filename: "logo.png", ContentID: "logo@acme", ContentType: "image/png", Content: []byte{4}},
					{Filename: "fwd.eml", ContentType: "message/rfc822", Content: []byte("From: a@x.com\r\n\r\nhi")},
					{Filename: "voice.vpm", ContentType: "application/octet-stream", Content: []byte{5}},
				}, e.Attachments)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := minimal()
			tt.edit(&r)
			e, err := r.Validate(context.Background(), ValidateOptions{Now: testNow})
			require.NoError(t, err)
			tt.check(t, e)
		})
	}
}

func TestValidateErrors(t *testing.T) {
	many := func(prefix string, n int) AddressList {
		var l AddressList
		for i := range n {
			l = append(l, fmt.Sprintf("%s%d@x.com", prefix, i))
		}
		return l
	}
	tests := []struct {
		name  string
		edit  func(r *SendRequest)
		kind  Kind
		field string
		msg   string
	}{
		{"from missing", func(r *SendRequest) { r.From = "" }, KindMissingField, "from", "Missing `from` field."},
		{"from blank", func(r *SendRequest) { r.From = "  " }, KindMissingField, "from", "Missing `from` field."},
		{"from malformed", func(r *SendRequest) { r.From = "Acme <acme.com>" }, KindInvalidParameter, "from", "Invalid `from` field."},
		{"from injection", func(r *SendRequest) { r.From = "a@x.com\r\nBcc: v@y.com" }, KindInvalidParameter, "from", "Invalid `from` field."},
		{"to missing", func(r *SendRequest) { r.To = nil }, KindMissingField, "to", "Missing `to` field."},
		{"to empty", func(r *SendRequest) { r.To = AddressList{} }, KindMissingField, "to", "Missing `to` field."},
		{"to invalid", func(r *SendRequest) { r.To = AddressList{"ok@x.com", "not-an-address"} }, KindValidation, "to", `Invalid ` + "`to`" + ` field. "not-an-address" is not a valid address (address has no @).`},
		{"to empty string element", func(r *SendRequest) { r.To = AddressList{""} }, KindValidation, "to", "address is empty"},
		{"cc invalid", func(r *SendRequest) { r.Cc = AddressList{"a@b"} }, KindValidation, "cc", "Invalid `cc` field. \"a@b\""},
		{"bcc invalid", func(r *SendRequest) { r.Bcc = AddressList{"x <y>"} }, KindValidation, "bcc", "Invalid `bcc` field."},
		{"reply_to invalid", func(r *SendRequest) { r.ReplyTo = AddressList{"@x.com"} }, KindValidation, "reply_to", "Invalid `reply_to` field."},
		{"long bad address truncated", func(r *SendRequest) { r.To = AddressList{strings.Repeat("x", 500)} }, KindValidation, "to", strings.Repeat("x", 100) + "…"},
		{"51 recipients", func(r *SendRequest) { r.To, r.Cc, r.Bcc = many("t", 20), many("c", 20), many("b", 11) }, KindValidation, "to", "at most 50 addresses; this request has 51"},
		{"51 reply_to", func(r *SendRequest) { r.ReplyTo = many("r", 51) }, KindValidation, "reply_to", "At most 50"},
		{"subject missing", func(r *SendRequest) { r.Subject = nil }, KindMissingField, "subject", "Missing `subject` field."},
		{"subject empty", func(r *SendRequest) { r.Subject = ptr("") }, KindMissingField, "subject", "Missing `subject` field."},
		{"subject CR", func(r *SendRequest) { r.Subject = ptr("a\rb") }, KindValidation, "subject", "line breaks"},
		{"subject LF", func(r *SendRequest) { r.Subject = ptr("a\nBcc: x@y.com") }, KindValidation, "subject", "line breaks"},
		{"subject NUL", func(r *SendRequest) { r.Subject = ptr("a\x00b") }, KindValidation, "subject", "control characters"},
		{"subject bad utf8", func(r *SendRequest) { r.Subject = ptr("a\xffb") }, KindValidation, "subject", "UTF-8"},
		{"no body", func(r *SendRequest) { r.HTML = nil }, KindMissingField, "html", "Missing `html` or `text` field."},
		{"empty bodies", func(r *SendRequest) { r.HTML, r.Text = ptr(""), ptr("") }, KindMissingField, "html", "Missing `html` or `text` field."},
		{"html bad utf8", func(r *SendRequest) { r.HTML = ptr("\xff") }, KindValidation, "html", "UTF-8"},
		{"header name colon", func(r *SendRequest) { r.Headers = map[string]string{"X:A": "1"} }, KindValidation, "headers", `"X:A" is not a valid header name`},
		{"header name space", func(r *SendRequest) { r.Headers = map[string]string{"X A": "1"} }, KindValidation, "headers", "not a valid header name"},
		{"header name empty", func(r *SendRequest) { r.Headers = map[string]string{"": "1"} }, KindValidation, "headers", "not a valid header name"},
		{"header name non-ascii", func(r *SendRequest) { r.Headers = map[string]string{"X-Ü": "1"} }, KindValidation, "headers", "not a valid header name"},
		{"header value LF", func(r *SendRequest) { r.Headers = map[string]string{"X-A": "1\nBcc: x@y.com"} }, KindValidation, "headers", "value of `X-A`"},
		{"header value CR", func(r *SendRequest) { r.Headers = map[string]string{"X-A": "1\r"} }, KindValidation, "headers", "without line breaks"},
		{"header To", func(r *SendRequest) { r.Headers = map[string]string{"to": "x@y.com"} }, KindValidation, "headers", "Use the `to` field instead of a `to` header."},
		{"header Reply-To", func(r *SendRequest) { r.Headers = map[string]string{"Reply-To": "x@y.com"} }, KindValidation, "headers", "Use the `reply_to` field instead"},
		{"header Subject", func(r *SendRequest) { r.Headers = map[string]string{"SUBJECT": "x"} }, KindValidation, "headers", "Use the `subject` field"},
		{"header Message-ID", func(r *SendRequest) { r.Headers = map[string]string{"Message-ID": "<x@y>"} }, KindValidation, "headers", "Posthaste sets the `Message-ID` header itself."},
		{"header DKIM-Signature", func(r *SendRequest) { r.Headers = map[string]string{"dkim-signature": "v=1"} }, KindValidation, "headers", "Posthaste sets the `dkim-signature` header itself."},
		{"header Received", func(r *SendRequest) { r.Headers = map[string]string{"Received": "from x"} }, KindValidation, "headers", "`Received` is added by the mail servers a message passes through, not by its sender."},
		{"header Authentication-Results", func(r *SendRequest) {
			r.Headers = map[string]string{"Authentication-Results": "mx.google.com; dkim=pass header.d=bank.example"}
		}, KindValidation, "headers", "`Authentication-Results` is added by the mail servers a message passes through, not by its sender."},
		{"header ARC-Seal", func(r *SendRequest) { r.Headers = map[string]string{"ARC-Seal": "i=1; cv=none"} }, KindValidation, "headers", "`ARC-Seal` is added by the mail servers"},
		{"header ARC-Message-Signature", func(r *SendRequest) { r.Headers = map[string]string{"arc-message-signature": "i=1"} }, KindValidation, "headers", "`arc-message-signature` is added"},
		{"header ARC-Authentication-Results", func(r *SendRequest) { r.Headers = map[string]string{"ARC-Authentication-Results": "i=1; dkim=pass"} }, KindValidation, "headers", "is added by the mail servers"},
		{"header Content-Type", func(r *SendRequest) { r.Headers = map[string]string{"Content-Type": "text/plain"} }, KindValidation, "headers", "Posthaste sets"},
		{"header Content-Disposition", func(r *SendRequest) { r.Headers = map[string]string{"Content-Disposition": "attachment"} }, KindValidation, "headers", "Posthaste sets the `Content-Disposition` header itself."},
		{"header Sender", func(r *SendRequest) { r.Headers = map[string]string{"Sender": "x@y.com"} }, KindValidation, "headers", "Use the `from` field instead of a `Sender` header."},
		{"header value control", func(r *SendRequest) { r.Headers = map[string]string{"X-A": "a\x01b"} }, KindValidation, "headers", "without line breaks or control characters"},
		{"headers too big", func(r *SendRequest) {
			r.Headers = map[string]string{"X-A": strings.Repeat("a", 4096), "X-B": strings.Repeat("b", 4096)}
		}, KindValidation, "headers", "at most 8192 bytes"},
		{"76 tags", func(r *SendRequest) {
			for i := range 76 {
				r.Tags = append(r.Tags, Tag{Name: fmt.Sprintf("t%d", i), Value: "v"})
			}
		}, KindValidation, "tags", "At most 75 tags"},
		{"tag name missing", func(r *SendRequest) { r.Tags = []Tag{{Value: "v"}} }, KindMissingField, "tags[0].name", "Missing `tags[0].name` field."},
		{"tag value missing", func(r *SendRequest) { r.Tags = []Tag{{"a", "b"}, {Name: "n"}} }, KindMissingField, "tags[1].value", "Missing `tags[1].value` field."},
		{"tag name chars", func(r *SendRequest) { r.Tags = []Tag{{"a b", "v"}} }, KindValidation, "tags[0].name", "ASCII letters"},
		{"tag value chars", func(r *SendRequest) { r.Tags = []Tag{{"a", "ü"}} }, KindValidation, "tags[0].value", "ASCII letters"},
		{"tag too long", func(r *SendRequest) { r.Tags = []Tag{{"a", strings.Repeat("v", 257)}} }, KindValidation, "tags[0].value", "at most 256"},
		{"scheduled gibberish", func(r *SendRequest) { r.ScheduledAt = ptr("whenever you like") }, KindValidation, "scheduled_at", "natural language"},
		{"scheduled natural past", func(r *SendRequest) { r.ScheduledAt = ptr("yesterday at 9am") }, KindValidation, "scheduled_at", "must not be in the past"},
		{"scheduled natural too far", func(r *SendRequest) { r.ScheduledAt = ptr("in 31 days") }, KindValidation, "scheduled_at", "at most 30 days"},
		{"scheduled no zone", func(r *SendRequest) { r.ScheduledAt = ptr("2026-11-23T10:00:00") }, KindValidation, "scheduled_at", "with a time zone"},
		{"scheduled date only", func(r *SendRequest) { r.ScheduledAt = ptr("2026-11-23") }, KindValidation, "scheduled_at", "ISO 8601"},
		{"scheduled invalid date", func(r *SendRequest) { r.ScheduledAt = ptr("2026-02-30T10:00:00Z") }, KindValidation, "scheduled_at", "ISO 8601"},
		{"scheduled past", func(r *SendRequest) { r.ScheduledAt = ptr("2026-11-22T09:58:59Z") }, KindValidation, "scheduled_at", "must not be in the past"},
		{"scheduled too far", func(r *SendRequest) { r.ScheduledAt = ptr("2026-12-22T10:00:01Z") }, KindValidation, "scheduled_at", "at most 30 days"},
		{"attachment empty", func(r *SendRequest) { r.Attachments = []AttachmentRequest{{Filename: "a.txt"}} }, KindInvalidAttachment, "attachments[0]", "needs `content` or `path`"},
		{"attachment empty content", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, Filename: "a"}, {Content: Bytes{}, Filename: "b"}}
		}, KindInvalidAttachment, "attachments[1]", "Invalid `attachments[1]` field."},
		{"attachment both", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, Path: "https://x.com/a", Filename: "a"}}
		}, KindInvalidAttachment, "attachments[0]", "not both"},
		{"attachment no filename", func(r *SendRequest) { r.Attachments = []AttachmentRequest{{Content: Bytes{1}}} }, KindInvalidAttachment, "attachments[0].filename", "Missing `attachments[0].filename` field."},
		{"attachment filename newline", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, Filename: "a\r\nb"}}
		}, KindInvalidAttachment, "attachments[0].filename", "control characters"},
		{"attachment bad content type", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, Filename: "a", ContentType: "pdf"}}
		}, KindInvalidAttachment, "attachments[0].content_type", "media type"},
		{"attachment content type injection", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, Filename: "a", ContentType: "text/plain\r\nX-A: b"}}
		}, KindInvalidAttachment, "attachments[0].content_type", "media type"},
		{"attachment multipart content type", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, Filename: "a", ContentType: "Multipart/Mixed; boundary=x"}}
		}, KindInvalidAttachment, "attachments[0].content_type", "multipart/mixed; boundary=x is MIME structure, not the type of a file"},
		{"attachment bad content id", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, ContentID: "a b"}}
		}, KindInvalidAttachment, "attachments[0].content_id", "printable ASCII"},
		{"attachment long content id", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Content: Bytes{1}, ContentID: strings.Repeat("c", 251)}}
		}, KindInvalidAttachment, "attachments[0].content_id", "at most 250"},
		{"attachment path not http", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Path: "file:///etc/passwd"}}
		}, KindInvalidAttachment, "attachments[0].path", "http or https URL"},
		{"attachment path relative", func(r *SendRequest) { r.Attachments = []AttachmentRequest{{Path: "/etc/passwd"}} }, KindInvalidAttachment, "attachments[0].path", "http or https URL"},
		{"attachment path without fetcher", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{{Path: "https://x.com/a.pdf"}}
		}, KindInvalidAttachment, "attachments[0].path", "not accepted here"},
		{"too large", func(r *SendRequest) {
			r.Attachments = []AttachmentRequest{
				{Content: make(Bytes, 20<<20), Filename: "a.bin"},
				{Content: make(Bytes, 10<<20), Filename: "b.bin"},
			}
		}, KindTooLarge, "attachments", "over the 40 MB limit"},
		{"too large html", func(r *SendRequest) { r.HTML = ptr(strings.Repeat("x", 16<<20)) }, KindTooLarge, "attachments", "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := minimal()
			tt.edit(&r)
			_, err := r.Validate(context.Background(), ValidateOptions{Now: testNow})
			var e *Error
			require.True(t, errors.As(err, &e), "got %v", err)
			require.Equal(t, tt.kind, e.Kind, e.Message)
			require.Equal(t, tt.field, e.Field)
			require.Contains(t, e.Message, tt.msg)
		})
	}
}

func TestValidateFetch(t *testing.T) {
	pdf := []byte("%PDF-1.7")
	big := make([]byte, 25<<20)
	tests := []struct {
		name    string
		atts    []AttachmentRequest
		bodies  map[string]fakeBody
		want    []Attachment
		calls   []string
		errKind Kind
		errMsg  string
	}{
		{
			name:   "filename from path and type from extension",
			atts:   []AttachmentRequest{{Path: "https://files.example.com/dir/Invoice%20May.pdf?sig=abc"}},
			bodies: map[string]fakeBody{"https://files.example.com/dir/Invoice%20May.pdf?sig=abc": {body: pdf, contentType: "application/octet-stream"}},
			want:   []Attachment{{Filename: "Invoice May.pdf", ContentType: "application/pdf", Content: pdf}},
			calls:  []string{"https://files.example.com/dir/Invoice%20May.pdf?sig=abc"},
		},
		{
			name:   "explicit filename and type win",
			atts:   []AttachmentRequest{{Path: "https://x.com/a.pdf", Filename: "b.txt", ContentType: "application/x-custom"}},
			bodies: map[string]fakeBody{"https://x.com/a.pdf": {body: pdf, contentType: "application/pdf"}},
			want:   []Attachment{{Filename: "b.txt", ContentType: "application/x-custom", Content: pdf}},
			calls:  []string{"https://x.com/a.pdf"},
		},
		{
			name:   "fetched type when the name has no known extension",
			atts:   []AttachmentRequest{{Path: "https://x.com/download"}},
			bodies: map[string]fakeBody{"https://x.com/download": {body: pdf, contentType: "application/pdf; name=x"}},
			want:   []Attachment{{Filename: "download", ContentType: "application/pdf; name=x", Content: pdf}},
			calls:  []string{"https://x.com/download"},
		},
		{
			// A server's multipart type (a stream, say) is not the file's:
			// no attachment can be multipart (mime.CheckAttachmentType).
			name:   "fetched multipart type is not used",
			atts:   []AttachmentRequest{{Path: "https://x.com/stream"}},
			bodies: map[string]fakeBody{"https://x.com/stream": {body: pdf, contentType: "multipart/x-mixed-replace; boundary=f"}},
			want:   []Attachment{{Filename: "stream", ContentType: "application/octet-stream", Content: pdf}},
			calls:  []string{"https://x.com/stream"},
		},
		{
			name:   "inline by path without a name",
			atts:   []AttachmentRequest{{Path: "https://x.com/", ContentID: "img"}},
			bodies: map[string]fakeBody{"https://x.com/": {body: pdf, contentType: "bogus"}},
			want:   []Attachment{{ContentID: "img", ContentType: "application/octet-stream", Content: pdf}},
			calls:  []string{"https://x.com/"},
		},
		{
			name:    "no name from path",
			atts:    []AttachmentRequest{{Path: "https://x.com/"}},
			errKind: KindInvalidAttachment,
			errMsg:  "Missing `attachments[0].filename` field.",
		},
		{
			name:    "fetch error names the index and keeps the text",
			atts:    []AttachmentRequest{{Content: Bytes{1}, Filename: "a"}, {Path: "https://10.0.0.1/x.pdf"}},
			bodies:  map[string]fakeBody{"https://10.0.0.1/x.pdf": {err: errors.New("egress: address 10.0.0.1 is not allowed")}},
			calls:   []string{"https://10.0.0.1/x.pdf"},
			errKind: KindInvalidAttachment,
			errMsg:  "Invalid `attachments[1].path` field. Fetching it failed: egress: address 10.0.0.1 is not allowed.",
		},
		{
			name:    "no fetch when another field is invalid",
			atts:    []AttachmentRequest{{Path: "https://x.com/a.pdf"}, {Filename: "empty"}},
			errKind: KindInvalidAttachment,
			errMsg:  "attachments[1]",
		},
		{
			name: "stops fetching once too large",
			atts: []AttachmentRequest{{Path: "https://x.com/1"}, {Path: "https://x.com/2"}, {Path: "https://x.com/3"}},
			bodies: map[string]fakeBody{
				"https://x.com/1": {body: big}, "https://x.com/2": {body: big}, "https://x.com/3": {body: big},
			},
			calls:   []string{"https://x.com/1", "https://x.com/2"},
			errKind: KindTooLarge,
			errMsg:  "too large",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := minimal()
			r.Attachments = tt.atts
			f := &fakeFetcher{bodies: tt.bodies}
			e, err := r.Validate(context.Background(), ValidateOptions{Now: testNow, Fetch: f})
			require.Equal(t, tt.calls, f.calls)
			for _, l := range f.limits {
				// base64 makes 30 MB of content 40 MB of message: no
				// fetch may hold more than that.
				require.LessOrEqual(t, l, int64(30<<20))
			}
			if tt.errKind != 0 {
				var ve *Error
				require.True(t, errors.As(err, &ve), "got %v", err)
				require.Equal(t, tt.errKind, ve.Kind)
				require.Contains(t, ve.Message, tt.errMsg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, e.Attachments)
		})
	}
}

func TestValidateFetchContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := minimal()
	r.Attachments = []AttachmentRequest{{Path: "https://x.com/a.pdf"}}
	_, err := r.Validate(ctx, ValidateOptions{Now: testNow, Fetch: &fakeFetcher{}})
	require.ErrorIs(t, err, context.Canceled)
	var ve *Error
	require.False(t, errors.As(err, &ve))
}

// requestFor renders a validated Email back into a send request.
func requestFor(e Email) SendRequest {
	strs := func(list []address.Address) AddressList {
		var out AddressList
		for _, a := range list {
			out = append(out, a.String())
		}
		return out
	}
	r := SendRequest{
		From: e.From.String(), To: strs(e.To), Cc: strs(e.Cc), Bcc: strs(e.Bcc), ReplyTo: strs(e.ReplyTo),
		Subject: ptr(e.Subject),
	}
	if e.HTML != "" {
		r.HTML = ptr(e.HTML)
	}
	if !e.GenerateText {
		r.Text = ptr(e.Text)
	}
	if len(e.Headers) > 0 {
		r.Headers = map[string]string{}
		for _, h := range e.Headers {
			r.Headers[h.Name] = h.Value
		}
	}
	for _, a := range e.Attachments {
		r.Attachments = append(r.Attachments, AttachmentRequest{Content: a.Content, Filename: a.Filename, ContentType: a.ContentType, ContentID: a.ContentID})
	}
	r.Tags = e.Tags
	if e.ScheduledAt != nil {
		r.ScheduledAt = ptr(e.ScheduledAt.Format(time.RFC3339Nano))
	}
	return r
}

func FuzzDecodeSendRequest(f *testing.F) {
	for _, s := range []string{
		`{"from":"Acme <a@acme.com>","to":"b@x.com","subject":"Hi","html":"<p>x</p>"}`,
		`{"from":"a@acme.com","to":["b@x.com","B@X.COM"],"cc":"c@x.com","subject":"Hi","text":"t","replyTo":"r@x.com"}`,
		`{"from":"\"Doe, J\" <a@acme.com>","to":["b@bücher.de"],"subject":"Hi","html":"h","text":"",
		  "headers":{"X-A":"1","X-B":"ü"},"tags":[{"name":"a","value":"b"}],"scheduled_at":"2026-11-23T10:00:00.5+02:00"}`,
		`{"from":"a@acme.com","to":"b@x.com","subject":"Hi","html":"h","attachments":[
		  {"content":"aGk=","filename":"a.txt"},{"content":[1,2,3],"filename":"b.pdf","content_type":"application/pdf"},
		  {"content":{"type":"Buffer","data":[255]},"contentId":"<img>"}]}`,
		`{"from":"a@acme.com","to":"b@x.com","subject":"Hi","html":"h","attachments":[{"path":"https://x.com/a.pdf"}]}`,
		`{"from":"=?utf-8?q?J=C3=B6rg?= <j@x.de>","to":"b@x.com","subject":"a\nb","html":"h"}`,
		`[]`, `{"to":1}`, `{"attachments":[{"content":"-_"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The hand-written object splitter agrees with encoding/json.
		if json.Valid(data) && utf8.Valid(data) && firstByte(data) == '{' {
			var want map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(data, &want))
			got, err := objectFields(data)
			require.NoError(t, err)
			require.Equal(t, len(want), len(got))
			for k, v := range want {
				require.Equal(t, string(v), string(got[k]), "member %q", k)
				// Strings decode as encoding/json decodes them.
				var ws string
				if firstByte(v) == '"' && json.Unmarshal(v, &ws) == nil {
					gs, err := unquote(got[k])
					require.NoError(t, err)
					require.Equal(t, ws, gs, "member %q", k)
				}
			}
		}

		r, err := DecodeSendRequest(data)
		// As an element of a batch it decodes the same.
		if json.Valid(data) {
			items, berr := DecodeBatch(append(append([]byte("["), data...), ']'))
			require.NoError(t, berr)
			require.Len(t, items, 1)
			require.Equal(t, r, items[0].Request)
			require.Equal(t, err, items[0].Err)
		}
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "decode error %T is not *Error", err)
			return
		}
		e, err := r.Validate(context.Background(), ValidateOptions{Now: testNow})
		if err != nil {
			var ve *Error
			require.True(t, errors.As(err, &ve), "validate error %T is not *Error", err)
			require.NotEmpty(t, ve.Message)
			return
		}

		// The request re-encodes and decodes to one that validates the same.
		enc, err := json.Marshal(r)
		require.NoError(t, err)
		r2, err := DecodeSendRequest(enc)
		require.NoError(t, err)
		e2, err := r2.Validate(context.Background(), ValidateOptions{Now: testNow})
		require.NoError(t, err)
		require.Equal(t, e, e2)

		// The Email written back as a request validates to itself.
		e3, err := requestFor(e).Validate(context.Background(), ValidateOptions{Now: testNow})
		require.NoError(t, err)
		require.Equal(t, e, e3)

		// Invariants the builder relies on.
		require.NotEmpty(t, e.To)
		require.LessOrEqual(t, len(e.To)+len(e.Cc)+len(e.Bcc), 50)
		require.NotContains(t, e.Subject, "\n")
		require.True(t, e.HTML != "" || e.Text != "")
		for _, h := range e.Headers {
			require.NotContains(t, h.Value, "\r")
			require.NotContains(t, h.Value, "\n")
		}
		for _, a := range e.Attachments {
			require.NotEmpty(t, a.ContentType)
			require.True(t, a.Filename != "" || a.ContentID != "")
		}
	})
}
