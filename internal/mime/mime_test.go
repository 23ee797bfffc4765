package mime

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	stdmime "mime"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var testDate = time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("CET", 3600))

// base returns a minimal valid message for the tests to extend.
func base() Message {
	return Message{
		From:      Address{Name: "Acme", Addr: "hello@acme.example"},
		To:        []Address{{Name: "Bob", Addr: "bob@example.com"}},
		Subject:   "Hello",
		MessageID: "0192f1e4-7a3b-7c1d-9e2f-3a4b5c6d7e8f@acme.example",
		Date:      testDate,
	}
}

// part is an entity of a parsed message.
type part struct {
	depth     int
	mediaType string
	params    map[string]string
	header    message.Header
	body      []byte // decoded; nil for multipart entities
}

// parse reads raw back with go-message, checking first that every line ends
// in CRLF and is at most 998 octets long (RFC 5322 §2.1.1, §2.3).
func parse(t testing.TB, raw []byte) []part {
	t.Helper()
	requireLines(t, raw)

	e, err := message.Read(bytes.NewReader(raw))
	require.NoError(t, err)
	var parts []part
	err = e.Walk(func(path []int, e *message.Entity, err error) error {
		if err != nil {
			return err
		}
		mt, params, err := e.Header.ContentType()
		if err != nil {
			return err
		}
		p := part{depth: len(path), mediaType: mt, params: params, header: e.Header}
		if !strings.HasPrefix(mt, "multipart/") {
			if p.body, err = io.ReadAll(e.Body); err != nil {
				return err
			}
		}
		parts = append(parts, p)
		return nil
	})
	require.NoError(t, err)
	return parts
}

func requireLines(t testing.TB, raw []byte) {
	t.Helper()
	require.True(t, bytes.HasSuffix(raw, []byte("\r\n")), "message does not end in CRLF")
	lines := bytes.Split(raw[:len(raw)-2], []byte("\r\n"))
	for i, l := range lines {
		require.NotContains(t, string(l), "\r", "bare CR on line %d", i+1)
		require.NotContains(t, string(l), "\n", "bare LF on line %d", i+1)
		require.LessOrEqual(t, len(l), 998, "line %d is %d octets", i+1, len(l))
	}
}

// tree describes the MIME structure: one line per entity, indented by depth,
// with the transfer encoding, disposition and Content-ID of leaves.
func tree(parts []part) []string {
	var out []string
	for _, p := range parts {
		s := strings.Repeat("  ", p.depth) + p.mediaType
		if cs := p.params["charset"]; cs != "" {
			s += " charset=" + cs
		}
		if p.body != nil {
			s += " " + p.header.Get("Content-Transfer-Encoding")
		}
		if d, _, _ := p.header.ContentDisposition(); d != "" {
			s += " " + d
		}
		if id := p.header.Get("Content-Id"); id != "" {
			s += " " + id
		}
		out = append(out, s)
	}
	return out
}

func build(t testing.TB, m Message) ([]byte, []part) {
	t.Helper()
	raw, err := Build(m)
	require.NoError(t, err)
	return raw, parse(t, raw)
}

