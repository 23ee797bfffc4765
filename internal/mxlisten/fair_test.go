package mxlisten

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
			h := newHarness(t, options{tune: func(c *Config) { c.ReadTimeout = 3 * time.Second }})
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

// fill opens connections from the addresses of the IPv4 /24 prefix
// (prefix.1, prefix.2...), up to perIP each, until one is refused; it
// returns how many were admitted. They stay open until the test ends.
func (h *harness) fill(prefix string, perIP int) int {
	h.t.Helper()
	admitted := 0
	for i := 1; i < 255; i++ {
		for range perIP {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("%s.%d", prefix, i))},
				Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", h.addr)
			require.NoError(h.t, err)
			h.t.Cleanup(func() { c.Close() })
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			line, err := textproto.NewReader(bufio.NewReader(c)).ReadLine()
			require.NoError(h.t, err)
			if !strings.HasPrefix(line, "220 ") {
				require.True(h.t, strings.HasPrefix(line, "421 "), line)
				return admitted
			}
			admitted++
		}
	}
	h.t.Fatalf("%s.0/24 was never refused", prefix)
	return 0
}

// bounce delivers a DSN to the return path from local.
func (h *harness) bounce(local string) {
	h.t.Helper()
	d := h.dialFrom(&net.TCPAddr{IP: net.ParseIP(local)}, 220)
	d.cmd(250, "EHLO mta.other.example")
	d.cmd(250, "MAIL FROM:<>")
	d.cmd(250, "RCPT TO:<%s>", returnPath)
	d.data(250, testMessage("mailer-daemon@other.example", "Your message could not be delivered.\r\n"))
	d.cmd(221, "QUIT")
}

// One network opening all the connections it can cannot stop another
// from delivering a bounce (issue 33): its clients are capped per /24,
// and a fifth of the total is kept for networks holding none.
func TestOneNetworkCannotTakeEveryConnection(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tune       func(*Config)
		fillers    []string // /24s that open all they can, in turn
		atMostEach int
	}{
		// 10 in all, 3 per address: the reserve (2) stops the /24 at 8.
		{"the reserve", func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 10, 3 }, []string{"127.0.1"}, 8},
		// The per-/24 cap stops it at 4.
		{"the per-network cap", func(c *Config) { c.MaxConns, c.MaxConnsPerIP, c.MaxConnsPerNet = 10, 3, 4 },
			[]string{"127.0.1"}, 4},
		// Two /24s together leave the reserve to a third.
		{"two networks", func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 10, 3 }, []string{"127.0.1", "127.0.3"}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, options{tune: tc.tune})
			total := 0
			for _, p := range tc.fillers {
				n := h.fill(p, 3)
				require.LessOrEqual(t, n, tc.atMostEach, "%s.0/24", p)
				total += n
			}
			require.Positive(t, total)
			h.bounce("127.0.2.1")
			got := h.acc.accepted()
			require.Len(t, got, 1)
			require.Equal(t, "", got[0].MailFrom)
			require.Equal(t, "127.0.2.1", got[0].ClientIP.String())
		})
	}
}

// A session ends with 421 at its deadline, however active, and after a
// run of commands outside a transaction.
func TestSessionDeadlineAndCommandCap(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		h := newHarness(t, options{tune: func(c *Config) { c.SessionTimeout = time.Second }})
		d := h.dial()
		d.cmd(250, "EHLO client.example")
		// Silent, the client is told 421 at the session's end, not
		// after the 5 minute read timeout.
		require.True(t, strings.HasPrefix(d.expect(421), "4.4.2 "))
		_, err := d.tp.ReadLine()
		require.ErrorIs(t, err, io.EOF, "closed after the 421")
		require.Eventually(t, func() bool {
			return testutil.ToFloat64(h.metrics.Connections.WithLabelValues("cut")) == 1
		}, 10*time.Second, 10*time.Millisecond)
	})

	t.Run("commands outside a transaction", func(t *testing.T) {
		h := newHarness(t, options{tune: func(c *Config) { c.MaxIdleCommands = 5 }})
		d := h.dial()
		d.cmd(250, "EHLO client.example")
		for range 3 {
			d.cmd(250, "NOOP")
		}
		d.cmd(250, "MAIL FROM:<>") // the fifth; the transaction starts the count again
		d.cmd(250, "RCPT TO:<%s>", returnPath)
		for range 10 {
			d.cmd(250, "NOOP") // inside a transaction: not counted
		}
		d.data(250, testMessage("mailer-daemon@other.example", "bounce\r\n"))
		for range 5 {
			d.cmd(250, "RSET")
		}
		d.cmd(421, "NOOP")
		_, err := d.tp.ReadLine()
		require.ErrorIs(t, err, io.EOF, "closed after the 421")
		require.Len(t, h.acc.accepted(), 1)
	})
}
