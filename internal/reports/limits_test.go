package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// dsnWith builds a DSN with n failed recipients and then an attached
// original of padding bytes.
func dsnWith(n, padding int) string {
	var b strings.Builder
	b.WriteString("From: MAILER-DAEMON@mx.example.org\r\nTo: bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60@send.example.com\r\n" +
		"Content-Type: multipart/report; report-type=delivery-status; boundary=B\r\n\r\n--B\r\n\r\nfailed\r\n" +
		"--B\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example.org\r\n")
	for i := range n {
		fmt.Fprintf(&b, "\r\nFinal-Recipient: rfc822; r%d@example.org\r\nAction: failed\r\nStatus: 5.1.1\r\n", i)
	}
	b.WriteString("\r\n--B\r\nContent-Type: message/rfc822\r\n\r\nMessage-ID: <m@example.com>\r\n\r\n")
	b.WriteString(strings.Repeat("x", padding))
	b.WriteString("\r\n--B--\r\n")
	return b.String()
}

func TestLimits(t *testing.T) {
	t.Run("recipients", func(t *testing.T) {
		rep, err := Parse(stringsReader(dsnWith(500, 0)), Limits{MaxRecipients: 100})
		require.NoError(t, err)
		require.Equal(t, KindDSN, rep.Kind)
		assert.Len(t, rep.DSN.Recipients, 100)
		assert.True(t, rep.Truncated)

		rep, err = Parse(stringsReader(dsnWith(100, 0)), Limits{MaxRecipients: 100})
		require.NoError(t, err)
		assert.Len(t, rep.DSN.Recipients, 100)
		assert.False(t, rep.Truncated)
	})
	t.Run("bytes", func(t *testing.T) {
		// The report comes before the original: a message cut inside the
		// original still yields its recipients.
		msg := dsnWith(3, 1<<20)
		rep, err := Parse(stringsReader(msg), Limits{MaxBytes: 64 << 10})
		require.NoError(t, err)
		assert.True(t, rep.Truncated)
		require.Equal(t, KindDSN, rep.Kind)
		assert.Len(t, rep.DSN.Recipients, 3)

		// A long original within MaxBytes is no truncation: only its
		// header is read.
		rep, err = Parse(stringsReader(dsnWith(3, 1<<20)), Limits{})
		require.NoError(t, err)
		assert.False(t, rep.Truncated)
		assert.Equal(t, "m@example.com", rep.Original.MessageID)

		// Parse reads no more than MaxBytes(+1 to tell) from its reader.
		cr := &countingReader{r: stringsReader(msg)}
		_, err = Parse(cr, Limits{MaxBytes: 64 << 10})
		require.NoError(t, err)
		assert.LessOrEqual(t, cr.n, int64(64<<10+1))
	})
	t.Run("parts", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("From: a@example.org\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n")
		for range 1000 {
			b.WriteString("--B\r\nContent-Type: text/plain\r\n\r\nx\r\n")
		}
		b.WriteString("--B--\r\n")
		rep, err := Parse(stringsReader(b.String()), Limits{MaxParts: 10})
		require.NoError(t, err)
		assert.Equal(t, 10, rep.Parts)
		assert.True(t, rep.Truncated)

		// Exactly MaxParts parts (the root and 9) is no truncation.
		exact := "From: a@example.org\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n" +
			strings.Repeat("--B\r\nContent-Type: text/plain\r\n\r\nx\r\n", 9) + "--B--\r\n"
		rep, err = Parse(stringsReader(exact), Limits{MaxParts: 10})
		require.NoError(t, err)
		assert.Equal(t, 10, rep.Parts)
		assert.False(t, rep.Truncated)
	})
	t.Run("depth", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("From: a@example.org\r\nContent-Type: multipart/mixed; boundary=B0\r\n\r\n")
		const depth = 2000
		for i := 1; i < depth; i++ {
			fmt.Fprintf(&b, "--B%d\r\nContent-Type: multipart/mixed; boundary=B%d\r\n\r\n", i-1, i)
		}
		rep, err := Parse(stringsReader(b.String()), Limits{MaxDepth: 5, MaxParts: 10000})
		require.NoError(t, err)
		assert.True(t, rep.Truncated)
		assert.LessOrEqual(t, rep.Parts, 6)
	})
	t.Run("defaults", func(t *testing.T) {
		assert.Equal(t, Limits{MaxBytes: 10 << 20, MaxParts: 64, MaxDepth: 5, MaxRecipients: 100}, Limits{}.withDefaults())
		assert.Equal(t, Limits{MaxBytes: 1, MaxParts: 2, MaxDepth: 3, MaxRecipients: 4},
			Limits{MaxBytes: 1, MaxParts: 2, MaxDepth: 3, MaxRecipients: 4}.withDefaults())
	})
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestParseErrors(t *testing.T) {
	_, err := Parse(failingReader{}, Limits{})
	require.ErrorContains(t, err, "reading report: connection reset")

	for _, in := range []string{"", "\r\n\r\nbody only", " \tleading space only"} {
		_, err := Parse(stringsReader(in), Limits{})
		assert.ErrorIs(t, err, ErrNotMessage, "%q", in)
	}

	// Malformed but message-like input is a message of unknown kind, not
	// an error.
	for _, in := range []string{
		"garbage line without colon\r\nFrom: a@example.org\r\n\r\nhi",
		"From: a@example.org\r\nContent-Type: multipart/report; report-type=delivery-status\r\n\r\nno boundary",
		"From: a@example.org\r\nContent-Type: multipart/report; boundary=B\r\n\r\n--B\r\nContent-Type: message/delivery-status\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64!!!\r\n--B--",
		"From: a@example.org\r\nContent-Type: text/plain; charset=x-unknown-charset\r\n\r\n\xff\xfe",
	} {
		rep, err := Parse(stringsReader(in), Limits{})
		require.NoError(t, err, "%q", in)
		assert.NotEmpty(t, rep.Kind)
	}

	// A DSN part whose report names no recipient is a DSN with none.
	rep, err := Parse(bytes.NewReader([]byte("From: MAILER-DAEMON@x.example\r\nContent-Type: multipart/report; boundary=B\r\n\r\n"+
		"--B\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; x.example\r\n\r\nAction: failed\r\n--B--\r\n")), Limits{})
	require.NoError(t, err)
	require.Equal(t, KindDSN, rep.Kind)
	assert.Empty(t, rep.DSN.Recipients)
}