func TestBuildStructure(t *testing.T) {
	logo := Attachment{Filename: "logo.png", ContentType: "image/png", ContentID: "logo", Content: []byte("png")}
	pdf := Attachment{Filename: "invoice.pdf", ContentType: "application/pdf", Content: []byte("pdf")}
	tests := []struct {
		name string
		edit func(m *Message)
		want []string
	}{{
		name: "text only",
		edit: func(m *Message) { m.Text = "hi" },
		want: []string{"text/plain charset=utf-8 quoted-printable"},
	}, {
		name: "html only",
		edit: func(m *Message) { m.HTML = "<p>hi</p>" },
		want: []string{"text/html charset=utf-8 quoted-printable"},
	}, {
		name: "no body at all",
		edit: func(m *Message) {},
		want: []string{"text/plain charset=utf-8 quoted-printable"},
	}, {
		name: "text and html",
		edit: func(m *Message) { m.Text, m.HTML = "hi", "<p>hi</p>" },
		want: []string{
			"multipart/alternative",
			"  text/plain charset=utf-8 quoted-printable",
			"  text/html charset=utf-8 quoted-printable",
		},
	}, {
		name: "html with inline image",
		edit: func(m *Message) {
			m.HTML = `<img src="cid:logo">`
			m.Attachments = []Attachment{logo}
		},
		want: []string{
			"multipart/related",
			"  text/html charset=utf-8 quoted-printable",
			"  image/png base64 inline <logo>",
		},
	}, {
		name: "alternative with inline image",
		edit: func(m *Message) {
			m.Text, m.HTML = "hi", `<img src="cid:logo">`
			m.Attachments = []Attachment{logo}
		},
		want: []string{
			"multipart/related",
			"  multipart/alternative",
			"    text/plain charset=utf-8 quoted-printable",
			"    text/html charset=utf-8 quoted-printable",
			"  image/png base64 inline <logo>",
		},
	}, {
		name: "text with attachment",
		edit: func(m *Message) {
			m.Text = "hi"
			m.Attachments = []Attachment{pdf}
		},
		want: []string{
			"multipart/mixed",
			"  text/plain charset=utf-8 quoted-printable",
			"  application/pdf base64 attachment",
		},
	}, {
		name: "inline image without html is an attachment",
		edit: func(m *Message) {
			m.Text = "hi"
			m.Attachments = []Attachment{logo}
		},
		want: []string{
			"multipart/mixed",
			"  text/plain charset=utf-8 quoted-printable",
			"  image/png base64 attachment <logo>",
		},
	}, {
		name: "everything",
		edit: func(m *Message) {
			m.Text, m.HTML = "hi", `<img src="cid:logo">`
			m.Attachments = []Attachment{pdf, logo, {Content: []byte{0, 1, 2}}}
		},
		want: []string{
			"multipart/mixed",
			"  multipart/related",
			"    multipart/alternative",
			"      text/plain charset=utf-8 quoted-printable",
			"      text/html charset=utf-8 quoted-printable",
			"    image/png base64 inline <logo>",
			"  application/pdf base64 attachment",
			"  application/octet-stream base64 attachment",
		},
	}, {
		name: "generated text",
		edit: func(m *Message) {
			m.HTML = "<p>hi</p>"
			m.GenerateText = true
		},
		want: []string{
			"multipart/alternative",
			"  text/plain charset=utf-8 quoted-printable",
			"  text/html charset=utf-8 quoted-printable",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.edit(&m)
			_, parts := build(t, m)
			require.Equal(t, tt.want, tree(parts))
			for i, p := range parts {
				if p.mediaType == "multipart/related" {
					// RFC 2387 §3.1: type names the root part's type.
					require.Equal(t, parts[i+1].mediaType, p.params["type"])
				}
			}
		})
	}
}

