package mime

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/emersion/go-message/mail"
	"github.com/stretchr/testify/require"
)

// forward is an .eml file as a mail program saves it: LF line ends, its own
// MIME structure.
const forward = "From: Carol <carol@example.org>\n" +
	"To: bob@example.com\n" +
	"Subject: Minutes\n" +
	"Date: Sat, 21 Nov 2026 09:00:00 +0000\n" +
	"Message-ID: <minutes@example.org>\n" +
	"MIME-Version: 1.0\n" +
	"Content-Type: multipart/mixed; boundary=inner\n" +
	"\n" +
	"--inner\n" +
	"Content-Type: text/plain; charset=utf-8\n" +
	"\n" +
	"See attached.\n" +
	"--inner--\n"

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// attachedPart builds base() with text and one attachment and returns the
// attachment's part.
func attachedPart(t *testing.T, a Attachment) ([]byte, part) {
	t.Helper()
	m := base()
	m.Text = "FYI"
	m.Attachments = []Attachment{a}
	raw, parts := build(t, m)
	require.Len(t, parts, 3)
	return raw, parts[2]
}

// RFC 2046 §5.2.1: an attached message goes in as itself (7bit or 8bit,
// never base64), so that the recipient's mail program shows it as a message.
func TestBuildAttachedMessage(t *testing.T) {
	raw, p := attachedPart(t, Attachment{Filename: "minutes.eml", ContentType: "message/rfc822", Content: []byte(forward)})
	require.Equal(t, "message/rfc822", p.mediaType)
	require.Equal(t, "7bit", p.header.Get("Content-Transfer-Encoding"))
	disp, params, err := p.header.ContentDisposition()
	require.NoError(t, err)
	require.Equal(t, "attachment", disp)
	require.Equal(t, "minutes.eml", params["filename"])
	require.Equal(t, crlf(forward), string(p.body), "the message is attached as is, with CRLF line ends")
	require.Contains(t, string(raw), "\r\nSubject: Minutes\r\n", "readable without decoding")

	inner, err := mail.CreateReader(bytes.NewReader(p.body))
	require.NoError(t, err)
	subject, err := inner.Header.Subject()
	require.NoError(t, err)
	require.Equal(t, "Minutes", subject)
	ip, err := inner.NextPart()
	require.NoError(t, err)
	body := new(bytes.Buffer)
	_, err = body.ReadFrom(ip.Body)
	require.NoError(t, err)
	require.Equal(t, "See attached.", body.String())

	// 8-bit content (RFC 6532 headers, an 8bit body) is carried as 8bit.
	eight := "From: zoë@example.org\r\nSubject: Été\r\nContent-Transfer-Encoding: 8bit\r\n\r\nDéjà vu\r\n"
	_, p = attachedPart(t, Attachment{Filename: "été.eml", ContentType: "message/rfc822", Content: []byte(eight)})
	require.Equal(t, "message/rfc822", p.mediaType)
	require.Equal(t, "8bit", p.header.Get("Content-Transfer-Encoding"))
	require.Equal(t, eight, string(p.body))
}

// Content that cannot be a message/rfc822 body still arrives, as the file
// it is.
func TestBuildAttachedMessageFallback(t *testing.T) {
	tests := []struct {
		name, contentType, content string
		wantType, wantEncoding     string
	}{
		{"no header", "message/rfc822", "just some text\n", "application/octet-stream", "base64"},
		{"line over 998 octets", "message/rfc822", "Subject: x\r\n\r\n" + strings.Repeat("a", 999) + "\r\n", "application/octet-stream", "base64"},
		{"NUL", "message/rfc822", "Subject: x\r\n\r\na\x00b\r\n", "application/octet-stream", "base64"},
		{"global stays global", "message/global", "Subject: x\r\n\r\n" + strings.Repeat("é", 600) + "\r\n", "message/global", "base64"},
		{"global 8bit", "message/global", "Subject: é\r\n\r\né\r\n", "message/global", "8bit"},
		{"delivery status 7bit", "message/delivery-status", "Reporting-MTA: dns; mx.example.org\r\n", "message/delivery-status", "7bit"},
		{"delivery status 8bit", "message/delivery-status", "Reporting-MTA: dns; mx.exämple.org\r\n", "application/octet-stream", "base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, p := attachedPart(t, Attachment{Filename: "x.eml", ContentType: tt.contentType, Content: []byte(tt.content)})
			require.Equal(t, tt.wantType, p.mediaType)
			require.Equal(t, tt.wantEncoding, p.header.Get("Content-Transfer-Encoding"))
			require.Equal(t, "x.eml", p.params["name"])
			require.Equal(t, tt.content, string(p.body))
		})
	}
}

