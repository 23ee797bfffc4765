package main

import (
	"fmt"
	"net/smtp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/dnstest"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
)

// TestDevInboundLimits runs `posthaste dev` with small POSTHASTE_INBOUND_*
// limits: once a team's receiving domain took its day's budget (one
// message), its recipient is refused at RCPT with 452 while another team's
// domain in the same transaction still receives; and beyond two
// transactions from 127.0.0.1 in the minute, MAIL FROM is refused with 450.
func TestDevInboundLimits(t *testing.T) {
	dns := dnstest.NewServer(t)
	dbURL := pgtest.NewDatabase(t)
	env := dbDevEnv(t, dbURL)
	env["POSTHASTE_DNS_SERVER"] = dns.Addr()
	env["POSTHASTE_HOSTNAME"] = "posthaste.example"
	env["POSTHASTE_INBOUND_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env["POSTHASTE_INBOUND_RATE_PER_ADDRESS"] = "2"
	env["POSTHASTE_INBOUND_DAILY_MESSAGES"] = "1"
	dev := startDev(t, env)
	defer dev.stop(t)

	for _, name := range []string{"a.test", "b.test"} {
		receivingTeam(t, dbURL, name, 0)
	}

	c, err := smtp.Dial(env["POSTHASTE_INBOUND_LISTEN"])
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Hello("mail.example.net"))
	data := func() {
		w, err := c.Data()
		require.NoError(t, err)
		_, err = w.Write([]byte("From: x@example.net\r\nSubject: hi\r\n\r\nhello\r\n"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	require.NoError(t, c.Mail("x@example.net"))
	require.NoError(t, c.Rcpt("support@a.test"))
	data()

	require.NoError(t, c.Mail("x@example.net"))
	requireCode(t, c.Rcpt("support@a.test"), 452)
	require.NoError(t, c.Rcpt("support@b.test"), "the other team still receives")
	data()

	requireCode(t, c.Mail("x@example.net"), 450)
}
