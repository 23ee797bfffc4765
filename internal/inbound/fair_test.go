package inbound

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A DATA whose last line ends in a bare CR gets its answer at once, over
// plain text and over STARTTLS. go-smtp v0.25.1 missed the end of data
// after "\r\r\n" and waited for more until the read timed out (issue 33);
// the server's ReadTimeout is short here so that the test fails fast,
// with a 451, against that reader.
func TestBareCRBeforeTheEndOfData(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plain", false}, {"starttls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, options{readTimeout: 3 * time.Second})
			d := h.dial()
			d.cmd(250, "EHLO client.example")
			if tc.tls {
				d.startTLS(h.roots)
				d.cmd(250, "EHLO client.example")
			}
			d.cmd(250, "MAIL FROM:<>")
			d.cmd(250, "RCPT TO:<%s>", returnPath)
			d.cmd(354, "DATA")
			msg := testMessage("mailer-daemon@example.org", "first\r\n.stuffed\r\nlast line\r")
			_, err := io.WriteString(d.conn, string(bytes.ReplaceAll(msg, []byte("\n."), []byte("\n.."))))
			require.NoError(t, err)
			_, err = io.WriteString(d.conn, "\r\n.\r\n")
			require.NoError(t, err)
			d.expect(250) // within expect's read deadline, long before any client timeout
			got := h.acc.accepted()
			require.Len(t, got, 1)
			require.True(t, bytes.HasSuffix(got[0].Data, []byte("first\r\n.stuffed\r\nlast line\r\r\n")),
				"the data ends where the client ended it: %q", got[0].Data)
			d.cmd(250, "NOOP") // the dialog is still in step
			d.cmd(221, "QUIT")
		})
	}
}