func TestBuildHeaders(t *testing.T) {
	m := base()
	m.From = Address{Name: "Zoë from Ünicorn, Inc.", Addr: "zoe@acme.example"}
	m.To = []Address{{Name: "Bob", Addr: "bob@example.com"}, {Addr: "用户@例子.example"}}
	m.Cc = []Address{{Name: "Ça va", Addr: "carol@example.com"}}
	m.ReplyTo = []Address{{Addr: "support@acme.example"}}
	m.Subject = "Votre reçu — commande n° 1042, with a subject long enough to need folding over several lines"
	m.Text = "hi"
	m.Headers = []Header{
		{Name: "X-Entity-Ref-ID", Value: "abc-123"},
		{Name: "List-Unsubscribe", Value: "<https://acme.example/u/1>, <mailto:u@acme.example>"},
		{Name: "X-Note", Value: "naïve"},
	}
	raw, _ := build(t, m)

	head, _, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	require.True(t, ok)
	var names []string
	for _, l := range strings.Split(string(head), "\r\n") {
		if l[0] != ' ' && l[0] != '\t' {
			name, _, _ := strings.Cut(l, ":")
			names = append(names, name)
		}
	}
	require.Equal(t, []string{
		"From", "To", "Cc", "Reply-To", "Subject", "Date", "Message-ID", "MIME-Version",
		"X-Entity-Ref-ID", "List-Unsubscribe", "X-Note",
		"Content-Type", "Content-Transfer-Encoding",
	}, names)
	require.Contains(t, string(head), "\r\nMIME-Version: 1.0\r\n")
	require.Contains(t, string(head), "\r\nMessage-ID: <"+m.MessageID+">\r\n")
	// RFC 6532 §3.2: UTF-8 addresses are written raw, never encoded.
	require.Contains(t, string(head), "<用户@例子.example>")
	// RFC 2047 §2: lines holding encoded-words stay within 76 characters.
	for _, l := range strings.Split(string(head), "\r\n") {
		if strings.Contains(l, "=?") {
			require.LessOrEqual(t, len(l), 76, l)
		}
	}

	mr, err := mail.CreateReader(bytes.NewReader(raw))
	require.NoError(t, err)
	h := mr.Header

	subject, err := h.Subject()
	require.NoError(t, err)
	require.Equal(t, m.Subject, subject)

	from, err := h.AddressList("From")
	require.NoError(t, err)
	require.Equal(t, []*mail.Address{{Name: m.From.Name, Address: m.From.Addr}}, from)
	to, err := h.AddressList("To")
	require.NoError(t, err)
	require.Equal(t, []*mail.Address{{Name: "Bob", Address: "bob@example.com"}, {Address: "用户@例子.example"}}, to)
	cc, err := h.AddressList("Cc")
	require.NoError(t, err)
	require.Equal(t, []*mail.Address{{Name: "Ça va", Address: "carol@example.com"}}, cc)
	replyTo, err := h.AddressList("Reply-To")
	require.NoError(t, err)
	require.Equal(t, []*mail.Address{{Address: "support@acme.example"}}, replyTo)

	date, err := h.Date()
	require.NoError(t, err)
	require.True(t, date.Equal(testDate), "date %v", date)
	require.Equal(t, "Sun, 22 Nov 2026 10:00:00 +0100", h.Get("Date"))

	id, err := h.MessageID()
	require.NoError(t, err)
	require.Equal(t, m.MessageID, id)

	note, err := h.Text("X-Note")
	require.NoError(t, err)
	require.Equal(t, "naïve", note)
	require.Equal(t, "<https://acme.example/u/1>, <mailto:u@acme.example>", h.Get("List-Unsubscribe"))
	require.False(t, h.Has("Bcc"))
}

func TestBuildOptionalHeaders(t *testing.T) {
	m := base()
	m.To, m.Subject, m.MessageID = nil, "", ""
	m.Text = "hi"
	raw, _ := build(t, m)
	head, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
	require.NotContains(t, string(head), "To:")
	require.NotContains(t, string(head), "Subject:")
	require.NotContains(t, string(head), "Message-ID:")
}

