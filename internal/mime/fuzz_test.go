package mime

import (
	"bytes"
	stdmime "mime"
	"strings"
	"testing"

	"github.com/emersion/go-message/mail"
	"github.com/stretchr/testify/require"
)

// FuzzBuild checks that any subject, bodies, display names and filename
// build into a message that go-message reads back, with CRLF lines of at most
// 998 octets, and that the subject and bodies survive the round trip.
func FuzzBuild(f *testing.F) {
	f.Add("Hello", "<p>Hi</p>", "Hi", "Acme", "Bob", "a.pdf", true)
	f.Add("Reçu n° 1042 — merci", "<p>Été</p>", "", "Zoë, Inc.", "Jean \"JD\" Dupont", "reçu.pdf", true)
	f.Add(strings.Repeat("x", 1200), strings.Repeat("<b>y</b>", 300), strings.Repeat("z", 3000), strings.Repeat("n ", 200), "", strings.Repeat("f", 300), false)
	f.Add("a\r\nBcc: evil@example.com", "<script>x</script>\r\n.\r\n", "line\rbreaks\n\r\n", "x\r\ny", "\x00\xff", "\"quoted\"\r\n.txt", true)
	f.Add("=?utf-8?q?x?=", "--=_", "--=_\n", "(comment)", "<angle>", "", false)

	f.Fuzz(func(t *testing.T, subject, html, text, fromName, toName, filename string, generate bool) {
		m := base()
		m.Subject, m.HTML, m.Text, m.GenerateText = subject, html, text, generate
		m.From.Name, m.To[0].Name = fromName, toName
		m.Attachments = []Attachment{{Filename: filename, Content: []byte(text)}}
		raw, err := Build(m)
		require.NoError(t, err)
		parts := parse(t, raw) // checks CRLF and line lengths

		mr, err := mail.CreateReader(bytes.NewReader(raw))
		require.NoError(t, err)
		from, err := mr.Header.AddressList("From")
		require.NoError(t, err)
		require.Equal(t, m.From.Addr, from[0].Address)
		to, err := mr.Header.AddressList("To")
		require.NoError(t, err)
		require.Equal(t, m.To[0].Addr, to[0].Address)
		if strings.ContainsFunc(subject, func(r rune) bool { return r < ' ' && r != '\t' || r > '~' }) {
			// Encoded as RFC 2047 words (which go-message does when a
			// character other than tab is not printable ASCII), the subject
			// decodes back exactly.
			got, err := mr.Header.Subject()
			require.NoError(t, err)
			require.Equal(t, validUTF8(subject), got)
		}

		norm := func(s string) string {
			return strings.TrimRight(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n"), "\n")
		}
		var gotText, gotHTML string
		var gotFile []byte
		for _, p := range parts {
			switch {
			case p.mediaType == "text/plain" && p.header.Get("Content-Disposition") == "":
				gotText = string(p.body)
			case p.mediaType == "text/html":
				gotHTML = string(p.body)
			case p.mediaType == "application/octet-stream":
				gotFile = p.body
				_, params, err := stdmime.ParseMediaType(p.header.Get("Content-Disposition"))
				require.NoError(t, err)
				require.Equal(t, validUTF8(filename), params["filename"])
			}
		}
		require.Equal(t, norm(validUTF8(html)), norm(gotHTML))
		if text != "" {
			require.Equal(t, norm(validUTF8(text)), norm(gotText))
		}
		require.Equal(t, []byte(text), gotFile)
	})
}
