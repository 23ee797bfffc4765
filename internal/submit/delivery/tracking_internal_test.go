package delivery

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/emersion/go-message/mail"
	"github.com/stretchr/testify/require"
)

func TestTrackSubmitted(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 30)
	raw := strings.ReplaceAll(`From: Shop <hello@shop.test>
To: ann@rcpt.test
Subject: Sale
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

preamble
--outer
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

See https://shop.example/sale
--alt
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: quoted-printable

<p>`+long+`<a href=3D"https://shop.example/sale?a=3D1">sale</a> caf=C3=A9</p>
--alt--
--outer
Content-Type: text/html; charset=utf-8
Content-Disposition: attachment; filename="page.html"

<a href="https://attached.example/">kept</a>
--outer
Content-Type: text/html; charset=iso-8859-1

<a href="https://latin.example/">kept</a>
--outer--
epilogue
`, "\n", "\r\n")
	track := func(html string) (string, error) {
		return strings.ReplaceAll(html, "https://shop.example/", "https://links.shop.test/c/"+strings.Repeat("T", 200)+"/"), nil
	}
	out, err := trackSubmitted([]byte(raw), track)
	require.NoError(t, err)

	mr, err := mail.CreateReader(bytes.NewReader(out))
	require.NoError(t, err)
	require.Equal(t, "Sale", mustSubject(t, mr.Header))
	var parts []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(p.Body)
		require.NoError(t, err)
		parts = append(parts, string(b))
	}
	require.Len(t, parts, 4)
	require.Equal(t, "See https://shop.example/sale", parts[0], "the text part is untouched")
	require.Equal(t, "<p>"+long+`<a href="https://links.shop.test/c/`+strings.Repeat("T", 200)+`/sale?a=1">sale</a> café</p>`,
		parts[1], "the HTML part is rewritten, its encoding kept")
	require.Equal(t, `<a href="https://attached.example/">kept</a>`, parts[2], "an attachment is not")
	require.Contains(t, parts[3], "https://latin.example/", "nor a part in another charset")
	for _, line := range strings.Split(string(out), "\r\n") {
		require.LessOrEqual(t, len(line), 998, "lines stay within SMTP's limit")
	}

	// A single-part HTML message written 8bit becomes quoted-printable.
	single := "From: a@shop.test\r\nContent-Type: text/html\r\n\r\n<a href=\"https://shop.example/x\">x</a>\r\n"
	out, err = trackSubmitted([]byte(single), track)
	require.NoError(t, err)
	require.Contains(t, string(out), "Content-Transfer-Encoding: quoted-printable")
	mr, err = mail.CreateReader(bytes.NewReader(out))
	require.NoError(t, err)
	p, err := mr.NextPart()
	require.NoError(t, err)
	b, err := io.ReadAll(p.Body)
	require.NoError(t, err)
	require.Contains(t, string(b), "https://links.shop.test/c/")

	_, err = trackSubmitted([]byte("no header end"), track)
	require.ErrorIs(t, err, errUnreadable, "delivered untracked")
}

func mustSubject(t *testing.T, h mail.Header) string {
	t.Helper()
	s, err := h.Subject()
	require.NoError(t, err)
	return s
}