func TestBuildBodies(t *testing.T) {
	m := base()
	m.Text = "Line one\nLine two has trailing spaces   \r\nünïcödé = 100% \tand a very long line " + strings.Repeat("word ", 40)
	m.HTML = `<p style="margin:0">Héllo</p>` + "\n<p>=?not-a-word?= --=_ </p>"
	pdf := Attachment{Filename: "invoice.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.4\n%%EOF\n")}
	utf := Attachment{Filename: "reçu n° 1042 – été.pdf", ContentType: "application/pdf; x-param=1", Content: bytes.Repeat([]byte{0, 0xff, '\r', '\n'}, 100)}
	long := Attachment{Filename: strings.Repeat("très-long-nom-de-fichier ", 20) + ".txt", ContentType: "text/plain", Content: []byte("x")}
	logo := Attachment{Filename: "logo.png", ContentType: "image/png", ContentID: "<logo@acme>", Content: []byte{0x89, 'P', 'N', 'G'}}
	m.Attachments = []Attachment{pdf, utf, long, logo}
	raw, parts := build(t, m)

	crlf := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n") }
	require.Equal(t, crlf(m.Text), string(parts[3].body))
	require.Equal(t, crlf(m.HTML), string(parts[4].body))

	mr, err := mail.CreateReader(bytes.NewReader(raw))
	require.NoError(t, err)
	type file struct {
		name, contentType, cid string
		inline                 bool
		content                []byte
	}
	var files []file
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(p.Body)
		require.NoError(t, err)
		switch h := p.Header.(type) {
		case *mail.AttachmentHeader:
			name, err := h.Filename()
			require.NoError(t, err)
			ct, _, err := h.ContentType()
			require.NoError(t, err)
			files = append(files, file{name, ct, h.Get("Content-Id"), false, body})
		case *mail.InlineHeader:
			if ct, _, _ := h.ContentType(); !strings.HasPrefix(ct, "text/") {
				_, params, err := h.ContentDisposition()
				require.NoError(t, err)
				files = append(files, file{params["filename"], ct, h.Get("Content-Id"), true, body})
			}
		}
	}
	require.Equal(t, []file{
		{"logo.png", "image/png", "<logo@acme>", true, logo.Content},
		{pdf.Filename, "application/pdf", "", false, pdf.Content},
		{utf.Filename, "application/pdf", "", false, utf.Content},
		{long.Filename, "text/plain", "", false, long.Content},
	}, files)

	// The UTF-8 filename is RFC 2231 encoded in both parameters, and the
	// caller's content-type parameters are kept.
	p := parts[len(parts)-2]
	require.Equal(t, "1", p.params["x-param"])
	require.Equal(t, utf.Filename, p.params["name"])
	require.Contains(t, p.header.Get("Content-Disposition"), "filename*0*=utf-8''re%C3%A7u%20n%C2%B0")
}

func TestBuildLongLines(t *testing.T) {
	m := base()
	m.HTML = "<p>" + strings.Repeat("é", 800) + strings.Repeat("a", 1200) + "</p>"
	require.GreaterOrEqual(t, len([]rune(m.HTML)), 2000)
	m.GenerateText = true
	m.Subject = strings.Repeat("x", 2500)
	m.From.Name = strings.Repeat("Ñ", 300)
	m.Headers = []Header{{Name: "X-Long", Value: strings.Repeat("token", 400)}}
	big := make([]byte, 5<<20)
	for i := range big {
		big[i] = byte(i * 7 % 251)
	}
	m.Attachments = []Attachment{{Filename: "big.bin", Content: big}}
	_, parts := build(t, m)

	require.Len(t, parts, 5)
	require.Equal(t, big, parts[4].body)
	require.Equal(t, m.HTML, string(parts[3].body))
	require.Equal(t, TextFromHTML(m.HTML), string(parts[2].body))
}

