package mime

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/stretchr/testify/require"
)

const submitted = "From: =?utf-8?q?Zo=C3=AB?= <zoe@example.test>\n" +
	"To: Bob <bob@example.test>, carol@example.test\n" +
	"Cc: dave@example.test\n" +
	"Bcc: eve@example.test\n" +
	"Subject: =?utf-8?q?R=C3=A9sum=C3=A9?=\n" +
	"X-Custom: kept as is\n" +
	"Idempotency-Key: order-42\n" +
	"X-Posthaste-Tags: category=receipt, plan=pro\n" +
	"MIME-Version: 1.0\n" +
	"Content-Type: multipart/alternative; boundary=b1\n" +
	"\n" +
	"--b1\n" +
	"Content-Type: text/plain; charset=iso-8859-1\n" +
	"Content-Transfer-Encoding: quoted-printable\n" +
	"\n" +
	"Caf=E9\n" +
	"--b1\n" +
	"Content-Type: text/html; charset=utf-8\n" +
	"\n" +
	"<p>Caf\xc3\xa9</p>\n" +
	"--b1--\n"

func TestParseSubmission(t *testing.T) {
	s, err := ParseSubmission([]byte(submitted))
	require.NoError(t, err)
	require.Equal(t, []Address{{Name: "Zoë", Addr: "zoe@example.test"}}, s.From)
	require.Equal(t, []Address{{Name: "Bob", Addr: "bob@example.test"}, {Addr: "carol@example.test"}}, s.To)
	require.Equal(t, []Address{{Addr: "dave@example.test"}}, s.Cc)
	require.Equal(t, []Address{{Addr: "eve@example.test"}}, s.Bcc)
	require.Equal(t, "Résumé", s.Subject)
	require.Equal(t, "", s.MessageID)
	require.NotNil(t, s.IdempotencyKey)
	require.Equal(t, "order-42", *s.IdempotencyKey)
	require.Equal(t, "category=receipt, plan=pro", s.Tags)
	require.NotNil(t, s.Text)
	require.Equal(t, "Café", *s.Text, "quoted-printable ISO-8859-1 is decoded")
	require.NotNil(t, s.HTML)
	require.Equal(t, "<p>Café</p>", *s.HTML)

	date := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	out := s.Bytes("abc@example.test", date)
	require.NotContains(t, string(out), "\n\n", "line ends are CRLF")
	require.Equal(t, -1, bytes.Index(bytes.ReplaceAll(out, []byte("\r\n"), nil), []byte("\n")), "no bare LF")
	for _, gone := range []string{"Bcc:", "eve@example.test", "Idempotency-Key", "X-Posthaste-Tags"} {
		require.NotContains(t, string(out), gone)
	}
	require.Contains(t, string(out), "X-Custom: kept as is\r\n")
	r, err := mail.CreateReader(bytes.NewReader(out))
	require.NoError(t, err)
	id, err := r.Header.MessageID()
	require.NoError(t, err)
	require.Equal(t, "abc@example.test", id)
	got, err := r.Header.Date()
	require.NoError(t, err)
	require.True(t, got.Equal(date))
	// The body is byte for byte what was submitted (with CRLF).
	body := strings.ReplaceAll(submitted[strings.Index(submitted, "\n\n")+2:], "\n", "\r\n")
	require.True(t, bytes.HasSuffix(out, []byte(body)))
}

