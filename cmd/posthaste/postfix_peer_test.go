package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/posthaste/posthaste/internal/testkit/postfixtest"
	"github.com/stretchr/testify/require"
)

// postfixPeer is a throwaway Postfix (internal/postfixtest) that plays a
// recipient's MX: its smtpd on addr accepts mail for domain, and local
// delivery then fails for every mailbox (the error transport, "5.1.1
// Mailbox does not exist"), so Postfix writes a real RFC 3464 DSN to the
// envelope sender and relays it to relay (our inbound MX).
type postfixPeer struct {
	*postfixtest.Instance
}

// startPostfixPeer starts the peer on addr, as the MX of domain whose
// hostname is mx.<domain>, relaying what it sends to relay, and stops it
// when the test ends.
func startPostfixPeer(t *testing.T, addr, domain, relay string) *postfixPeer {
	t.Helper()
	relayHost, relayPort, err := net.SplitHostPort(relay)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := postfixtest.Start(ctx, postfixtest.Config{
		Domain: domain,
		Addr:   addr,
		Main: map[string]string{
			"myhostname": "mx." + domain,
			// Every mailbox of domain is accepted at RCPT, then fails.
			"smtpd_reject_unlisted_recipient": "no",
			"local_transport":                 "error:5.1.1 Mailbox does not exist",
			// Bounces go to our inbound MX, without DNS.
			"default_transport":       "smtp",
			"relayhost":               "[" + relayHost + "]:" + relayPort,
			"smtp_dns_support_level":  "disabled",
			"smtp_tls_security_level": "none",
		},
		Services: []string{
			"smtp unix - - n - - smtp",
			"relay unix - - n - - smtp",
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, in.Stop()) })
	return &postfixPeer{Instance: in}
}

// log is the instance's log so far.
func (p *postfixPeer) log() string { return p.Log() }
