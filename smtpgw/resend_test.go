package smtpgw_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"net/smtp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

// A configuration written for Resend works unchanged: the user name
// "resend" authenticates as "posthaste" does (same API-key password), over
// PLAIN and LOGIN, and Resend's test sender and addresses are the sandbox.
func TestResendUsernameAndTestAddresses(t *testing.T) {
	h := newHarness(t, options{})

	// PLAIN with the right key; a wrong key is still refused.
	d := h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	d.cmd(535, "AUTH PLAIN %s", plain("resend", "re_"+"wrongwrongwrongwrongwrongwrongwrongwrong"))
	d.cmd(235, "AUTH PLAIN %s", plain("resend", h.key))
	d.cmd(221, "QUIT")

	// LOGIN.
	d = h.dial(h.implicit)
	d.cmd(250, "EHLO client.test")
	d.cmd(334, "AUTH LOGIN")
	d.cmd(334, "%s", base64.StdEncoding.EncodeToString([]byte("resend")))
	d.cmd(235, "%s", base64.StdEncoding.EncodeToString([]byte(h.key)))
	d.cmd(221, "QUIT")

	// Other names stay refused, "Resend" included: the names are exact.
	for _, user := range []string{"Resend", "resend ", "someone"} {
		d = h.dial(h.implicit)
		d.cmd(250, "EHLO client.test")
		d.cmd(535, "AUTH PLAIN %s", plain(user, h.key))
	}

	// A Go net/smtp client configured as for Resend, over STARTTLS, sending
	// from Resend's test sender to its test addresses.
	c, err := smtp.Dial(h.starttls)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("client.test"))
	require.NoError(t, c.StartTLS(&tls.Config{RootCAs: h.roots, ServerName: "localhost"}))
	require.NoError(t, c.Auth(smtp.PlainAuth("", "resend", h.key, "127.0.0.1")))
	require.NoError(t, c.Mail("onboarding@resend.dev"))
	require.NoError(t, c.Rcpt("delivered+smtp@resend.dev"))
	require.NoError(t, c.Rcpt("bounced@resend.dev"))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write([]byte("From: Acme <onboarding@resend.dev>\r\nTo: delivered+smtp@resend.dev, bounced@resend.dev\r\n" +
		"Subject: Resend config\r\n\r\nHi.\r\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())

	// Only onboarding@ is the sandbox sender of resend.dev.
	err = c.Mail("hello@resend.dev")
	require.ErrorContains(t, err, "The sandbox domain resend.dev can only send from onboarding@resend.dev.")
	require.NoError(t, c.Quit())

	emails, _, err := h.st.Emails.ListEmails(context.Background(), h.team, store.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, emails, 1)
	require.Equal(t, "Resend config", emails[0].Subject)
	e, err := h.st.Emails.GetEmail(context.Background(), h.team, emails[0].ID)
	require.NoError(t, err)
	require.Equal(t, "resend.dev", e.FromDomain)
	require.Equal(t, []string{"delivered+smtp@resend.dev", "bounced@resend.dev"}, e.To)
}