func TestParseSubmissionKeepsMessageIDAndDate(t *testing.T) {
	msg := "Message-ID: <own@client.test>\r\nDate: Mon, 02 Jan 2006 15:04:05 -0700\r\n" +
		"From: a@example.test\r\nResend-Idempotency-Key: k1\r\n\r\nhi\r\n"
	s, err := ParseSubmission([]byte(msg))
	require.NoError(t, err)
	require.Equal(t, "own@client.test", s.MessageID)
	require.Equal(t, "k1", *s.IdempotencyKey)
	out := string(s.Bytes("ignored@example.test", time.Now()))
	require.Equal(t, 1, strings.Count(out, "Message-ID"))
	require.Equal(t, 1, strings.Count(out, "Date:"))
	require.NotContains(t, out, "ignored")
	require.NotContains(t, out, "Resend-Idempotency-Key")
	require.Equal(t, "Message-ID: <own@client.test>\r\nDate: Mon, 02 Jan 2006 15:04:05 -0700\r\n"+
		"From: a@example.test\r\n\r\nhi\r\n", out)
}

func TestParseSubmissionAcceptsBrokenMIME(t *testing.T) {
	// A valid RFC 5322 message whose MIME structure is broken (no closing
	// boundary, bad encoding) is accepted and kept as bytes.
	msg := "From: a@example.test\r\nTo: b@example.test\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"x\"\r\n\r\n--x\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!\r\n"
	s, err := ParseSubmission([]byte(msg))
	require.NoError(t, err)
	require.Nil(t, s.HTML)
	require.True(t, bytes.HasSuffix(s.Bytes("m@example.test", time.Now()), []byte("\r\n\r\n--x\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!\r\n")))
}

func TestParseSubmissionRefuses(t *testing.T) {
	for name, msg := range map[string]string{
		"empty":          "",
		"no header":      "\r\njust a body\r\n",
		"not a header":   "this is not a header line\r\n\r\nbody\r\n",
		"no From":        "To: b@example.test\r\nSubject: x\r\n\r\nbody\r\n",
		"two From":       "From: a@example.test\r\nFrom: c@example.test\r\n\r\nbody\r\n",
		"empty From":     "From: \r\n\r\nbody\r\n",
		"bad From":       "From: not an address\r\n\r\nbody\r\n",
		"bad To":         "From: a@example.test\r\nTo: <<@>>\r\n\r\nbody\r\n",
		"two Sender":     "From: a@example.test\r\nSender: a@example.test, b@example.test\r\n\r\nbody\r\n",
		"binary garbage": "\x00\x01\x02\xff\xfe",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSubmission([]byte(msg))
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrMalformed), "%v", err)
		})
	}
}

func TestNormalizeCRLF(t *testing.T) {
	require.Equal(t, "a\r\nb\r\nc\r\nd", string(normalizeCRLF([]byte("a\nb\r\nc\rd"))))
	same := []byte("a\r\nb\r\n")
	require.Equal(t, &same[0], &normalizeCRLF(same)[0], "CRLF input is not copied")
}

// FuzzParseSubmission checks that any input either is refused with
// ErrMalformed or yields a message that parses again to the same
// addresses, without Bcc, with CRLF line ends, a Message-ID and a Date.
func FuzzParseSubmission(f *testing.F) {
	f.Add([]byte(submitted))
	f.Add([]byte("From: a@example.test\r\n\r\n"))
	f.Add([]byte("From: a@example.test\nBcc: x@y.test\n\nbody\n.\n"))
	f.Add([]byte("From: \"quoted, name\" <a@example.test>\r\nTo: undisclosed-recipients:;\r\n\r\n"))
	f.Add([]byte("From: a@example.test\r\nContent-Type: multipart/mixed; boundary=\"\"\r\n\r\n--\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := ParseSubmission(raw)
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformed), "%v", err)
			return
		}
		require.NotEmpty(t, s.From)
		out := s.Bytes("id@example.test", time.Unix(0, 0))
		require.Equal(t, -1, bytes.Index(bytes.ReplaceAll(out, []byte("\r\n"), nil), []byte("\n")), "no bare LF")
		again, err := ParseSubmission(out)
		require.NoError(t, err)
		require.Equal(t, s.From, again.From)
		require.Equal(t, s.To, again.To)
		require.Empty(t, again.Bcc)
		require.Nil(t, again.IdempotencyKey)
		require.NotEmpty(t, again.MessageID)
	})
}
