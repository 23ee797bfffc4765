package received

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

func TestParseMultipart(t *testing.T) {
	raw := crlf(`From: =?utf-8?q?Z=C3=B6e?= <zoe@example.org>
To: support@example.com, "Bob" <bob@example.com>
Cc: carol@example.net
Reply-To: replies@example.org
Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=
Message-ID: <abc@example.org>
X-Custom: one
X-Custom: two
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="inner"

--inner
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Hall=F6chen
--inner
Content-Type: text/html; charset=utf-8

<p>Hi</p>
--inner--
--outer
Content-Type: application/pdf; name="report.pdf"
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQK
--outer
Content-Type: image/png
Content-Disposition: inline
Content-ID: <img001>
Content-Transfer-Encoding: base64

iVBORw0K
--outer--
`)
	e, err := Parse(raw, Limits{})
	require.NoError(t, err)
	require.Equal(t, "Zöe <zoe@example.org>", e.From)
	require.Equal(t, []string{"support@example.com", "Bob <bob@example.com>"}, e.To)
	require.Equal(t, []string{"carol@example.net"}, e.Cc)
	require.Equal(t, []string{"replies@example.org"}, e.ReplyTo)
	require.Equal(t, "Grüße", e.Subject)
	require.Equal(t, "<abc@example.org>", e.MessageID)
	require.Equal(t, "one", e.Headers["x-custom"])
	require.NotNil(t, e.Text)
	require.Equal(t, "Hallöchen", strings.TrimSpace(*e.Text))
	require.NotNil(t, e.HTML)
	require.Equal(t, "<p>Hi</p>", strings.TrimSpace(*e.HTML))
	require.Len(t, e.Attachments, 2)
	require.Equal(t, Attachment{Filename: "report.pdf", ContentType: "application/pdf",
		ContentDisposition: "attachment", Content: []byte("%PDF-1.4\n")}, e.Attachments[0])
	require.Equal(t, "img001", e.Attachments[1].ContentID)
	require.Equal(t, "inline", e.Attachments[1].ContentDisposition)
	require.False(t, e.Truncated)
}

func TestParsePlain(t *testing.T) {
	e, err := Parse(crlf("From: a@example.org\nTo: b@example.com\nSubject: hi\n\nbody\n"), Limits{})
	require.NoError(t, err)
	require.Equal(t, "a@example.org", e.From)
	require.Equal(t, "body\r\n", *e.Text)
	require.Nil(t, e.HTML)
	require.Empty(t, e.Attachments)
	require.Equal(t, []string{}, e.Cc)
}

func TestParseBounded(t *testing.T) {
	// Nesting deeper than MaxDepth is not visited.
	var b strings.Builder
	b.WriteString("From: a@example.org\nMIME-Version: 1.0\n")
	const depth = 30
	for i := range depth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\n\n--b%d\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\n\ndeep\n")
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\n", i)
	}
	e, err := Parse(crlf(b.String()), Limits{MaxDepth: 5})
	require.NoError(t, err)
	require.True(t, e.Truncated)
	require.Nil(t, e.Text)

	// Parts over MaxParts are left out.
	b.Reset()
	b.WriteString("From: a@example.org\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"x\"\n\n")
	for range 50 {
		b.WriteString("--x\nContent-Type: application/octet-stream\nContent-Disposition: attachment\n\nzz\n")
	}
	b.WriteString("--x--\n")
	e, err = Parse(crlf(b.String()), Limits{MaxParts: 10})
	require.NoError(t, err)
	require.True(t, e.Truncated)
	require.Len(t, e.Attachments, 9)

	_, err = Parse(make([]byte, 100), Limits{MaxBytes: 10})
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestParseCleansText(t *testing.T) {
	raw := []byte("From: a@example.org\r\nSubject: caf\xe9\x00\r\nX-Bin: \xff\r\n\r\nna\xefve\x00 body\r\n")
	e, err := Parse(raw, Limits{})
	require.NoError(t, err)
	require.Equal(t, "caf\uFFFD\uFFFD", e.Subject)
	require.Equal(t, "na\uFFFDve\uFFFD body\r\n", *e.Text)
	require.Equal(t, "\uFFFD", e.Headers["x-bin"])
}