func TestBuildBoundaries(t *testing.T) {
	m := base()
	m.Text, m.HTML = "hi", "<p>hi</p>"
	raw1, err := Build(m)
	require.NoError(t, err)
	raw2, err := Build(m)
	require.NoError(t, err)
	require.Equal(t, raw1, raw2, "Build is not deterministic")

	b := boundary("alternative", m.MessageID)
	require.Contains(t, string(raw1), "\r\n--"+b+"--\r\n")

	m.MessageID = "other@acme.example"
	raw3, err := Build(m)
	require.NoError(t, err)
	require.NotContains(t, string(raw3), b)

	// Content that spells out the delimiter cannot end the part early:
	// quoted-printable writes "=" as "=3D" (RFC 2045 §6.7).
	m.MessageID = base().MessageID
	m.Text = "--" + b + "\n--" + b + "--\n"
	_, parts := build(t, m)
	require.Len(t, parts, 3)
	require.Equal(t, "--"+b+"\r\n--"+b+"--\r\n", string(parts[1].body))
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(m *Message)
		want string
	}{
		{"no from", func(m *Message) { m.From = Address{} }, "missing from address"},
		{"no date", func(m *Message) { m.Date = time.Time{} }, "missing date"},
		{"address without at", func(m *Message) { m.To[0].Addr = "bob" }, `to address "bob": not local@domain`},
		{"address without domain", func(m *Message) { m.Cc = []Address{{Addr: "bob@"}} }, "cc address"},
		{"header injection", func(m *Message) { m.To[0].Addr = "bob@x.com\r\nBcc: e@vil" }, "to address"},
		{"space in domain", func(m *Message) { m.To[0].Addr = "bob@x .com" }, "invalid character ' ' in domain"},
		{"control in local part", func(m *Message) { m.ReplyTo = []Address{{Addr: "b\x00b@x.com"}} }, "reply-to address"},
		{"invalid utf-8 address", func(m *Message) { m.From.Addr = "\xff@x.com" }, "not UTF-8"},
		{"bcc header", func(m *Message) { m.Headers = []Header{{"BCC", "x@y.z"}} }, `header "BCC" is reserved`},
		{"content header", func(m *Message) { m.Headers = []Header{{"Content-Type", "text/plain"}} }, "reserved"},
		{"duplicate subject", func(m *Message) { m.Headers = []Header{{"subject", "x"}} }, "reserved"},
		{"empty header name", func(m *Message) { m.Headers = []Header{{"", "x"}} }, "empty header name"},
		{"bad header name", func(m *Message) { m.Headers = []Header{{"X Bad", "x"}} }, "invalid header name"},
		{"header value with newline", func(m *Message) { m.Headers = []Header{{"X-A", "a\r\nBcc: e@vil"}} }, "CR or LF"},
		{"message id with brackets", func(m *Message) { m.MessageID = "<a@b>" }, "invalid message id"},
		{"message id without at", func(m *Message) { m.MessageID = "abc" }, "invalid message id"},
		{"bad content type", func(m *Message) { m.Attachments = []Attachment{{ContentType: "image/"}} }, "attachment 0: invalid content type"},
		{"multipart content type", func(m *Message) { m.Attachments = []Attachment{{ContentType: "multipart/mixed; boundary=x"}} }, "not a file type"},
		{"header value with control", func(m *Message) { m.Headers = []Header{{"X-A", "a\x01b"}} }, "control character U+0001"},
		{"header value not utf-8", func(m *Message) { m.Headers = []Header{{"X-A", "a\xffb"}} }, "not valid UTF-8"},
		{"content-disposition header", func(m *Message) { m.Headers = []Header{{"Content-Disposition", "attachment"}} }, "reserved"},
		{"dkim-signature header", func(m *Message) { m.Headers = []Header{{"DKIM-Signature", "v=1"}} }, "reserved"},
		{"bad content id", func(m *Message) { m.Attachments = []Attachment{{ContentID: "a b"}} }, "invalid content id"},
		{"empty content id", func(m *Message) { m.Attachments = []Attachment{{ContentID: "<>"}} }, "invalid content id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			m.Text = "hi"
			tt.edit(&m)
			_, err := Build(m)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestBuildGolden(t *testing.T) {
	html, err := os.ReadFile(filepath.Join("testdata", "full.html"))
	require.NoError(t, err)
	logo, err := os.ReadFile(filepath.Join("testdata", "logo.png"))
	require.NoError(t, err)
	m := Message{
		From:         Address{Name: "Boutique Zoë", Addr: "commandes@boutique.example"},
		To:           []Address{{Name: "Jean Dupont", Addr: "jean@example.fr"}, {Addr: "françois@xn--exmple-cua.example"}},
		Cc:           []Address{{Name: "Comptabilité", Addr: "compta@boutique.example"}},
		ReplyTo:      []Address{{Name: "Service client", Addr: "aide@boutique.example"}},
		Subject:      "Votre reçu n° 1042 — merci pour votre commande !",
		HTML:         string(html),
		GenerateText: true,
		Headers: []Header{
			{Name: "X-Entity-Ref-ID", Value: "order-1042"},
			{Name: "List-Unsubscribe", Value: "<https://boutique.example/unsubscribe/1042>"},
			{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"},
		},
		Attachments: []Attachment{
			{Filename: "reçu-1042.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.4\n% Posthaste test fixture\n%%EOF\n")},
			{Filename: "logo.png", ContentType: "image/png", ContentID: "logo", Content: logo},
		},
		MessageID: "0192f1e4-7a3b-7c1d-9e2f-3a4b5c6d7e8f@boutique.example",
		Date:      time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
	}
	raw, parts := build(t, m)
	require.Equal(t, []string{
		"multipart/mixed",
		"  multipart/related",
		"    multipart/alternative",
		"      text/plain charset=utf-8 quoted-printable",
		"      text/html charset=utf-8 quoted-printable",
		"    image/png base64 inline <logo>",
		"  application/pdf base64 attachment",
	}, tree(parts))
	require.True(t, needsSMTPUTF8(m))

	golden := filepath.Join("testdata", "full.eml")
	if *update {
		require.NoError(t, os.WriteFile(golden, raw, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), string(raw), "run go test -run TestBuildGolden -update to accept the change")
}

func TestGenerateText(t *testing.T) {
	tests := []struct {
		name             string
		html, text       string
		generate         bool
		wantText         string // "" for no text part
		wantHTMLOnlyPart bool
	}{
		{"derived from html", "<p>Hi <b>there</b></p>", "", true, "Hi *there*", false},
		{"explicit text wins", "<p>Hi</p>", "Plain", true, "Plain", false},
		{"not asked for", "<p>Hi</p>", "", false, "", true},
		{"html without text content", `<img src="cid:x">`, "", true, "", true},
		{"no html", "", "", true, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			m.HTML, m.Text, m.GenerateText = tt.html, tt.text, tt.generate
			_, parts := build(t, m)
			var text string
			for _, p := range parts {
				if p.mediaType == "text/plain" {
					text = string(p.body)
				}
			}
			require.Equal(t, tt.wantText, strings.TrimSuffix(text, "\r\n"))
			require.Equal(t, tt.wantHTMLOnlyPart, len(parts) == 1 && parts[0].mediaType == "text/html")
		})
	}
}

func TestNeedsSMTPUTF8(t *testing.T) {
	tests := []struct {
		name string
		edit func(m *Message)
		want bool
	}{
		{"ascii", func(m *Message) {}, false},
		{"utf-8 display names and subject", func(m *Message) {
			m.From.Name, m.To[0].Name, m.Subject = "Zoë", "Ünicode", "Café"
			m.Attachments = []Attachment{{Filename: "été.pdf"}}
			m.Headers = []Header{{"X-Note", "naïve"}}
		}, false},
		{"utf-8 from local part", func(m *Message) { m.From.Addr = "zoë@acme.example" }, true},
		{"utf-8 to domain", func(m *Message) { m.To[0].Addr = "bob@bücher.example" }, true},
		{"utf-8 cc", func(m *Message) { m.Cc = []Address{{Addr: "用户@example.com"}} }, true},
		{"utf-8 reply-to", func(m *Message) { m.ReplyTo = []Address{{Addr: "ответ@example.com"}} }, true},
		{"punycode domain", func(m *Message) { m.To[0].Addr = "bob@xn--bcher-kva.example" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.edit(&m)
			require.Equal(t, tt.want, needsSMTPUTF8(m))
		})
	}
}

func TestFoldField(t *testing.T) {
	tests := []struct {
		name, value string
		maxLine     int
		lossless    bool
	}{
		{"short", "hello", 76, true},
		{"empty", "", 76, true},
		{"words", strings.Repeat("lorem ipsum ", 30), 76, true},
		{"encoded words", stdmime.QEncoding.Encode("utf-8", strings.Repeat("ünïcödé ", 30)), 76, true},
		{"long first word", strings.Repeat("y", 200) + " z", 211, true},
		{"trailing whitespace", strings.Repeat("ab ", 40) + "     ", 76, true},
		{"tabs are not folded", strings.Repeat("ab\t", 40), 998, true},
		{"runs of spaces are not folded", strings.Repeat("ab  ", 40), 998, true},
		{"no whitespace", strings.Repeat("z", 3000), 998, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := foldField("X-Test", tt.value)
			require.NoError(t, err)
			require.True(t, bytes.HasSuffix(raw, []byte("\r\n")))
			lines := strings.Split(strings.TrimSuffix(string(raw), "\r\n"), "\r\n")
			for i, l := range lines {
				require.LessOrEqual(t, len(l), tt.maxLine, "line %d", i)
				require.NotEmpty(t, strings.Trim(l, " \t"), "line %d holds only whitespace", i)
				if i > 0 {
					require.Contains(t, " \t", l[:1], "continuation line %d", i)
				}
			}
			h, err := message.Read(bytes.NewReader(append(raw, "\r\n"...)))
			require.NoError(t, err)
			if tt.lossless {
				// RFC 5322 §2.2.3: unfolding removes the CRLFs only; go-message
				// also trims the leading and trailing whitespace.
				require.Equal(t, strings.Trim(tt.value, " \t"), h.Header.Get("X-Test"))
			} else {
				require.Equal(t, tt.value, strings.ReplaceAll(h.Header.Get("X-Test"), " ", ""))
			}
		})
	}
}

func TestFormatMediaType(t *testing.T) {
	tests := []struct {
		name, value string
		want        string // "" to only check the round trip
	}{
		{"token", "logo.png", "attachment; filename=logo.png"},
		{"quoted", `my "file".pdf`, `attachment; filename="my \"file\".pdf"`},
		{"empty", "", `attachment; filename=""`},
		{"utf-8", "été.pdf", "attachment; filename*=utf-8''%C3%A9t%C3%A9.pdf"},
		{"control characters", "a\r\nb.txt", "attachment; filename*=utf-8''a%0D%0Ab.txt"},
		{"percent and quote", "100% l'été", "attachment; filename*=utf-8''100%25%20l%27%C3%A9t%C3%A9"},
		{"continuations", strings.Repeat("résumé ", 30), ""},
		{"long ascii", strings.Repeat("a", 300), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := formatMediaType("attachment", []param{{"filename", tt.value}})
			if tt.want != "" {
				require.Equal(t, tt.want, got)
			}
			for _, sec := range strings.Split(got, "; ") {
				require.Less(t, len(sec), maxParamLen+5, sec)
			}
			disp, params, err := stdmime.ParseMediaType(got)
			require.NoError(t, err)
			require.Equal(t, "attachment", disp)
			require.Equal(t, tt.value, params["filename"])
		})
	}
}

