package insights

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.eml from the cases")

// base is an email with nothing to say about it; every case changes it.
func base() Message {
	return Message{
		From:       "Example <hello@example.com>",
		Subject:    "Your order has shipped",
		Text:       "Hi, your order 1234 has shipped. Track it at https://example.com/orders/1234",
		HasText:    true,
		HTML:       `<p>Hi, your order 1234 has shipped.</p><p><a href="https://example.com/orders/1234">Track it</a></p>`,
		Recipients: 1,
		Domain:     &Domain{Name: "example.com", DMARCChecked: true, DMARCPolicy: "reject"},
	}
}

type testCase struct {
	name string // also the fixture's name, testdata/<name>.eml
	code string
	want bool // whether the finding is expected
	edit func(m *Message)
}

func longText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "<p>Paragraph %d of the catalogue: tea, coffee, cocoa and biscuits, in stock now.</p>\n", i)
	}
	return b.String()
}

var cases = []testCase{
	{"no_text", CodeNoTextAlternative, true, func(m *Message) { m.Text, m.HasText = "", false }},
	{"generated_text", CodeNoTextAlternative, false, func(m *Message) { m.Text, m.HasText = "", true }},

	{"html_110kb", CodeHTMLClipped, true, func(m *Message) { m.HTML = longText(110 * 1024) }},
	{"html_90kb", CodeHTMLClipped, false, func(m *Message) { m.HTML = longText(90 * 1024) }},

	{"image_only", CodeMostlyImages, true, func(m *Message) {
		m.HTML = `<a href="https://example.com/sale"><img src="https://example.com/banner.png" alt=""></a><p>Sale!</p>`
	}},
	{"logo_and_text", CodeMostlyImages, false, func(m *Message) {
		m.HTML = `<img src="https://example.com/logo.png" alt="Example"><p>Hi, your order 1234 has shipped and ` +
			`should arrive on Thursday between 9 and 5. <a href="https://example.com/orders/1234">Track it</a> or reply ` +
			`to this email if anything looks wrong.</p>`
	}},

	{"link_elsewhere", CodeUnrelatedLinkDomains, true, func(m *Message) {
		m.HTML = `<p>Hi, your order has shipped. <a href="https://parcels-tracking.net/t/1234">Track it</a></p>`
	}},
	{"link_subdomains", CodeUnrelatedLinkDomains, false, func(m *Message) {
		m.HTML = `<p>Hi, your order has shipped. <a href="https://www.example.com/t/1234">Track it</a>, ` +
			`<a href="https://help.example.com/">get help</a> or <a href="mailto:help@example.com">write</a>.</p>`
	}},

	{"shortener", CodeURLShortener, true, func(m *Message) {
		m.Text = "Track your order: https://bit.ly/3xYz12"
	}},
	{"shortener_lookalike", CodeURLShortener, false, func(m *Message) {
		m.Text = "Track your order: https://tinyurl.example.com/orders/1234"
	}},

	{"bulk_recipients", CodeBulkWithoutUnsubscribe, true, func(m *Message) { m.Recipients = 12 }},
	{"bulk_precedence", CodeBulkWithoutUnsubscribe, true, func(m *Message) {
		m.Headers = []Header{{"Precedence", "bulk"}}
	}},
	{"bulk_with_unsubscribe", CodeBulkWithoutUnsubscribe, false, func(m *Message) {
		m.Recipients = 12
		m.Headers = []Header{{"List-Unsubscribe", "<https://example.com/unsubscribe/1>"},
			{"List-Unsubscribe-Post", "List-Unsubscribe=One-Click"}}
	}},
	{"topic", CodeBulkWithoutUnsubscribe, false, func(m *Message) { m.Topic, m.AutoUnsubscribe = true, true }},

	{"reset_tracked", CodeTrackingOnSensitive, true, func(m *Message) {
		m.Subject = "Reset your password"
		m.Text = "Someone asked to reset your password. Use https://example.com/reset?t=abc within an hour."
		m.HTML = `<p>Someone asked to reset your password. <a href="https://example.com/reset?t=abc">Reset it</a>.</p>`
		m.Domain.ClickTracking = true
	}},
	{"reset_untracked", CodeTrackingOnSensitive, false, func(m *Message) {
		m.Subject = "Reset your password"
		m.Domain.ClickTracking, m.Domain.OpenTracking = false, false
	}},
	{"newsletter_tracked", CodeTrackingOnSensitive, false, func(m *Message) {
		m.Subject = "Our November news"
		m.Domain.OpenTracking, m.Domain.ClickTracking = true, true
	}},

	{"dmarc_missing", CodeDMARCMissing, true, func(m *Message) { m.Domain.DMARCPolicy = "" }},
	{"dmarc_unchecked", CodeDMARCMissing, false, func(m *Message) { m.Domain.DMARCChecked = false }},
	{"sandbox", CodeDMARCMissing, false, func(m *Message) { m.Domain = nil }},
	{"dmarc_none", CodeDMARCNone, true, func(m *Message) { m.Domain.DMARCPolicy = "none" }},
	{"dmarc_quarantine", CodeDMARCNone, false, func(m *Message) { m.Domain.DMARCPolicy = "quarantine" }},

	{"from_name_address", CodeFromNameIsAddress, true, func(m *Message) {
		m.From = `"billing@paypal.com" <hello@example.com>`
	}},
	{"from_name_plain", CodeFromNameIsAddress, false, func(m *Message) { m.From = "Example Billing <hello@example.com>" }},

	{"noreply", CodeNoReplyWithoutReplyTo, true, func(m *Message) { m.From = "Example <no-reply@example.com>" }},
	{"noreply_with_reply_to", CodeNoReplyWithoutReplyTo, false, func(m *Message) {
		m.From = "Example <no-reply@example.com>"
		m.ReplyTo = []string{"Support <support@example.com>"}
	}},

	{"attachment_exe", CodeRiskyAttachment, true, func(m *Message) {
		m.Attachments = []Attachment{{"invoice.pdf.exe", "application/octet-stream"}}
	}},
	{"attachment_macro", CodeRiskyAttachment, true, func(m *Message) {
		m.Attachments = []Attachment{{"report.xlsm", "application/vnd.ms-excel.sheet.macroEnabled.12"}}
	}},
	{"attachment_html", CodeRiskyAttachment, true, func(m *Message) {
		m.Attachments = []Attachment{{"statement.html", "text/html"}}
	}},
	{"attachment_pdf", CodeRiskyAttachment, false, func(m *Message) {
		m.Attachments = []Attachment{{"invoice.pdf", "application/pdf"}}
	}},

	{"caps_subject", CodeAllCapsSubject, true, func(m *Message) { m.Subject = "FINAL NOTICE: ACT NOW!!!" }},
	{"caps_acronym", CodeAllCapsSubject, false, func(m *Message) { m.Subject = "FAQ 2026" }},
	{"sentence_subject", CodeAllCapsSubject, false, func(m *Message) { m.Subject = "Final notice: act now" }},
}

