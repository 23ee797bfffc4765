package smtpgw_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

// A DATA whose last line ends in a bare CR gets its answer at once on
// both listeners (STARTTLS and implicit TLS). go-smtp v0.25.1 missed the
// end of data after "\r\r\n" and waited for more until the read timed
// out (issue 33); the ReadTimeout is short here so that the test fails
// fast against that reader.
func TestBareCRBeforeTheEndOfData(t *testing.T) {
	h := newHarness(t, options{readTimeout: 3 * time.Second})
	for _, addr := range []string{h.starttls, h.implicit} {
		d := h.login(addr)
		d.cmd(250, "MAIL FROM:<onboarding@posthaste.test>")
		d.cmd(250, "RCPT TO:<delivered@posthaste.test>")
		d.cmd(354, "DATA")
		msg := "From: Posthaste <onboarding@posthaste.test>\r\nTo: delivered@posthaste.test\r\n" +
			"Subject: Bare CR\r\n\r\nfirst\r\n..stuffed\r\nlast line\r"
		_, err := io.WriteString(d.conn, msg+"\r\n.\r\n")
		require.NoError(t, err)
		id := emailID(t, d.expect(250))
		d.cmd(250, "NOOP") // still in step
		d.cmd(221, "QUIT")

		built, err := storetest.EmailForBuild(context.Background(), h.st, id)
		require.NoError(t, err)
		src := string(built.Source)
		require.Contains(t, src, "\r\n.stuffed\r\n", "the dot is unstuffed")
		require.NotContains(t, src, "\r\n.\r\n", "the end marker is not in the message")
		require.True(t, strings.Contains(src, "last line"), src)
	}
}

// A session ends with 421 at its deadline and after a run of commands
// outside a transaction, on both listeners (through TLS).
func TestSessionDeadlineAndCommandCap(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		h := newHarness(t, options{sessionTimeout: 3 * time.Second})
		for _, addr := range []string{h.starttls, h.implicit} {
			d := h.dial(addr)
			d.cmd(250, "EHLO client.test")
			// Silent, the client is told 421 at the session's end, not
			// after the 5 minute read timeout.
			require.True(t, strings.HasPrefix(d.expect(421), "4.4.2 "))
		}
	})
	t.Run("commands outside a transaction", func(t *testing.T) {
		h := newHarness(t, options{maxIdleCommands: 6})
		for _, addr := range []string{h.starttls, h.implicit} {
			d := h.login(addr) // EHLO, STARTTLS, EHLO, AUTH: 4 (implicit TLS: the handshake, EHLO, AUTH: 3)
			d.cmd(250, "MAIL FROM:<onboarding@posthaste.test>")
			d.cmd(250, "RCPT TO:<delivered@posthaste.test>")
			d.data(250, sandboxMsg)
			for range 6 {
				d.cmd(250, "NOOP")
			}
			d.cmd(421, "NOOP")
		}
	})
}