// An attached message may hold any line, even the delimiter Build would
// derive: then Build derives another boundary (RFC 2046 §5.1.1).
func TestBuildBoundaryAvoidsAttachedMessage(t *testing.T) {
	m := base()
	m.Text = "FYI"
	b := boundary("mixed", m.MessageID)
	evil := "Subject: x\r\n\r\n--" + b + "\r\nContent-Type: text/plain\r\n\r\ninjected\r\n--" + b + "--\r\n"
	m.Attachments = []Attachment{{Filename: "x.eml", ContentType: "message/rfc822", Content: []byte(evil)}}
	raw, parts := build(t, m)
	require.Len(t, parts, 3)
	require.Equal(t, evil, string(parts[2].body))
	require.NotEqual(t, b, parts[0].params["boundary"])
	again, err := Build(m)
	require.NoError(t, err)
	require.Equal(t, raw, again, "still deterministic")
}

func TestMultipartAttachmentRefused(t *testing.T) {
	require.NoError(t, CheckAttachmentType("message/rfc822"))
	require.NoError(t, CheckAttachmentType("application/pdf"))
	require.ErrorContains(t, CheckAttachmentType("multipart/mixed; boundary=x"), "not a file type")
	require.ErrorContains(t, CheckAttachmentType("image/"), "invalid content type")
}

// Harmless custom fields, Content-Language (RFC 3282) among them, are sent;
// the fields Build writes or that describe its body are refused.
func TestCustomFields(t *testing.T) {
	m := base()
	m.Text = "Hello"
	m.Headers = []Header{{"Content-Language", "en"}, {"Content-Description", "Greeting"}, {"X-Tag[1]", "a\tb"}}
	raw, parts := build(t, m)
	require.Len(t, parts, 1)
	for _, want := range []string{"\r\nContent-Language: en\r\n", "\r\nContent-Description: Greeting\r\n", "\r\nX-Tag[1]: a\tb\r\n"} {
		require.Contains(t, string(raw), want)
	}

	for _, name := range []string{"content-type", "Content-Transfer-Encoding", "Content-Disposition", "Content-MD5",
		"Content-Length", "BCC", "Sender", "Return-Path", "Received", "DKIM-Signature", "Message-ID",
		"Authentication-Results", "ARC-Seal", "arc-message-signature", "ARC-Authentication-Results"} {
		require.True(t, ReservedField(name), name)
		require.ErrorContains(t, CheckField(name, "x"), "reserved", name)
	}
	for _, name := range []string{"Content-Language", "Content-ID", "List-Unsubscribe", "X-Entity-Ref-ID", "Resent-From",
		"Archive", "X-Authentication-Results"} {
		require.False(t, ReservedField(name), name)
	}
	for value, want := range map[string]string{
		"a\x00b":     "U+0000",
		"a\x7fb":     "U+007F",
		"a\u0085b":   "U+0085",
		"a\nBcc: x":  "CR or LF",
		"a\xc3":      "UTF-8",
		"tab\tis ok": "",
		"ünïcödé":    "",
	} {
		err := CheckField("X-A", value)
		if want == "" {
			require.NoError(t, err, "%q", value)
			continue
		}
		require.ErrorContains(t, err, want, "%q", value)
	}
}

// Over SMTP, a field with a control character is refused at once rather
// than delivered: the same rule as for the API's custom fields.
func TestParseSubmissionRefusesControlCharacters(t *testing.T) {
	for _, raw := range []string{
		"From: a@example.test\r\nX-A: a\x01b\r\n\r\nhi\r\n",
		"From: a@example.test\r\nSubject: a\x00b\r\n\r\nhi\r\n",
		"From: a@example.test\r\nX-A: a\r\n \x1bb\r\n\r\nhi\r\n",
	} {
		_, err := ParseSubmission([]byte(raw))
		require.True(t, errors.Is(err, ErrMalformed), "%q: %v", raw, err)
		require.ErrorContains(t, err, "control character")
	}
	// Tabs, 8-bit text in any charset and odd but valid field names stay.
	s, err := ParseSubmission([]byte("From: a@example.test\r\nX-A: a\tb \xe9\r\nX-Tag[1]: x\r\n\r\nhi\r\n"))
	require.NoError(t, err)
	require.Contains(t, string(s.Bytes("id@example.test", testDate)), "X-A: a\tb \xe9\r\nX-Tag[1]: x\r\n")
}

// net/mail Q-encodes a display name that needs encoding but leaves a
// backslash in it raw, which RFC 2047 §5(3) forbids in a phrase: readers
// then cannot parse the field (found by FuzzBuild, seed 580ca71e99195452).
func TestBuildNameWithBackslash(t *testing.T) {
	for _, name := range []string{`Zoë \ Co`, "\x11\\", `a\b`, `Zoë "Z"`} {
		m := base()
		m.Text = "hi"
		m.From.Name, m.To[0].Name = name, name
		raw, _ := build(t, m)
		mr, err := mail.CreateReader(bytes.NewReader(raw))
		require.NoError(t, err)
		for _, key := range []string{"From", "To"} {
			list, err := mr.Header.AddressList(key)
			require.NoError(t, err, "%s %q: %s", key, name, mr.Header.Get(key))
			require.Equal(t, name, list[0].Name)
		}
	}
}