func (tc testCase) message() Message {
	m := base()
	tc.edit(&m)
	return m
}

func codes(fs []Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

func TestBaseHasNoFindings(t *testing.T) {
	got := Check(base())
	require.NotNil(t, got)
	require.Empty(t, got)
}

func TestCheck(t *testing.T) {
	triggered := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := Check(tc.message())
			require.Equal(t, tc.want, contains(fs, tc.code), "findings: %v", codes(fs))
			for _, f := range fs {
				require.Contains(t, []string{SeverityInfo, SeverityWarning, SeverityError}, f.Severity)
				require.NotEmpty(t, f.Message)
				require.NotEmpty(t, f.Fix)
			}
		})
		if tc.want {
			triggered[tc.code] = true
		}
	}
	for _, c := range []string{CodeNoTextAlternative, CodeHTMLClipped, CodeMostlyImages, CodeUnrelatedLinkDomains,
		CodeURLShortener, CodeBulkWithoutUnsubscribe, CodeTrackingOnSensitive, CodeDMARCMissing, CodeDMARCNone,
		CodeFromNameIsAddress, CodeNoReplyWithoutReplyTo, CodeRiskyAttachment, CodeAllCapsSubject} {
		require.True(t, triggered[c], "no case triggers %s", c)
	}
}

func contains(fs []Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}

func TestContainsWord(t *testing.T) {
	for _, tc := range []struct {
		hay, w string
		want   bool
	}{
		{" your otp is 1234 ", "otp", true},
		{" hotpot recipes ", "otp", false},
		{" 2fa: on ", "2fa", true},
		{" reset your password. ", "reset your password", true},
	} {
		require.Equal(t, tc.want, containsWord(tc.hay, tc.w), tc.hay)
	}
}

