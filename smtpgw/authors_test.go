package smtpgw_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/mime"
	"github.com/posthaste/posthaste/internal/store"
)

// Sender, Resent-From and Resent-Sender name who a message is from, as
// From does: each must be an address the team may send as.
func TestAuthorFieldsAreCheckedLikeFrom(t *testing.T) {
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	send := func(code int, field string) string {
		t.Helper()
		d.cmd(250, "MAIL FROM:<bounces@example.test>")
		d.cmd(250, "RCPT TO:<a@dest.test>")
		return d.data(code, strings.Replace(domainMsg, "To: ", field+"\r\nTo: ", 1))
	}
	for _, tc := range []struct{ field, want string }{
		{"Sender: ceo@bank.test", "5.7.1 The bank.test domain is not verified"},
		{"Sender: Acme <other@posthaste.test>", "5.7.1 The sandbox domain posthaste.test can only send from onboarding@posthaste.test."},
		{"Resent-From: security@bank.test", "5.7.1 The bank.test domain is not verified"},
		// Every Resent-From of every resent block, every address in one.
		{"Resent-From: news@example.test\r\nResent-From: ok@example.test, ceo@bank.test", "5.7.1 The bank.test domain"},
		{"Resent-Sender: ceo@bank.test", "5.7.1 The bank.test domain"},
		{"Sender: not an address", "5.6.0"},
	} {
		code := 550
		if strings.HasPrefix(tc.want, "5.6.0") {
			code = 554
		}
		require.Contains(t, send(code, tc.field), tc.want, tc.field)
	}
	emails, _, err := h.st.Emails.ListEmails(context.Background(), h.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, emails, "none was accepted")

	// Addresses of the team's verified domain pass.
	emailID(t, send(250, "Sender: Desk <desk@example.test>\r\nResent-From: news@example.test\r\nResent-Sender: ops@example.test"))
}

// A message whose multipart bodies nest deeper than mime.MaxNesting is
// refused with a reply that says so; one at the limit is accepted.
func TestDeepMIMENestingIsRefused(t *testing.T) {
	nested := func(depth int) string {
		var b strings.Builder
		b.WriteString("From: Acme <news@example.test>\r\nTo: a@dest.test\r\nSubject: deep\r\nMIME-Version: 1.0\r\n")
		for i := range depth {
			fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n", i, i)
		}
		b.WriteString("Content-Type: text/plain\r\n\r\nHello\r\n")
		for i := depth - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "--b%d--\r\n", i)
		}
		return b.String()
	}
	h := newHarness(t, options{})
	d := h.login(h.implicit)
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	require.Equal(t, fmt.Sprintf("5.6.0 The message's multipart bodies nest more than %d deep.", mime.MaxNesting),
		d.data(554, nested(5000)))

	// The session goes on; the limit itself is fine.
	d.cmd(250, "MAIL FROM:<news@example.test>")
	d.cmd(250, "RCPT TO:<a@dest.test>")
	id := emailID(t, d.data(250, nested(mime.MaxNesting)))
	e, err := h.st.Emails.GetEmail(context.Background(), h.team, id)
	require.NoError(t, err)
	require.NotNil(t, e.Text)
	require.Equal(t, "Hello", *e.Text, "the innermost text part is found")
}