func ExampleBuild() {
	raw, err := Build(Message{
		From:      Address{Name: "Acme", Addr: "hello@acme.example"},
		To:        []Address{{Addr: "bob@example.com"}},
		Subject:   "Welcome",
		Text:      "Hello Bob",
		MessageID: "welcome-1@acme.example",
		Date:      time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
	})
	if err != nil {
		panic(err)
	}
	fmt.Print(strings.ReplaceAll(string(raw), "\r\n", "\n"))
	// Output:
	// From: "Acme" <hello@acme.example>
	// To: <bob@example.com>
	// Subject: Welcome
	// Date: Sun, 22 Nov 2026 10:00:00 +0000
	// Message-ID: <welcome-1@acme.example>
	// MIME-Version: 1.0
	// Content-Type: text/plain; charset=utf-8
	// Content-Transfer-Encoding: quoted-printable
	//
	// Hello Bob
}

// needsSMTPUTF8 reports whether the local part or domain of an address in
// the header (From, To, Cc, Reply-To) is not ASCII, so that the message may
// only be relayed with the SMTPUTF8 extension (RFC 6531 §3.4, RFC 6532
// §3.2). Display names, the subject, custom headers and filenames never
// require it: Build encodes them in ASCII. (Delivery decides SMTPUTF8 from
// the transaction: internal/mta.)
func needsSMTPUTF8(m Message) bool {
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