func TestFromSource(t *testing.T) {
	raw := []byte("From: Example <no-reply@example.com>\r\nTo: a@example.org\r\nSubject: Hi\r\n" +
		"Precedence: bulk\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: multipart/alternative; boundary=\"b2\"\r\n\r\n" +
		"--b2\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b2\r\nContent-Type: text/html\r\n\r\n<p>hi</p>\r\n--b2--\r\n" +
		"--b1\r\nContent-Type: application/octet-stream; name=\"setup.exe\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		"TVo=\r\n--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"a.pdf\"\r\n\r\n%PDF\r\n--b1--\r\n")
	hs, atts := FromSource(raw)
	require.Equal(t, []Attachment{{"setup.exe", "application/octet-stream"}, {"a.pdf", "application/pdf"}}, atts)
	require.Equal(t, "bulk", headerValue(hs, "precedence"))
	m := Message{From: "Example <no-reply@example.com>", Subject: "Hi", Text: "hi", HTML: "<p>hi</p>", HasText: true,
		Headers: hs, Attachments: atts, Recipients: 1}
	require.Equal(t, []string{CodeBulkWithoutUnsubscribe, CodeNoReplyWithoutReplyTo, CodeRiskyAttachment}, codes(Check(m)))

	hs, atts = FromSource([]byte("not a message"))
	require.Nil(t, hs)
	require.Nil(t, atts)
}

// eml renders a case's message as the fixture SpamAssassin reads.
func eml(name string, m Message) []byte {
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", m.From)
	var to []string
	for i := 0; i < max(m.Recipients, 1); i++ {
		to = append(to, fmt.Sprintf("customer%d@example.org", i+1))
	}
	h("To", strings.Join(to, ", "))
	if len(m.ReplyTo) > 0 {
		h("Reply-To", strings.Join(m.ReplyTo, ", "))
	}
	h("Subject", m.Subject)
	h("Date", "Wed, 25 Nov 2026 01:00:00 +0000")
	h("Message-ID", "<"+name+".fixture@example.com>")
	for _, x := range m.Headers {
		h(x.Name, x.Value)
	}
	h("MIME-Version", "1.0")
	text := m.Text
	if m.HasText && text == "" {
		text = parseHTML(m.HTML).text // as Posthaste generates it
	}
	var parts [][2]string // content type, body
	if m.HasText {
		parts = append(parts, [2]string{"text/plain; charset=utf-8", text})
	}
	if m.HTML != "" {
		parts = append(parts, [2]string{"text/html; charset=utf-8", m.HTML})
	}
	body := func(ps [][2]string, boundary string) string {
		if len(ps) == 1 {
			return "Content-Type: " + ps[0][0] + "\r\n\r\n" + crlf(ps[0][1]) + "\r\n"
		}
		var s strings.Builder
		fmt.Fprintf(&s, "Content-Type: multipart/alternative; boundary=%q\r\n\r\n", boundary)
		for _, p := range ps {
			fmt.Fprintf(&s, "--%s\r\nContent-Type: %s\r\n\r\n%s\r\n", boundary, p[0], crlf(p[1]))
		}
		fmt.Fprintf(&s, "--%s--\r\n", boundary)
		return s.String()
	}
	if len(m.Attachments) == 0 {
		b.WriteString(body(parts, "alt"))
		return b.Bytes()
	}
	b.WriteString("Content-Type: multipart/mixed; boundary=\"mixed\"\r\n\r\n--mixed\r\n")
	b.WriteString(body(parts, "alt"))
	for _, a := range m.Attachments {
		fmt.Fprintf(&b, "--mixed\r\nContent-Type: %s; name=%q\r\nContent-Disposition: attachment; filename=%q\r\n"+
			"Content-Transfer-Encoding: base64\r\n\r\n%s\r\n", a.ContentType, a.Filename, a.Filename,
			base64.StdEncoding.EncodeToString([]byte("fixture attachment "+a.Filename)))
	}
	b.WriteString("--mixed--\r\n")
	return b.Bytes()
}

func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// TestFixturesAreCurrent keeps testdata/*.eml in step with the cases; run
// with -update to rewrite them.
func TestFixturesAreCurrent(t *testing.T) {
	for _, tc := range cases {
		path := filepath.Join("testdata", tc.name+".eml")
		want := eml(tc.name, tc.message())
		if *update {
			require.NoError(t, os.WriteFile(path, want, 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "run go test -run TestFixturesAreCurrent -update ./internal/insights/")
		require.Equal(t, string(want), string(got), "%s is stale: run with -update", path)
	}
}
